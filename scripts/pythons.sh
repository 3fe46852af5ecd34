#!/usr/bin/env bash
# Build, once per machine, the CPython interpreters the test suite walks but that no package here
# provides: CPython 3.14 (GIL) and the free-threaded 3.14t and 3.13t (`--disable-gil`).
#
# Sources: Debian's own source packages python3.14 / python3.13 (sid, else trixie). Their deb-src
# index is read into a private folder under the cache (Dir::State::Lists, Dir::Etc::SourceList,
# Dir::Cache): the machine's apt sources and caches are never touched. `apt-get source
# --download-only` checks the files against the signed index; the upstream tarball of the source
# package (*.orig.tar.*) is built as it is (Debian's patches are for Debian's own build layout).
#
# Each interpreter: ./configure --prefix=CACHE/NAME --without-ensurepip [--disable-gil] (no PGO, no
# LTO, CPython's default -g -O3), make -jJOBS, make altinstall. libpython is linked statically
# into the executable (CPython's default, like Debian's /usr/bin/python3.X), which exports
# _PyRuntime in .dynsym. A stripped copy sits next to it (bin/python3.14-stripped): same stdlib,
# no symbols but .dynsym, like a distro build without debug info.
#
# When the mirror does not serve a source package (here: python3.14's sources answer 404 while
# its binaries are served), 3.14 falls back to Debian's own binary build from sid (python3.14-minimal,
# libpython3.14-minimal/-stdlib; debug info from python3.14-dbg, found by gdb through the
# executable's .gnu_debuglink in bin/.debug/), unpacked under CACHE/3.14/root with sid's libc6 and
# a few libraries, the interpreter path set with patchelf: a stripped, static, non-PIE distro
# build like /usr/bin/python3.11. Debian ships no free-threaded 3.14, so 3.14t needs the source.
#
# A finished build (CACHE/NAME/.done) is reused. The interpreter paths are printed last, one per
# line: first the builds with debug info, then the copies without. Build times go to stderr and
# to CACHE/NAME/.done. Exit 0: all built. Exit 3: the builds whose sources cannot be downloaded
# here are listed in CACHE/unavailable (and on stderr), all others are built. Any other failure
# (configure, make, a download that breaks) exits 1 with the step named.
#
#   HANGANALYZE_PYTHONS         cache folder (default ~/.cache/hanganalyze/pythons)
#   HANGANALYZE_PYTHONS_BUILDS  which builds (default "3.14 3.14t 3.13t")
#   HANGANALYZE_PYTHONS_JOBS    make -j (default 2)
#   HANGANALYZE_PYTHONS_SUITES  Debian suites to look in (default "sid testing trixie")
#   HANGANALYZE_PYTHONS_MIRROR  Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail

CACHE="${HANGANALYZE_PYTHONS:-$HOME/.cache/hanganalyze/pythons}"
BUILDS="${HANGANALYZE_PYTHONS_BUILDS:-3.14 3.14t 3.13t}"
JOBS="${HANGANALYZE_PYTHONS_JOBS:-2}"
SUITES="${HANGANALYZE_PYTHONS_SUITES:-sid testing trixie}"
MIRROR="${HANGANALYZE_PYTHONS_MIRROR:-http://deb.debian.org/debian}"
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

for tool in gcc make tar xz apt-get strip; do
    command -v "$tool" >/dev/null || die "$tool not found (needed to build CPython)"
done

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
apt_index() {  # the private deb-src index, read once per run
    [ -n "$APT_READY" ] && return 0
    if [ -n "$(find "$APT_DIR/lists" -maxdepth 1 -name '*_Sources*' -mmin -360 2>/dev/null | head -1)" ]; then
        APT_READY=1  # read less than 6 hours ago
        return 0
    fi
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/sources.list.d" "$APT_DIR/cache/archives/partial" \
             "$APT_DIR/preferences.d"
    : >"$APT_DIR/preferences"
    local opt="signed-by=$KEYRING"
    [ -r "$KEYRING" ] || opt="trusted=yes"
    : >"$APT_DIR/sources.list"
    for s in $SUITES; do echo "deb-src [$opt] $MIRROR $s main" >>"$APT_DIR/sources.list"; done
    # shellcheck disable=SC2046
    if ! apt-get $(apt_opts) -qq update >"$APT_DIR/update.log" 2>&1; then
        if [ "$opt" != "trusted=yes" ]; then
            say "the signed deb-src index could not be verified with $KEYRING; reading it unverified (trusted=yes)"
            sed -i "s|\[$opt\]|[trusted=yes]|" "$APT_DIR/sources.list"
            # shellcheck disable=SC2046
            apt-get $(apt_opts) -qq update >"$APT_DIR/update.log" 2>&1 \
                || die "apt-get update of the private deb-src index failed: $(tail -3 "$APT_DIR/update.log")"
        else
            die "apt-get update of the private deb-src index failed: $(tail -3 "$APT_DIR/update.log")"
        fi
    fi
    APT_READY=1
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
        for v in $(source_versions "$pkg"); do
            rm -rf "$dir" && mkdir -p "$dir"
            # shellcheck disable=SC2046
            if (cd "$dir" && apt-get $(apt_opts) -qq source --download-only "$pkg=$v" >"$dir/source.log" 2>&1); then
                tarball="$(ls "$dir"/*.orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -1 || true)"
                [ -n "$tarball" ] && break
            fi
            tried="$tried $v($(grep -o '[0-9][0-9][0-9] *Not Found\|[0-9][0-9][0-9] *Forbidden' "$dir/source.log" | head -1 | tr -s ' ' || echo failed))"
        done
        if [ -z "$tarball" ]; then
            rm -rf "$dir"
            [ -n "$tried" ] || tried=" none in the index ($SUITES)"
            echo "UNAVAILABLE: Debian source package $pkg could not be downloaded; versions tried:$tried" >&2
            return 3
        fi
        [ -z "$tried" ] || say "$pkg: newer versions not served:$tried"
        say "source: $(basename "$(ls "$dir"/*.dsc)") ($(basename "$tarball"))"
    fi
    echo "$tarball"
}

BIN_READY=""
apt_bin_index() {  # a private binary index of sid (amd64), for the fallback below
    [ -n "$BIN_READY" ] && return 0
    apt_index
    if [ -n "$(find "$APT_DIR/bin/lists" -maxdepth 1 -name '*_Packages*' -mmin -360 2>/dev/null | head -1)" ]; then
        BIN_READY=1
        return 0
    fi
    local opt; opt="$(sed -n '1s/^deb-src \(\[[^]]*\]\).*/\1/p' "$APT_DIR/sources.list")"
    mkdir -p "$APT_DIR/bin/lists/partial" "$APT_DIR/bin/cache/archives/partial" "$APT_DIR/bin/sources.list.d"
    echo "deb $opt $MIRROR sid main" >"$APT_DIR/bin/sources.list"
    # shellcheck disable=SC2046
    apt-get $(bin_opts) -qq update >"$APT_DIR/bin/update.log" 2>&1 \
        || die "apt-get update of the private sid binary index failed: $(tail -3 "$APT_DIR/bin/update.log")"
    BIN_READY=1
}
bin_opts() {
    apt_opts | sed "s|$APT_DIR/lists|$APT_DIR/bin/lists|; s|$APT_DIR/sources.list |$APT_DIR/bin/sources.list |; s|Dir::Cache=$APT_DIR/cache|Dir::Cache=$APT_DIR/bin/cache|"
    echo -o Acquire::Languages=none -o APT::Architecture=amd64 -o APT::Architectures=amd64
}

#: Debian's own libraries the interpreter and its stdlib modules are linked against, unpacked
#: beside it (sid's python3.14 needs a newer glibc than this machine's).
DEB_LIBS="libc6 libexpat1 zlib1g libffi8 libmpdec4 libzstd1 liblzma5 libbz2-1.0"

install_debian_binary() {  # NAME (3.14): Debian's build of python3.X from sid, into CACHE/NAME
    local name="$1" ver="$1" prefix="$CACHE/$1" t0 t1 exe
    command -v patchelf >/dev/null || die "patchelf not found (apt-get install patchelf): needed to run Debian's python$ver here"
    t0=$(date +%s)
    lock 8 "$CACHE/.apt.lock"
    apt_bin_index
    local debs="$CACHE/debs/$name"
    rm -rf "$debs" "$prefix" && mkdir -p "$debs" "$prefix"
    say "$name: Debian's source package is not served; using Debian's binary build instead (python$ver-minimal, libpython$ver-minimal, libpython$ver-stdlib, python$ver-dbg for its debug info, and sid's $DEB_LIBS)"
    # shellcheck disable=SC2046,SC2086
    (cd "$debs" && apt-get $(bin_opts) -qq download "python$ver-minimal" "libpython$ver-minimal" \
        "libpython$ver-stdlib" "python$ver-dbg" $DEB_LIBS >download.log 2>&1) \
        || die "apt-get download of Debian's python$ver failed: $(tail -3 "$debs/download.log")"
    local root="$prefix/root" d
    mkdir -p "$root"
    for d in "$debs"/*.deb; do
        case "$(basename "$d")" in
            python"$ver"-dbg_*) dpkg-deb --fsys-tarfile "$d" | tar -x -C "$debs" ./usr/lib/debug ;;
            *) dpkg-deb -x "$d" "$root" ;;
        esac
    done
    exe="$root/usr/bin/python$ver"
    [ -x "$exe" ] || die "Debian's python$ver-minimal gave no usr/bin/python$ver"
    local ld="$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    [ -e "$ld" ] || ld="$root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    [ -e "$ld" ] || die "sid's libc6 gave no ld-linux-x86-64.so.2"
    patchelf --set-interpreter "$ld" \
        --set-rpath "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" "$exe"
    # Debug info: Debian's python3.X-dbg holds it by build id; gdb finds it through the
    # executable's .gnu_debuglink in bin/.debug/.
    local link bid dbg
    link="$(readelf -p .gnu_debuglink "$exe" 2>/dev/null | sed -n 's/^ *\[ *0\] *//p')"
    bid="$(readelf -n "$exe" | sed -n 's/.*Build ID: //p')"
    dbg="$debs/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug"
    [ -n "$link" ] && [ -f "$dbg" ] || die "no debug info for python$ver (build id $bid) in python$ver-dbg"
    mkdir -p "$root/usr/bin/.debug" && mv "$dbg" "$root/usr/bin/.debug/$link"
    # Without debug info: a copy of the same executable whose stdlib is the same folder.
    mkdir -p "$prefix/nodebug/usr/bin" "$prefix/bin"
    cp "$exe" "$prefix/nodebug/usr/bin/python$ver"
    ln -s ../../root/usr/lib "$prefix/nodebug/usr/lib"
    ln -s ../root/usr/bin/"python$ver" "$prefix/bin/python$name"
    ln -s ../nodebug/usr/bin/"python$ver" "$prefix/bin/python$name-stripped"
    rm -rf "$debs"
    "$prefix/bin/python$name-stripped" -c 'import sys, threading, ctypes; assert sys.version_info[:2] == tuple(map(int, sys.argv[1].split(".")))' "$ver" \
        || die "Debian's python$ver does not run here"
    t1=$(date +%s)
    printf '%s %s gil debian-binary install_seconds=%d\n' "$name" \
        "$("$prefix/bin/python$name" -c 'import sys; print(sys.version.split()[0])')" $((t1 - t0)) >"$prefix/.done"
    say "installed $name in $((t1 - t0)) s: $(cat "$prefix/.done")"
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

build_one() {  # NAME: 3.14, 3.14t, 3.13t
    local name="$1" ver="${1%t}" flags=() prefix="$CACHE/$1"
    [ "$name" != "$ver" ] && flags+=(--disable-gil)
    local exe; exe="$(interp_of "$name")"
    lock 7 "$CACHE/.$name.lock"
    if [ -f "$prefix/.done" ] && [ -x "$exe" ] && [ -x "$exe-stripped" ]; then
        if [ ! -d "$prefix/nodebug" ]; then make_nodebug "$name"; fi
        return 0
    fi
    local tarball rc=0
    tarball="$(fetch_source "python$ver")" || rc=$?
    if [ "$rc" = 3 ] && [ "$name" = "$ver" ] && [ "${HANGANALYZE_PYTHONS_DEBIAN_BINARY:-1}" = 1 ]; then
        install_debian_binary "$name"
        return 0
    fi
    [ "$rc" = 0 ] || return "$rc"
    local work="$CACHE/build/$name" t0 t1
    rm -rf "$work" "$prefix" && mkdir -p "$work"
    t0=$(date +%s)
    say "building $name from $(basename "$tarball") (${flags[*]:-default GIL build}), make -j$JOBS; log: $work/build.log"
    tar -xf "$tarball" -C "$work" --strip-components=1 || die "unpacking $tarball failed"
    (
        cd "$work"
        ./configure --prefix="$prefix" --without-ensurepip "${flags[@]}" >build.log 2>&1 \
            || { echo "configure failed"; exit 1; }
        make -j"$JOBS" >>build.log 2>&1 || { echo "make failed"; exit 1; }
        make altinstall >>build.log 2>&1 || { echo "make altinstall failed"; exit 1; }
    ) || { tail -25 "$work/build.log" >&2; die "building $name failed (log: $work/build.log)"; }
    [ -x "$exe" ] || die "building $name gave no $exe"
    make_nodebug "$name"
    "$exe-stripped" -c 'import sys, threading, ctypes; assert sys.version_info[:2] == tuple(map(int, sys.argv[1].split(".")))' "$ver" \
        || die "the stripped copy $exe-stripped does not run"
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
    case "$name" in 3.1[3-9]|3.1[3-9]t) ;; *) die "unknown build $name (3.14, 3.14t, 3.13t)";; esac
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
    echo "$name no source for it could be downloaded here (Debian's python${name%t} source package is not served; see pythons.sh)" \
        >>"$CACHE/unavailable.tmp"
done
mv "$CACHE/unavailable.tmp" "$CACHE/unavailable"
if [ -n "$unavailable" ]; then
    echo "pythons.sh: UNAVAILABLE:$unavailable: no source (and no usable Debian build) could be downloaded here" >&2
fi
for name in $built; do interp_of "$name"; done
for name in $built; do echo "$(interp_of "$name")-stripped"; done
# 3: some builds could not be had (their sources are not served here); the others are built.
[ -z "$unavailable" ] || exit 3
