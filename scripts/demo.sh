#!/usr/bin/env bash
# The demo behind `make demo`: hang a real program, take its core, let hanganalyze explain it.
#
#   1. a Python program whose two threads deadlock on two threading.RLocks (ABBA; an RLock
#      records its owner, so the cycle is provable from the core): core with
#      gcore, report.html in the repo root, the text report on the terminal;
#   2. a C++ program that destroys a joinable std::thread (std::terminate -> SIGABRT): core at
#      the abort, demo-out/terminate.html, the text report on the terminal.
#
# Exits 0 when report.html was written. hanganalyze's exit 3 ("a hang/crash finding") is the
# expected outcome here, not a failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/demo-out"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
cd "$REPO"

for tool in hanganalyze gdb gcore "$PY"; do
    command -v "$tool" >/dev/null || { echo "demo: $tool not found on PATH" >&2; exit 1; }
done

FIXTURE_PID=""
cleanup() {
    if [[ -n "$FIXTURE_PID" ]] && kill -0 "$FIXTURE_PID" 2>/dev/null; then
        kill -KILL "$FIXTURE_PID" 2>/dev/null || true
        wait "$FIXTURE_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# hanganalyze exits 3 when it found a hang/crash: that is the point of the demo.
analyze() {
    local rc=0
    hanganalyze "$@" || rc=$?
    if [[ $rc -ne 0 && $rc -ne 3 ]]; then
        echo "demo: hanganalyze $* failed with exit $rc" >&2
        exit 1
    fi
}

banner() { printf '\n\033[1m== %s ==\033[0m\n' "$1"; }

# --- 1. Python deadlock --------------------------------------------------------------------
banner "1/2  Python threads deadlocked on two RLocks (tests/fixtures/py_deadlock.py --rlock)"
rm -f "$OUT"/core.*
"$PY" -u tests/fixtures/py_deadlock.py --rlock >"$OUT/py_deadlock.log" 2>&1 &
FIXTURE_PID=$!
for _ in $(seq 100); do
    grep -q READY "$OUT/py_deadlock.log" 2>/dev/null && break
    kill -0 "$FIXTURE_PID" 2>/dev/null || { echo "demo: fixture exited early" >&2; exit 1; }
    sleep 0.1
done
grep -q READY "$OUT/py_deadlock.log" || { echo "demo: fixture never got stuck" >&2; exit 1; }
sleep 0.3  # let both threads reach their second acquire
echo "pid $FIXTURE_PID is stuck; taking a core with gcore"
gcore -o "$OUT/core" "$FIXTURE_PID" >/dev/null 2>&1
CORE="$OUT/core.$FIXTURE_PID"
cleanup
FIXTURE_PID=""
echo "core: $CORE ($(du -h "$CORE" | cut -f1) on disk)"

rm -f report.html
analyze "$CORE" -o report.html
analyze "$CORE" --format text

# --- 2. C++ std::thread destroyed while joinable -------------------------------------------
banner "2/2  C++ joinable std::thread destroyed -> std::terminate -> SIGABRT"
BIN="tests/fixtures/build/cxx_thread_terminate"
[[ -x "$BIN" ]] || make -s fixtures
TCORE="$OUT/core.cxx_thread_terminate"
rm -f "$TCORE"
gdb -nx -batch -iex 'set auto-load off' -iex 'set debuginfod enabled off' \
    -ex run -ex "gcore $TCORE" --args "$BIN" >/dev/null 2>&1 || true
if [[ -f "$TCORE" ]]; then
    analyze "$TCORE" -o "$OUT/terminate.html"
    analyze "$TCORE" --format text
else
    echo "demo: could not take the abort core (skipped)" >&2
fi

banner "done"
if [[ -s report.html ]]; then
    echo "report: $REPO/report.html   (and $OUT/terminate.html)"
    exit 0
fi
echo "demo: report.html was not written" >&2
exit 1
