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
# Each interpreter: ./configure --prefix=CACHE/NAME --without-ensurepip [--disable-gil] (no PGO, no
# LTO, CPython's default -g -O3), make -jJOBS, make altinstall. 3.8-3.13 (GIL): --enable-shared
# with an RPATH to CACHE/NAME/lib, as pyenv does. 3.14, 3.14t, 3.13t: libpython is linked statically
# into the executable (CPython's default, like Debian's /usr/bin/python3.X), which exports
# _PyRuntime in .dynsym. A stripped copy sits next to it (bin/python3.14-stripped): same stdlib,
# no symbols but .dynsym, like a distro build without debug info.
#
# A finished build (CACHE/NAME/.done) is reused. The interpreter paths are printed last, one per
# line: first the builds with debug info, then the copies without. Build times go to stderr and
# to CACHE/NAME/.done. Exit 0: all built. Exit 3: the builds whose sources cannot be downloaded
# here are listed in CACHE/unavailable (and on stderr), all others are built. Any other failure
# (configure, make, a download that breaks) exits 1 with the step named.
#
#   HANGANALYZE_PYTHONS         cache folder (default ~/.cache/hanganalyze/pythons)
#   HANGANALYZE_PYTHONS_BUILDS  which builds (default "3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.14t 3.13t")
#   HANGANALYZE_PYTHONS_JOBS    make -j (default 2)
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

build_one() {  # NAME: 3.8 ... 3.13, 3.14, 3.14t, 3.13t
    local name="$1" ver="${1%t}" flags=() prefix="$CACHE/$1" ldflags=""
    [ "$name" != "$ver" ] && flags+=(--disable-gil)
    # pyenv's shape: libpython3.X.so.1.0 holds the code and the DWARF, found through the RPATH.
    shared_build "$name" && { flags+=(--enable-shared); ldflags="-Wl,-rpath,$prefix/lib"; }
    local exe; exe="$(interp_of "$name")"
    lock 7 "$CACHE/.$name.lock"
    if [ -f "$prefix/.done" ] && [ -x "$exe" ]; then
        shared_build "$name" && return 0
        if [ -x "$exe-stripped" ]; then
            if [ ! -d "$prefix/nodebug" ]; then make_nodebug "$name"; fi
            return 0
        fi
    fi
    local tarball rc=0
    tarball="$(fetch_source "python$ver")" || rc=$?
    [ "$rc" = 0 ] || return "$rc"
    local work="$CACHE/build/$name" t0 t1
    rm -rf "$work" "$prefix" && mkdir -p "$work"
    t0=$(date +%s)
    say "building $name from $(basename "$tarball") (${flags[*]:-default GIL build}), make -j$JOBS; log: $work/build.log"
    tar -xf "$tarball" -C "$work" --strip-components=1 || die "unpacking $tarball failed"
    (
        cd "$work"
        ./configure --prefix="$prefix" --without-ensurepip "${flags[@]}" LDFLAGS="$ldflags" >build.log 2>&1 \
            || { echo "configure failed"; exit 1; }
        make -j"$JOBS" >>build.log 2>&1 || { echo "make failed"; exit 1; }
        make altinstall >>build.log 2>&1 || { echo "make altinstall failed"; exit 1; }
    ) || { tail -25 "$work/build.log" >&2; die "building $name failed (log: $work/build.log)"; }
    [ -x "$exe" ] || die "building $name gave no $exe"
    local check="$exe-stripped"
    if shared_build "$name"; then check="$exe"; else make_nodebug "$name"; fi
    "$check" -c 'import sys, threading, ctypes; assert sys.version_info[:2] == tuple(map(int, sys.argv[1].split(".")))' "$ver" \
        || die "$check does not run"
    t1=$(date +%s)
    local gil; gil="$("$exe" -c 'import sysconfig; print("free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "gil")')"
    printf '%s %s %s build_seconds=%d jobs=%s\n' "$name" "$("$exe" -c 'import sys; print(sys.version.split()[0])')" \
        "$gil" $((t1 - t0)) "$JOBS" >"$prefix/.done"
    say "built $name in $((t1 - t0)) s: $(cat "$prefix/.done")"
    cp "$work/build.log" "$prefix/build.log" && rm -rf "$work"
}

unavailable=""
built=""
for name in $BUILDS; do
    case "$name" in 3.[89]|3.1[0-9]|3.1[3-9]t) ;; *) die "unknown build $name (3.8 ... 3.14, 3.14t, 3.13t)";; esac
    rc=0
    build_one "$name" || rc=$?
    if [ "$rc" = 3 ]; then
        unavailable="$unavailable $name"
    elif [ "$rc" != 0 ]; then
        exit "$rc"
    else
        built="$built $name"
    fi
done
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
