#!/usr/bin/env bash
# Build, once per machine, every CPython interpreter the test suite walks (so a fresh Debian/Ubuntu
# machine needs no pyenv): CPython 3.8-3.13 built like pyenv builds them (`--enable-shared`, DWARF
# in libpython3.X.so.1.0: the offset tables' reference shape), CPython 3.14 (GIL, static libpython)
# and the free-threaded 3.14t and 3.13t (`--disable-gil`).
#
# Why sources and not the distributions' binary .debs: a binary interpreter runs only where its glibc
# is not newer than the machine's (trixie's 3.13 and noble's 3.12 do not start on bookworm), its
# extension modules need that release's libffi/libssl sonames, and it links libpython statically
# with the DWARF in a separate -dbg package; the tests compare a shared libpython with its DWARF.
# A source build runs on every machine that builds it.
#
# Sources: the distributions' own source packages python3.X: Debian (sid, testing, trixie, bookworm,
# bullseye: 3.9, 3.11, 3.13, 3.14), then Ubuntu (resolute, noble, jammy, focal: 3.8, 3.10, 3.12, and a
# version whose files Debian's mirror does not serve (here python3.14: listed in sid's index,
# answered 404)). Their deb-src indexes are read
# into a private folder under the cache (Dir::State::Lists, Dir::Etc::SourceList, Dir::Cache): the
# machine's apt sources and caches are never touched. Debian's index is checked with the machine's
# Debian keyring; Ubuntu's with Ubuntu's archive key taken from Debian's own ubuntu-keyring package
# (downloaded through sid's signed binary index), so every file is checked against a signed index.
# `apt-get source --download-only` checks the files; the upstream tarball of the source package
# (*.orig.tar.*) is built as it is (the distributions' patches are for their own build layout).
#
# Each interpreter: ./configure --prefix=CACHE/NAME --without-ensurepip [--disable-gil] OPT='-g -O1 -Wall'
# (no PGO, no LTO), make -jJOBS, make altinstall. 3.8-3.13 (GIL): --enable-shared with an RPATH to
# CACHE/NAME/lib, as pyenv does. 3.14, 3.14t, 3.13t: libpython is linked statically into the
# executable (CPython's default, like Debian's /usr/bin/python3.X), which exports _PyRuntime in
# .dynsym. A stripped copy sits next to it (bin/python3.14-stripped): same stdlib, no symbols but
# .dynsym, like a distro build without debug info.
#
# Built for the tests, not for speed: all nine take ~1,250 CPU seconds (11.5 min on 2 cores, two builds
# at a time), about half of what CPython's default recipe costs (3.8: 193 -> 106 CPU s, 3.12: 242 -> 141):
#  - -O1 instead of CPython's -O3 (its -fwrapv kept on 3.8-3.11): a third less compile time. The DWARF
#    (-g) is the same, and so is every struct the offset tables are checked against; the native frames
#    the tests name (take_gil, drop_gil, PyThread_acquire_lock_timed, _PyEval_EvalFrameDefault,
#    PyEval_RestoreThread) are functions of their own as at -O3. What -O1 does not make are -O3's
#    clones (3.8's take_gil.constprop.0, 3.12's _PyEval_EvalFrameDefault.cold): the reading of such
#    names is left to the unit tests. -O2 saves next to nothing (3.12: 158 -> 153 CPU s of make).
#    HANGANALYZE_PYTHONS_OPT=3 builds CPython's own -O3.
#  - no test suite: --disable-test-modules (3.10+: neither Lib/test nor the _test* modules); 3.8/3.9
#    have no such switch: their _test* modules are disabled in Modules/Setup.local and their test
#    folders, still installed, are not byte-compiled.
#  - SKIP_MODULES (below): the extension modules no test imports, _decimal (with its bundled libmpdec)
#    and the CJK codecs the costliest (3.12: 186 -> 158 CPU s of make).
#  - `make altinstall` byte-compiles the stdlib once (optimisation level 0), not three times (-O, -OO:
#    nobody runs these interpreters optimised).
#  - PARALLEL builds at a time (default 2), each make -jJOBS: one build's serial steps (configure,
#    ~20 CPU s each, linking, installing) overlap another's compiling.
# The .done stamp records the recipe (opt=-O1 stdlib=lean). A finished build made another way (a cache
# from before: -O3, the whole stdlib; or another HANGANALYZE_PYTHONS_OPT) is reused as it is, with a
# note on stderr: it has the same configure shape and DWARF, and the suite passes on both; rebuilding
# would cost every machine its whole build again, and rebuilding a cache in place would pull the
# interpreters from under a test run that uses them. rm -rf CACHE/NAME to rebuild one.
#
# The interpreter paths are printed last, one per line: first the builds with debug info, then the
# copies without. Build times go to stderr and to CACHE/NAME/.done. Exit 0: all built. Exit 3: the
# builds whose sources cannot be downloaded here are listed in CACHE/unavailable (and on stderr), all
# others are built. Any other failure (configure, make, a download that breaks) exits 1 with the step
# named, once the builds running beside it have finished.
#
#   HANGANALYZE_PYTHONS         cache folder (default ~/.cache/hanganalyze/pythons)
#   HANGANALYZE_PYTHONS_BUILDS  which builds (default "3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.14t 3.13t")
#   HANGANALYZE_PYTHONS_JOBS    make -j of each build (default 2)
#   HANGANALYZE_PYTHONS_PARALLEL  builds at a time (default 2)
#   HANGANALYZE_PYTHONS_OPT     the C optimisation level (default 1: -O1; 3: CPython's own -O3)
#   HANGANALYZE_PYTHONS_SUITES  Debian suites to look in (default "sid testing trixie bookworm bullseye")
#   HANGANALYZE_PYTHONS_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   HANGANALYZE_PYTHONS_UBUNTU_SUITES  Ubuntu suites to look in next (default "resolute-updates
#                               resolute noble-updates noble jammy-updates jammy focal-updates focal";
#                               empty: Debian only)
#   HANGANALYZE_PYTHONS_UBUNTU_MIRROR  Ubuntu mirror (default http://archive.ubuntu.com/ubuntu)
set -euo pipefail

CACHE="${HANGANALYZE_PYTHONS:-$HOME/.cache/hanganalyze/pythons}"
BUILDS="${HANGANALYZE_PYTHONS_BUILDS:-3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.14t 3.13t}"
JOBS="${HANGANALYZE_PYTHONS_JOBS:-2}"
PARALLEL="${HANGANALYZE_PYTHONS_PARALLEL:-2}"
OPTLEVEL="${HANGANALYZE_PYTHONS_OPT:-1}"
OPTLEVEL="-O${OPTLEVEL#-O}"  # 1 or -O1: -O1
case "$OPTLEVEL" in -O[0-3gsz]) ;; *) echo "pythons.sh: error: HANGANALYZE_PYTHONS_OPT=$OPTLEVEL: 0, 1, 2, 3, g, s or z" >&2; exit 1;; esac
SUITES="${HANGANALYZE_PYTHONS_SUITES:-sid testing trixie bookworm bullseye}"
MIRROR="${HANGANALYZE_PYTHONS_MIRROR:-http://deb.debian.org/debian}"
UBUNTU_SUITES="${HANGANALYZE_PYTHONS_UBUNTU_SUITES-resolute-updates resolute noble-updates noble jammy-updates jammy focal-updates focal}"
UBUNTU_MIRROR="${HANGANALYZE_PYTHONS_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

die() { echo "pythons.sh: error: $*" >&2; exit 1; }
say() { echo "pythons.sh: $*" >&2; }

mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"
# Locks: one per build (CI and a developer, two test sessions building the same one), and one
# around the private apt folder (the index and downloads), so different builds run side by side.
lock() {  # lock FD FILE
    command -v flock >/dev/null || return 0
    eval "exec $1>\"\$2\""
    flock "$1"
}

for tool in gcc make tar xz apt-get dpkg-deb strip; do
    command -v "$tool" >/dev/null || die "$tool not found (needed to build CPython)"
done
[ -x /usr/lib/apt/apt-helper ] || die "/usr/lib/apt/apt-helper not found (apt): it downloads and checks the sources"

interp_of() {  # NAME -> CACHE/NAME/bin/python3.Xt?
    echo "$CACHE/$1/bin/python$1"
}

APT_DIR="$CACHE/apt"
apt_opts() {
    echo -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Etc::SourceList=$APT_DIR/sources.list" \
         -o "Dir::Etc::SourceParts=$APT_DIR/sources.list.d" -o "Dir::Cache=$APT_DIR/cache" \
         -o "Dir::Etc::Preferences=$APT_DIR/preferences" -o "Dir::Etc::PreferencesParts=$APT_DIR/preferences.d" \
         -o APT::Sandbox::User=root -o Debug::NoLocking=1
}
APT_READY=""
apt_index() {  # the private deb-src index (Debian, then Ubuntu), read once per run
    [ -n "$APT_READY" ] && return 0
    local want opt s
    opt="$(debian_opt)"
    want="$(for s in $SUITES; do echo "deb-src [$opt] $MIRROR $s main"; done
            for s in $UBUNTU_SUITES; do
                echo "deb-src [signed-by=$APT_DIR/ubuntu-archive-keyring.gpg] $UBUNTU_MIRROR $s main"
            done)"
    # Read less than 6 hours ago, from the same suites (a cache from an older list is read again).
    if [ -n "$(find "$APT_DIR/lists" -maxdepth 1 -name '*_Sources*' -mmin -360 2>/dev/null | head -1)" ] \
        && [ "$want" = "$(cat "$APT_DIR/sources.list" 2>/dev/null)" ]; then
        APT_READY=1
        return 0
    fi
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/sources.list.d" "$APT_DIR/cache/archives/partial" \
             "$APT_DIR/preferences.d"
    : >"$APT_DIR/preferences"
    [ -z "$UBUNTU_SUITES" ] || ubuntu_keyring
    echo "$want" >"$APT_DIR/sources.list"
    # shellcheck disable=SC2046
    apt-get $(apt_opts) -qq update >"$APT_DIR/update.log" 2>&1 \
        || die "apt-get update of the private deb-src index failed: $(tail -3 "$APT_DIR/update.log")"
    APT_READY=1
}

debian_opt() {  # how Debian's indexes are checked: the machine's Debian keyring
    if [ -r "$KEYRING" ]; then echo "signed-by=$KEYRING"; else
        say "no $KEYRING (apt-get install debian-archive-keyring): Debian's indexes are read unverified"
        echo "trusted=yes"
    fi
}

BIN_READY=""
apt_bin_index() {  # a private binary index of sid (amd64): where Debian's ubuntu-keyring comes from
    [ -n "$BIN_READY" ] && return 0
    if [ -n "$(find "$APT_DIR/bin/lists" -maxdepth 1 -name '*_Packages*' -mmin -360 2>/dev/null | head -1)" ]; then
        BIN_READY=1
        return 0
    fi
    mkdir -p "$APT_DIR/bin/lists/partial" "$APT_DIR/bin/cache/archives/partial" "$APT_DIR/bin/sources.list.d"
    echo "deb [$(debian_opt)] $MIRROR sid main" >"$APT_DIR/bin/sources.list"
    # shellcheck disable=SC2046
    apt-get $(bin_opts) -qq update >"$APT_DIR/bin/update.log" 2>&1 \
        || die "apt-get update of the private sid binary index failed: $(tail -3 "$APT_DIR/bin/update.log")"
    BIN_READY=1
}
bin_opts() {
    apt_opts | sed "s|$APT_DIR/lists|$APT_DIR/bin/lists|; s|$APT_DIR/sources.list |$APT_DIR/bin/sources.list |; s|Dir::Cache=$APT_DIR/cache|Dir::Cache=$APT_DIR/bin/cache|"
    echo -o Acquire::Languages=none -o APT::Architecture=amd64 -o APT::Architectures=amd64
}

ubuntu_keyring() {  # Ubuntu's archive key, from Debian's ubuntu-keyring package (Debian-signed)
    local out="$APT_DIR/ubuntu-archive-keyring.gpg" d="$APT_DIR/ubuntu-keyring"
    [ -s "$out" ] && return 0
    apt_bin_index
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2046
    (cd "$d" && apt-get $(bin_opts) -qq download ubuntu-keyring >download.log 2>&1) \
        || die "apt-get download of Debian's ubuntu-keyring failed: $(tail -3 "$d/download.log")"
    dpkg-deb --fsys-tarfile "$d"/ubuntu-keyring_*.deb | tar -xO ./usr/share/keyrings/ubuntu-archive-keyring.gpg >"$out.tmp" \
        && [ -s "$out.tmp" ] || die "Debian's ubuntu-keyring holds no ubuntu-archive-keyring.gpg"
    mv "$out.tmp" "$out" && rm -rf "$d"
}

source_versions() {  # python3.X -> the versions of that source package in the private index, newest first
    # shellcheck disable=SC2046
    apt-cache $(apt_opts) showsrc "$1" 2>/dev/null | sed -n 's/^Version: //p' | sort -u \
        | while read -r v; do echo "$v"; done | sort -r -V
}

fetch_source() {  # python3.X -> path of its upstream tarball (downloaded once)
    local pkg="$1" dir="$CACHE/src/$1" tarball v tried=""
    tarball="$(ls "$dir"/*.orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -1 || true)"
    if [ -z "$tarball" ]; then
        lock 8 "$CACHE/.apt.lock"
        tarball="$(ls "$dir"/*.orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -1 || true)"
        [ -n "$tarball" ] && { echo "$tarball"; return 0; }  # fetched meanwhile by another build
        apt_index
        # Newest first; a version the mirror does not serve (a stale index, a partial mirror) is
        # followed by the next one the index lists.
        # Only the upstream tarball is needed (its URI and hash from `apt-get --print-uris source`,
        # downloaded and checked by apt-helper): a mirror that serves it but not the .dsc (here:
        # Ubuntu's python3.14) still gives a checked source.
        local line uri file hash
        for v in $(source_versions "$pkg"); do
            rm -rf "$dir" && mkdir -p "$dir"
            # shellcheck disable=SC2046
            line="$(cd "$dir" && apt-get $(apt_opts) -qq --print-uris source "$pkg=$v" 2>"$dir/source.log" \
                    | grep "\.orig\.tar\.[a-z0-9]*' " | head -1 || true)"
            if [ -n "$line" ]; then
                read -r uri file _ hash <<<"$line"
                uri="${uri//\'/}"
                if /usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file "$uri" "$dir/$file" "$hash" \
                        >>"$dir/source.log" 2>&1; then
                    tarball="$dir/$file"
                    echo "$uri $hash" >"$dir/SOURCE"
                    break
                fi
            fi
            tried="$tried $v($(grep -o '[0-9][0-9][0-9] *Not Found\|[0-9][0-9][0-9] *Forbidden\|Hash Sum mismatch' "$dir/source.log" | head -1 | tr -s ' ' || echo failed))"
        done
        if [ -z "$tarball" ]; then
            rm -rf "$dir"
            [ -n "$tried" ] || tried=" none in the index ($SUITES $UBUNTU_SUITES)"
            echo "UNAVAILABLE: source package $pkg could not be downloaded; versions tried:$tried" >&2
            return 3
        fi
        [ -z "$tried" ] || say "$pkg: newer versions not served:$tried"
        say "source: $(cut -d' ' -f1 "$dir/SOURCE") (checked: $(cut -d' ' -f2 "$dir/SOURCE" | cut -c1-20)...)"
    fi
    echo "$tarball"
}

make_nodebug() {  # NAME: CACHE/NAME/nodebug, the same interpreter with no debug info anywhere
    # (the executable and the stdlib's extension modules stripped; the .py files are links).
    local name="$1" ver="${1%t}" prefix="$CACHE/$1" f
    local lib="lib/python$name" nd="$CACHE/$1/nodebug"
    [ -d "$prefix/lib/python$name" ] || lib="lib/python$ver"
    rm -rf "$nd" && mkdir -p "$nd/bin" "$nd/$lib/lib-dynload"
    for f in "$prefix/$lib"/* "$prefix/$lib"/.[!.]*; do
        [ -e "$f" ] || continue
        [ "$(basename "$f")" = lib-dynload ] || ln -s "$f" "$nd/$lib/"
    done
    for f in "$prefix/$lib/lib-dynload"/*; do
        case "$f" in *.so) strip --strip-debug -o "$nd/$lib/lib-dynload/$(basename "$f")" "$f" ;;
                     *) ln -s "$f" "$nd/$lib/lib-dynload/" ;; esac
    done
    strip -o "$nd/bin/python$name" "$prefix/bin/python$name" || die "strip python$name failed"
    ln -sfn "../nodebug/bin/python$name" "$prefix/bin/python$name-stripped"
}

shared_build() {  # NAME: 3.8-3.13 are built like pyenv's (shared libpython), the others static
    case "$1" in 3.[89]|3.1[0-3]) return 0;; *) return 1;; esac
}

# What every build leaves out, to build faster (none of it is imported by the suite, and each has a
# pure-Python fallback or no use here): decimal's C accelerator with its bundled libmpdec (decimal
# falls back to _pydecimal), the CJK codecs, and the modules for terminals, databases, Tk and old
# Unix services. 3.11+: configure's py_cv_module_NAME=n/a; 3.8-3.11 (setup.py builds some or all of
# them there): Modules/Setup.local's *disabled*.
SKIP_MODULES="_decimal _codecs_cn _codecs_hk _codecs_jp _codecs_kr _codecs_tw _codecs_iso2022 _multibytecodec
_sqlite3 _tkinter _dbm _gdbm _curses _curses_panel readline nis _crypt ossaudiodev spwd audioop xxlimited xxlimited_35"
# 3.8/3.9 have no --disable-test-modules: their test extension modules are disabled the same way.
TEST_MODULES_39="_testcapi _testinternalcapi _testbuffer _testimportmultiple _testmultiphase _xxtestfuzz _ctypes_test"

# How a build is made, written into its .done stamp (a finished build made another way is reused,
# and said so; see the header).
recipe() {  # -> "opt=-O1 stdlib=lean"
    echo "opt=$OPTLEVEL stdlib=lean"
}

gdb_helper() {  # NAME: CPython's gdb helper (py-bt, py-list) beside the interpreter, as pyenv's builds have
    # it: `make` writes python-gdb.py as a copy of Tools/gdb/libpython.py, `make altinstall` leaves it out.
    # Also done for a build cached before this step existed: extracted from the cached tarball.
    local name="$1" exe tarball
    exe="$(interp_of "$name")"
    [ -x "$exe" ] && [ ! -f "$exe-gdb.py" ] || return 0
    tarball="$(ls "$CACHE/src/python${name%t}"/*.orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -1 || true)"
    [ -n "$tarball" ] || return 0
    tar -xOf "$tarball" --wildcards '*/Tools/gdb/libpython.py' >"$exe-gdb.py.tmp" 2>/dev/null \
        && mv "$exe-gdb.py.tmp" "$exe-gdb.py" || rm -f "$exe-gdb.py.tmp"
}

build_one() {  # NAME: 3.8 ... 3.13, 3.14, 3.14t, 3.13t
    local name="$1" ver="${1%t}" flags=() prefix="$CACHE/$1" ldflags="" minor m
    minor="${ver#3.}"
    [ "$name" != "$ver" ] && flags+=(--disable-gil)
    # pyenv's shape: libpython3.X.so.1.0 holds the code and the DWARF, found through the RPATH.
    shared_build "$name" && { flags+=(--enable-shared); ldflags="-Wl,-rpath,$prefix/lib"; }
    # CPython's own OPT with $OPTLEVEL for -O3 (-fwrapv up to 3.11, as configure sets it there).
    local opt="-g $OPTLEVEL -Wall"
    [ "$minor" -ge 12 ] || opt="-g -fwrapv $OPTLEVEL -Wall"
    local shape="${flags[*]:-default GIL build} OPT='$opt'"
    flags+=("OPT=$opt")
    [ "$minor" -lt 10 ] || flags+=(--disable-test-modules)
    if [ "$minor" -ge 11 ]; then
        for m in $SKIP_MODULES; do flags+=("py_cv_module_$m=n/a"); done
    fi
    local exe; exe="$(interp_of "$name")"
    lock 7 "$CACHE/.$name.lock"
    if [ -f "$prefix/.done" ] && [ -x "$exe" ] && { shared_build "$name" || [ -x "$exe-stripped" ]; }; then
        shared_build "$name" || [ -d "$prefix/nodebug" ] || make_nodebug "$name"
        case " $(cat "$prefix/.done") " in
            *" $(recipe) "*) ;;
            *) say "$name: reusing $prefix, built another way than '$(recipe)' ($(cat "$prefix/.done")); rm -rf it to rebuild" ;;
        esac
        gdb_helper "$name"
        return 0
    fi
    local tarball rc=0
    tarball="$(fetch_source "python$ver")" || rc=$?
    [ "$rc" = 0 ] || return "$rc"
    local work="$CACHE/build/$name" t0 t1
    rm -rf "$work" "$prefix" && mkdir -p "$work"
    t0=$(date +%s)
    say "building $name from $(basename "$tarball") ($shape, $(recipe)), make -j$JOBS; log: $work/build.log"
    tar -xf "$tarball" -C "$work" --strip-components=1 || die "unpacking $tarball failed"
    if [ "$minor" -le 11 ]; then
        local off="$SKIP_MODULES"
        [ "$minor" -ge 10 ] || off="$off $TEST_MODULES_39"
        { echo '*disabled*'; for m in $off; do echo "$m"; done; } >>"$work/Modules/Setup.local"
    fi
    (
        cd "$work"
        ./configure --prefix="$prefix" --without-ensurepip "${flags[@]}" LDFLAGS="$ldflags" >build.log 2>&1 \
            || { echo "configure failed"; exit 1; }
        lean_install
        make -j"$JOBS" >>build.log 2>&1 || { echo "make failed"; exit 1; }
        make altinstall >>build.log 2>&1 || { echo "make altinstall failed"; exit 1; }
    ) || { tail -25 "$work/build.log" >&2; die "building $name failed (log: $work/build.log)"; }
    [ -x "$exe" ] || die "building $name gave no $exe"
    local check="$exe-stripped"
    if shared_build "$name"; then check="$exe"; else make_nodebug "$name"; fi
    "$check" -c 'import sys, threading, ctypes, json, subprocess, multiprocessing, asyncio, socket, hashlib
assert sys.version_info[:2] == tuple(map(int, sys.argv[1].split(".")))' "$ver" \
        || die "$check does not run (or lacks a stdlib module the tests use)"
    t1=$(date +%s)
    local gil; gil="$("$exe" -c 'import sysconfig; print("free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "gil")')"
    printf '%s %s %s build_seconds=%d jobs=%s %s\n' "$name" "$("$exe" -c 'import sys; print(sys.version.split()[0])')" \
        "$gil" $((t1 - t0)) "$JOBS" "$(recipe)" >"$prefix/.done"
    say "built $name in $((t1 - t0)) s: $(cat "$prefix/.done")"
    gdb_helper "$name"
    cp "$work/build.log" "$prefix/build.log" && rm -rf "$work"
}

lean_install() {  # in the configured tree: `make altinstall` byte-compiles the stdlib once (-o 0),
    # not three times (-O, -OO: nobody runs these interpreters optimised), and on 3.8/3.9 (which install
    # the test packages: no --disable-test-modules) leaves their test folders uncompiled.
    # shellcheck disable=SC2016  # $(...) here are the Makefile's variables, matched literally
    sed -i -e 's/-o 0 -o 1 -o 2 /-o 0 /' \
        -e 's/\$(PYTHON_FOR_BUILD) -Wi -OO* \$(DESTDIR)\$(LIBDEST)\/compileall\.py/true/' \
        -e "s/-x 'bad_coding|badsyntax|site-packages|lib2to3\/tests\/data'/-x 'bad_coding|badsyntax|site-packages|lib2to3\/tests\/data|\/python3\\\\.[0-9]*\/(.*\/)?(test|tests|idle_test)\/'/" \
        Makefile
    grep -q -- '-o 1\|-Wi -O' Makefile && say "$(basename "$PWD"): the Makefile still byte-compiles with -O (its install step changed?)"
    return 0
}

unavailable=""
built=""
for name in $BUILDS; do
    case "$name" in 3.[89]|3.1[0-9]|3.1[3-9]t) ;; *) die "unknown build $name (3.8 ... 3.14, 3.14t, 3.13t)";; esac
done
# PARALLEL builds at a time, each make -jJOBS: one build's serial steps (configure, linking, install)
# overlap another's compiling.
declare -A pid_of
for name in $BUILDS; do
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n || true; done
    build_one "$name" &
    pid_of[$name]=$!
done
failed=0
for name in $BUILDS; do
    rc=0
    wait "${pid_of[$name]}" || rc=$?
    if [ "$rc" = 3 ]; then
        unavailable="$unavailable $name"
    elif [ "$rc" != 0 ]; then
        [ "$failed" != 0 ] || failed="$rc"
    else
        built="$built $name"
    fi
done
[ "$failed" = 0 ] || exit "$failed"
for name in $built; do
    say "$(cat "$CACHE/$name/.done")"
done
# The test suite reads this: a build listed here is reported as not obtainable, any other
# missing build fails the tests.
: >"$CACHE/unavailable.tmp"
for name in $unavailable; do
    echo "$name no source for it could be downloaded here (neither Debian's nor Ubuntu's python${name%t} source package is served; see pythons.sh)" \
        >>"$CACHE/unavailable.tmp"
done
mv "$CACHE/unavailable.tmp" "$CACHE/unavailable"
# The builds this run was asked for: a test fails for one of them that is neither built nor listed
# unavailable (a cache that never saw a run, or a run asked for others, makes the tests skip instead).
echo "$BUILDS" | tr ' ' '\n' | sed '/^$/d' >"$CACHE/requested"
if [ -n "$unavailable" ]; then
    echo "pythons.sh: UNAVAILABLE:$unavailable: no source could be downloaded here" >&2
fi
for name in $built; do interp_of "$name"; done
for name in $built; do shared_build "$name" || echo "$(interp_of "$name")-stripped"; done
# 3: some builds could not be had (their sources are not served here); the others are built.
[ -z "$unavailable" ] || exit 3
