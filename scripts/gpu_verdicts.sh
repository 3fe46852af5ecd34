#!/usr/bin/env bash
# Real NCCL jobs on the GPU machine, each analyzed five times in a row with `hanganalyze --job`
# (issue 21): the same right answer every time, or the run says which differed.
#
#   OUT=DIR bash scripts/gpu_verdicts.sh [--install]
#
# Scenarios (tests/fixtures/gpu/nccl_job.py, NPROC ranks, rank BAD_RANK at fault):
#   healthy    a training loop that never hangs: no hang finding, ever
#   slow       healthy but unbalanced, the loop at module level: rank BAD_RANK sleeps SLOW_READ_S (0.4 s)
#              in augment_batch every step, the others wait in all_reduce -> .item(); every step
#              completes: rank-slow names BAD_RANK (a warning), no hang finding, ever (issue 31)
#   straggler  rank BAD_RANK sleeps in load_next_batch; the others wait in all_reduce -> .item()
#   mismatch   rank BAD_RANK in broadcast, the others in all_reduce
#   killed     a plain launcher (no torchrun); rank BAD_RANK is SIGKILLed; the others wait
#   seed       a CUDA graph that captured all_reduce stays alive across destroy_process_group
#   spin       rank BAD_RANK's GPU runs a kernel that never ends; its host waits in .item()
#   loader     rank BAD_RANK's DataLoader worker blocks in decode_sample; that rank waits for the batch
#   uneven     DDP with uneven inputs: rank BAD_RANK runs out of batches and waits in barrier (evaluate);
#              the others sync gradients at the end of backward (Reducer::finalize_backward)
# For straggler and mismatch, once the process-group timeout fires and every rank has written its
# flight-recorder dump, the first run's JSON + the dumps + the torchrun log are analyzed together.
# Then the benchmark: one sample of one rank (cold and warm symbol cache) against
# `pystack remote --native`, and `--job` with the default samples, on the straggler's ranks.
#
# Writes $OUT/verdicts.tar.gz (every report JSON and log) and $OUT/summary.txt; prints the summary.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT to the output folder}
NPROC=${NPROC:-2}
BAD_RANK=${BAD_RANK:-1}
RUNS=${RUNS:-5}
PG_TIMEOUT=${PG_TIMEOUT:-75}
SCENARIOS=${SCENARIOS:-"healthy slow straggler mismatch killed seed"}
BUDGET_S=${BUDGET_S:-540}
PY=${PY:-python3}
WORK=$(mktemp -d /tmp/gpuverdicts.XXXXXX)
R=$WORK/reports
mkdir -p "$OUT" "$R" "$WORK/bin"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
ms_since() { echo "$(( ($(date +%s%N) - $1) / 1000000 )) ms"; }
say() { echo "$*" | tee -a "$SUMMARY"; }

. "$REPO/scripts/gpu_env.sh"
gpu_setup "$WORK" "$@"
# Bytecode as an installed copy has it (pip compiles at install): the copied tree has none, and a
# run that compiles ~90 modules from source each time measures the compiler, not hanganalyze.
unset PYTHONDONTWRITEBYTECODE
$PY -m compileall -q "$REPO/analyzer" "$REPO/gdbext" > /dev/null || echo "compileall failed"
nvidia-smi -L 2>&1 | head -4
$PY -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'

# One line per report: the findings (id, ranks, confidence) and, per rank, state and sources.
cat > "$WORK/summarize.py" <<'PYEOF'
import json, sys
for path in sys.argv[1:]:
    try:
        snap = json.load(open(path))
    except Exception as e:
        print("  %s: unreadable (%s)" % (path.rsplit("/", 1)[-1], e)); continue
    fs = ["%s%s@%.2f" % (f.get("signature"), f.get("ranks") or "", f.get("confidence") or 0)
          for f in snap.get("findings", [])]
    print("  %s: %s" % (path.rsplit("/", 1)[-1], "; ".join(fs) or "no findings"))
    for f in snap.get("findings", [])[:2]:
        print("      %s" % (f.get("summary") or "")[:300])
    for p in snap.get("processes", []):
        prog = {}
        for t in p.get("threads", []):
            st = (t.get("progress") or {}).get("state")
            if st:
                prog[st] = prog.get(st, 0) + 1
        print("      rank %s pid %s sources=%s progress=%s%s" % (
            p.get("rank"), p.get("pid"), p.get("sources") or "-", prog or "-",
            " error=" + p["error"][:80] if p.get("error") else ""))
PYEOF
summarize() { $PY "$WORK/summarize.py" "$@" | tee -a "$SUMMARY"; }

wait_marks() {  # wait_marks DIR N TIMEOUT: until N rank*.pid files exist
    local t=0
    while [ "$(ls "$1"/rank*.pid 2>/dev/null | wc -l)" -lt "$2" ]; do
        sleep 1; t=$((t + 1))
        if [ $t -ge "$3" ]; then return 1; fi
    done
    return 0
}
kill_job() {  # the launcher's session, then anything left with the job's tag
    kill -9 -- -"$1" 2>/dev/null; sleep 1
    pkill -9 -f "nccl_job.py" 2>/dev/null; sleep 1  # (the loader's workers too)
}

start_job() {  # start_job SCENARIO DIR -> launcher pid in $LAUNCHER
    local sc=$1 d=$2
    mkdir -p "$d"
    local env=(HANG_READY_DIR="$d" PG_TIMEOUT="$PG_TIMEOUT" HANG_DIE_WITH_PARENT=1
               TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE="$d/fr.rank_")
    if [ "$sc" = killed ]; then
        env "${env[@]}" setsid $PY "$REPO/tests/fixtures/gpu/nccl_job.py" --launch "$NPROC" "$sc" "$BAD_RANK" \
            > "$d/launcher.log" 2>&1 &
    else
        env "${env[@]}" setsid $PY -m torch.distributed.run --standalone --nproc_per_node="$NPROC" \
            "$REPO/tests/fixtures/gpu/nccl_job.py" "$sc" "$BAD_RANK" > "$d/torchrun.log" 2>&1 &
    fi
    LAUNCHER=$!
}

for sc in $SCENARIOS; do
    [ "$SECONDS" -ge "$BUDGET_S" ] && { say "== $sc: skipped (budget)"; continue; }
    d=$WORK/$sc
    start_job "$sc" "$d"
    say "== $sc (launcher $LAUNCHER)"
    if ! wait_marks "$d" "$NPROC" 150; then
        say "  ranks not ready in 150 s"; tail -20 "$d"/*.log; kill_job "$LAUNCHER"; continue
    fi
    if [ "$sc" = killed ]; then
        kill -9 "$(cat "$d/rank$BAD_RANK.pid")"; say "  SIGKILLed rank $BAD_RANK (pid $(cat "$d/rank$BAD_RANK.pid"))"
    fi
    sleep 3
    ls "$d"/rank*.returned >/dev/null 2>&1 && say "  a rank returned from the call that should block"
    for i in $(seq 1 "$RUNS"); do
        s=$(date +%s%N)
        hanganalyze --job "$LAUNCHER" -f json -o "$R/$sc.run$i.json" 2> "$R/$sc.run$i.err"
        rc=$?
        say "  run $i: rc=$rc wall=$(ms_since $s)"
        summarize "$R/$sc.run$i.json"
        [ -s "$R/$sc.run$i.err" ] && head -3 "$R/$sc.run$i.err"
    done
    if [ "$sc" = healthy ] || [ "$sc" = slow ]; then  # the runs with a hang finding, and (slow) rank-slow's
        $PY - "$sc" "$BAD_RANK" "$R/$sc".run*.json <<'PYEOF' | tee -a "$SUMMARY"
import json, sys
sc, bad, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
snaps = [json.load(open(p)) for p in paths]
hang = sum(any(f.get("severity") in ("hang", "deadlock") for f in s.get("findings", [])) for s in snaps)
slow = sum(any(f.get("signature") in ("rank-slow", "nccl-ras-slow-rank") and f.get("ranks") == [bad]
               for f in s.get("findings", [])) for s in snaps)
ext = sum(any((p.get("samples") or {}).get("extended") for p in s.get("processes", [])) for s in snaps)
want = "no hang" + (", rank-slow [%d]" % bad if sc == "slow" else "")
print("  check %s: %d/%d runs with a hang finding, %d/%d name rank %d slow, %d/%d window extended (want: %s)"
      % (sc, hang, len(snaps), slow, len(snaps), bad, ext, len(snaps), want))
PYEOF
    fi
    if [ "$sc" != healthy ] && [ "$sc" != slow ] && [ "$sc" != seed ]; then  # a rank at fault: named?
        $PY - "$sc" "$BAD_RANK" "$R/$sc".run*.json <<'PYEOF' | tee -a "$SUMMARY"
import json, sys
sc, bad, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
snaps = [json.load(open(p)) for p in paths]
named = sum(any(f.get("severity") in ("hang", "deadlock", "crash", "error") and f.get("ranks") == [bad]
                for f in s.get("findings", [])) for s in snaps)
print("  check %s: %d/%d runs name rank %d in a hang finding" % (sc, named, len(snaps), bad))
PYEOF
    fi
    if command -v nvidia-smi >/dev/null; then  # the device side, offline inputs (issue 34), while it hangs
        nvidia-smi -q > "$R/$sc.nvidia-smi-q.txt" 2>&1
        nvidia-smi > "$R/$sc.nvidia-smi.txt" 2>&1
    fi
    if [ "$sc" = straggler ]; then  # the benchmark, on these ranks while they hang
        pids=$(cat "$d"/rank*.pid | tr '\n' ' ')
        p0=$(cat "$d/rank0.pid")
        export HANGANALYZE_CACHE_DIR=$WORK/cold; rm -rf "$WORK/cold"
        s=$(date +%s%N); hanganalyze --pid "$p0" --samples 1 -f json -o /dev/null 2>/dev/null
        say "  bench one sample rank0 cold: $(ms_since $s)"
        hanganalyze --pid "$p0" --samples 1 -f json -o /dev/null 2>/dev/null  # the bytecode and page cache warm
        # interleaved rounds on the same rank, warm symbol cache: one sample of ours, then pystack's
        for k in $(seq "${BENCH_REPS:-7}"); do
            s=$(date +%s%N); hanganalyze --pid "$p0" --samples 1 -f json -o /dev/null 2>/dev/null
            say "  bench one sample rank0 warm: $(ms_since $s)"
            s=$(date +%s%N); $PY -m pystack remote --native "$p0" > /dev/null 2>&1; prc=$?
            say "  bench pystack remote --native rank0: $(ms_since $s) rc=$prc"
        done
        unset HANGANALYZE_CACHE_DIR
        $PY - "$SUMMARY" <<'PYEOF' | tee -a "$SUMMARY"
import re, statistics, sys
text = open(sys.argv[1]).read()
ours = [int(x) for x in re.findall(r"one sample rank0 warm: (\d+) ms", text)]
theirs = [int(x) for x in re.findall(r"pystack remote --native rank0: (\d+) ms rc=0", text)]
if ours and theirs:
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print("  bench median one sample %d ms, pystack %d ms: %.2fx (%d rounds)" % (mo, mt, mo / mt, len(ours)))
PYEOF
        for k in 1 2 3; do
            s=$(date +%s%N); hanganalyze --job "$LAUNCHER" -f json -o /dev/null 2>/dev/null
            say "  bench --job default samples ($NPROC ranks): $(ms_since $s)"
        done
    fi
    if [ "$sc" = straggler ] || [ "$sc" = mismatch ]; then
        t=0
        while [ "$(ls "$d"/fr.rank_* 2>/dev/null | wc -l)" -lt "$NPROC" ] && [ $t -lt $((PG_TIMEOUT + 60)) ]; do
            sleep 2; t=$((t + 2))
        done
        cp "$d"/fr.rank_* "$d/torchrun.log" "$R/" 2>/dev/null
        for f in "$d"/fr.rank_*; do [ -f "$f" ] && cp "$f" "$R/$sc.$(basename "$f")"; done
        cp "$d/torchrun.log" "$R/$sc.torchrun.log"
        say "  flight-recorder dumps: $(ls "$d"/fr.rank_* 2>/dev/null | wc -l) after ${t}s"
        hanganalyze "$R/$sc.run1.json" "$d"/fr.rank_* "$d/torchrun.log" -f json -o "$R/$sc.all-sources.json" \
            2> "$R/$sc.all-sources.err"
        say "  stacks + dumps + log: rc=$?"
        summarize "$R/$sc.all-sources.json"
    fi
    cp "$d"/*.log "$R/" 2>/dev/null; for f in "$d"/*.log; do cp "$f" "$R/$sc.$(basename "$f")"; done
    kill_job "$LAUNCHER"
done
rm -f "$R"/fr.rank_* "$R"/torchrun.log "$R"/launcher.log
tar -C "$WORK" -czf "$OUT/verdicts.tar.gz" reports
say "done in ${SECONDS}s"
