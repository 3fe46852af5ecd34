#!/usr/bin/env bash
# The demo behind `make demo`: hang a real program, take its core, let hanganalyze explain it.
#
#   1. a Python program whose two threads deadlock on two threading.RLocks (ABBA; an RLock
#      records its owner, so the cycle is provable from the core): core with gcore,
#      report.html in the repo root;
#   2. a C++ program that destroys a joinable std::thread (std::terminate -> SIGABRT): core at
#      the abort, demo-out/terminate.html.
#
# It prints one screen: for each program its first finding and where the reports are (the whole
# text reports go to demo-out/*.txt), then where the command is and how to use it in gdb.
# Bold only on a terminal (not with NO_COLOR or TERM=dumb). Exits 0 when report.html was written:
# hanganalyze's exit 3/5/6 (a hang, deadlock or crash found) is the expected outcome here.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/demo-out"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
cd "$REPO"

for tool in hanganalyze gdb gcore "$PY"; do
    command -v "$tool" >/dev/null || { echo "demo: $tool not found on PATH" >&2; exit 1; }
done

BOLD="" PLAIN=""
if [[ -t 1 && -z "${NO_COLOR:-}" && "${TERM:-dumb}" != dumb ]]; then
    BOLD=$'\033[1m' PLAIN=$'\033[0m'
fi

FIXTURE_PID=""
cleanup() {
    if [[ -n "$FIXTURE_PID" ]] && kill -0 "$FIXTURE_PID" 2>/dev/null; then
        kill -KILL "$FIXTURE_PID" 2>/dev/null || true
        wait "$FIXTURE_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# analyze CORE HTML TXT: the HTML report and the text report (kept in TXT); on the terminal the
# headline and the first finding. Exit 3 (hang), 5 (deadlock), 6 (crash) are findings, not failures.
analyze() {
    local core=$1 html=$2 txt=$3 rc=0
    hanganalyze "$core" -o "$html" 2>"$OUT/hanganalyze.err" || rc=$?
    if [[ $rc -eq 0 || $rc -eq 3 || $rc -eq 5 || $rc -eq 6 ]]; then
        rc=0
        hanganalyze "$core" --format text >"$txt" 2>>"$OUT/hanganalyze.err" || rc=$?
    fi
    if [[ $rc -ne 0 && $rc -ne 3 && $rc -ne 5 && $rc -ne 6 ]]; then
        echo "demo: hanganalyze $core failed with exit $rc:" >&2
        tail -n 5 "$OUT/hanganalyze.err" >&2
        exit 1
    fi
    # the first finding: its title line and the line that says what the threads do
    awk '/^\[1\] /{n=2} n>0{sub(/^ +/, ""); print (n == 2 ? "  " : "      ") substr($0, 1, 100) (length($0) > 100 ? "..." : ""); n--}' "$txt"
    echo "  reports: ${html#"$REPO/"} (HTML), ${txt#"$REPO/"} (text)"
}

banner() { printf '\n%s== %s ==%s\n' "$BOLD" "$1" "$PLAIN"; }

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
gcore -o "$OUT/core" "$FIXTURE_PID" >/dev/null 2>&1
CORE="$OUT/core.$FIXTURE_PID"
echo "pid $FIXTURE_PID is stuck; its core: ${CORE#"$REPO/"} ($(du -h "$CORE" | cut -f1)); hanganalyze says:"
cleanup
FIXTURE_PID=""
rm -f report.html
analyze "$CORE" "$REPO/report.html" "$OUT/deadlock.txt"

# --- 2. C++ std::thread destroyed while joinable -------------------------------------------
banner "2/2  C++ joinable std::thread destroyed -> std::terminate -> SIGABRT"
BIN="tests/fixtures/build/cxx_thread_terminate"
[[ -x "$BIN" ]] || make -s "$BIN"
TCORE="$OUT/core.cxx_thread_terminate"
rm -f "$TCORE"
gdb -nx -batch -iex 'set auto-load off' -iex 'set debuginfod enabled off' \
    -ex run -ex "gcore $TCORE" --args "$BIN" >/dev/null 2>&1 || true
if [[ -f "$TCORE" ]]; then
    echo "its core at the abort: ${TCORE#"$REPO/"}; hanganalyze says:"
    analyze "$TCORE" "$OUT/terminate.html" "$OUT/terminate.txt"
else
    echo "demo: could not take the abort core (skipped)" >&2
fi

banner "next"
HA="$(command -v hanganalyze)"
echo "the command is $HA; to have it on PATH: export PATH=\"$(dirname "$HA"):\$PATH\""
echo "  hanganalyze --pid PID                  a live process (read-only; detached afterwards)"
echo "  hanganalyze core.PID -o report.html    a core; --help for the rest"
echo "inside gdb: gdb -p PID -ex 'source $REPO/gdbext/load.py' -ex hang-analyze"
if [[ -s report.html ]]; then
    echo "report: $REPO/report.html"
    exit 0
fi
echo "demo: report.html was not written" >&2
exit 1
