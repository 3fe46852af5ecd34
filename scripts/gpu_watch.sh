#!/usr/bin/env bash
# `hanganalyze watch` around real NCCL jobs on the GPU machine (issue 33), then what it costs them.
#
#   OUT=DIR bash scripts/gpu_watch.sh [--install]
#   OUT=DIR WHAT=scenarios bash scripts/gpu_watch.sh     # one part per device call (each < 10 min)
#   OUT=DIR WHAT=bench bash scripts/gpu_watch.sh
#
# WHAT=scenarios (scripts/gpu_watch_runs.py, tests/fixtures/gpu/nccl_job.py, NPROC ranks, rank BAD_RANK):
#   straggler  rank BAD_RANK sleeps in load_next_batch, the others wait in all_reduce -> .item():
#              must be captured (exit 3, a report within STALL + 10 s of the hang, naming that rank
#              and load_next_batch); odd runs wrapper mode --then kill (nothing left), even runs
#              --job --then keep (the job still running)
#   healthy    never hangs; slow: rank BAD_RANK sleeps 0.4 s every step: both watched WATCH_S seconds
#              side by side (one of each at a time), must never be captured
#   RUNS runs each (5), STALL (10 s), POLL (1 s), WATCH_S (45 s; 60 for "watched for a minute").
# WHAT=bench: bench/bench_watch.py --backend nccl: steps/s of a training loop bare, under the watcher
#   and with the watcher attached (--job), BENCH_REPEATS (3) x BENCH_SECONDS (20 s) each, the
#   watcher's defaults unless BENCH_WATCH_ARGS (e.g. "--stall 10": a candidate, and its samples, every
#   10 s of a healthy job whose main thread spins in the device sync).
# WHAT=pause (not in the default): bench/bench_watch.py --pause: the longest pause of rank 0 under
#   one capture (hanganalyze --job, three samples) and under one py-spy dump when PY_SPY names one.
# Timing on one H200 (expected): scenarios ~8 min, bench ~6 min: more than one device call (10 min)
# holds, so the runs of the scenarios stop starting after BUDGET_S (470 s) and the bench is left out
# (it says so) when less than BENCH_NEEDS_S (400 s) of CALL_LIMIT_S (590 s) is left: then a second
# call with WHAT=bench.  Results are written run by run, so a call cut short keeps what it did.
# HANG_BACKEND=gloo runs everything on CPU (the dry run; bench --backend gloo).
#
# Writes $OUT/gpu_watch/ (per run: .result.json, the report .json, the watcher's .err, the job's
# .log tail; bench.json), $OUT/gpu_watch.tar.gz and $OUT/summary.txt; prints the summary.
# Re-check: copy $OUT/gpu_watch to tests/data/gpu_watch/ (results, .err, run1 reports) and run
# tests/unit/test_gpu_watch_reports.py.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT to the output folder}
WHAT=${WHAT:-"scenarios bench"}
BACKEND=${HANG_BACKEND:-nccl}
PY=${PY:-python3}
W=$OUT/gpu_watch
WORK=$(mktemp -d /tmp/gpuwatch.XXXXXX)
mkdir -p "$W" "$WORK/bin"
SUMMARY=$OUT/summary.txt
touch "$SUMMARY"

if [ "${1:-}" = "--install" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$REPO"/.whl/*.whl || { echo "wheel install failed"; exit 1; }
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$REPO/analyzer:$REPO/gdbext${PYTHONPATH:+:$PYTHONPATH}"
unset PYTHONDONTWRITEBYTECODE  # bytecode as an installed copy has it (see gpu_verdicts.sh)
$PY -m compileall -q "$REPO/analyzer" "$REPO/gdbext" > /dev/null || echo "compileall failed"
printf '#!/bin/sh\nexec %s -m hanganalyze "$@"\n' "$(command -v $PY)" > "$WORK/bin/hanganalyze"
chmod +x "$WORK/bin/hanganalyze"
export PATH="$WORK/bin:$PATH"
{
    command -v nvidia-smi > /dev/null && nvidia-smi -L 2>&1 | head -8
    $PY -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())' 2>&1 | tail -1
    echo "backend $BACKEND, what: $WHAT, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
} | tee -a "$SUMMARY"

rc=0
for what in $WHAT; do
    case $what in
    scenarios)
        $PY "$REPO/scripts/gpu_watch_runs.py" --out "$W" --runs "${RUNS:-5}" --stall "${STALL:-10}" \
            --poll "${POLL:-1}" --watch-s "${WATCH_S:-45}" --scenarios "${SCENARIOS:-straggler,healthy,slow}" \
            --nproc "${NPROC:-2}" --bad-rank "${BAD_RANK:-1}" --budget-s "${BUDGET_S:-470}" 2>&1 | tee -a "$SUMMARY"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
        ;;
    bench)
        if [ $((SECONDS + ${BENCH_NEEDS_S:-400})) -gt "${CALL_LIMIT_S:-590}" ]; then
            echo "bench left out: ${SECONDS}s used of ${CALL_LIMIT_S:-590}s; run it with WHAT=bench" | tee -a "$SUMMARY"
            continue
        fi
        $PY "$REPO/bench/bench_watch.py" --backend "$([ "$BACKEND" = nccl ] && echo nccl || echo gloo)" \
            --nproc "${NPROC:-2}" --repeats "${BENCH_REPEATS:-3}" --seconds "${BENCH_SECONDS:-20}" \
            --watch-args "${BENCH_WATCH_ARGS:-}" --json "$W/bench.json" 2>&1 | grep -v -i "numpy" | tee -a "$SUMMARY"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
        ;;
    pause)
        $PY "$REPO/bench/bench_watch.py" --pause --backend "$([ "$BACKEND" = nccl ] && echo nccl || echo gloo)" \
            --nproc "${NPROC:-2}" --repeats "${BENCH_REPEATS:-3}" --seconds "${BENCH_SECONDS:-10}" \
            ${PY_SPY:+--py-spy "$PY_SPY"} --json "$W/pause.json" 2>&1 | grep -v -i "numpy" | tee -a "$SUMMARY"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
        ;;
    *) echo "WHAT: scenarios, bench and/or pause, not $what"; rc=2 ;;
    esac
done
tar -C "$OUT" -czf "$OUT/gpu_watch.tar.gz" gpu_watch
rm -rf "$WORK"
echo "done in ${SECONDS}s (rc $rc)" | tee -a "$SUMMARY"
exit $rc
