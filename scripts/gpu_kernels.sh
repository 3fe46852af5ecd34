#!/usr/bin/env bash
# `hanganalyze --job --gpu-kernels` on real NCCL jobs (issue 34, the kernels): cuda-gdb lists each
# rank's GPU kernels, twice, after the stacks.
#
#   OUT=DIR bash scripts/gpu_kernels.sh [--install]
#
#   spin     rank BAD_RANK's GPU runs spin_kernel (torch.cuda._sleep) that never ends, its host waits in
#            .item(); the other rank waits in all_reduce -> .item() (its GPU in an NCCL kernel).
#            Want, in each of RUNS runs: gpu-kernel-never-ends naming rank BAD_RANK only.
#   healthy  the near miss: matmul, all_reduce, .item() forever.  Want: no gpu-kernel-never-ends.
# Two ranks on one GPU are fine (NCCL then uses its socket transport; cuda-gdb attaches to both at once).
#
# Keeps, under $OUT: every report (JSON and text), each attach's raw cuda-gdb output
# (raw/<scenario>.run<i>/pid<PID>-<round>.txt: the real captures for tests/data), one standalone timed
# `cuda-gdb -batch` attach per rank, and summary.txt (also printed).  Nothing is gcore'd.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT to the output folder}
NPROC=${NPROC:-2}
BAD_RANK=${BAD_RANK:-1}
RUNS=${RUNS:-5}
NEAR_RUNS=${NEAR_RUNS:-2}
PG_TIMEOUT=${PG_TIMEOUT:-900}  # the hang must outlive every run (the NCCL watchdog ends it after that)
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
BUDGET_S=${BUDGET_S:-540}
PY=${PY:-python3}
WORK=$(mktemp -d /tmp/gpukernels.XXXXXX)
mkdir -p "$OUT/reports" "$OUT/raw" "$WORK/bin"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
ms_since() { echo "$(( ($(date +%s%N) - $1) / 1000000 )) ms"; }
say() { echo "$*" | tee -a "$SUMMARY"; }

. "$REPO/scripts/gpu_env.sh"
gpu_setup "$WORK" "$@"
export PATH="$PATH:/usr/local/cuda/bin"
for d in /usr/local/cuda*/bin; do [ -x "$d/cuda-gdb" ] && export PATH="$PATH:$d"; done
say "cuda-gdb: $(command -v cuda-gdb || echo 'not found (the reports must say so in one line)')"
command -v cuda-gdb >/dev/null && cuda-gdb --version 2>&1 | head -2 | tee -a "$SUMMARY"
nvidia-smi -L 2>&1 | head -4
$PY -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'

cat > "$WORK/check.py" <<'PYEOF'
import json, sys
sc, bad, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
named = other = 0
for path in paths:
    try:
        snap = json.load(open(path))
    except Exception as e:
        print("  %s: unreadable (%s)" % (path.rsplit("/", 1)[-1], e)); continue
    fs = [f for f in snap.get("findings", []) if f.get("signature") == "gpu-kernel-never-ends"]
    named += any(f.get("ranks") == [bad] for f in fs)
    other += any(f.get("ranks") != [bad] for f in fs)
    print("  %s: %s" % (path.rsplit("/", 1)[-1], "; ".join("%s%s@%.2f" % (f.get("signature"), f.get("ranks") or "",
          f.get("confidence") or 0) for f in snap.get("findings", [])) or "no findings"))
    for f in fs:
        print("      %s" % (f.get("summary") or "")[:400])
    for w in snap.get("warnings", []):
        if w.startswith("GPU kernels"):
            print("      note: %s" % w)
    for p in snap.get("processes", []):
        ck = p.get("cuda_kernels") or {}
        for s in ck.get("samples", []):
            print("      rank %s pid %s t=%s attach=%ss %s%s" % (
                p.get("rank"), p.get("pid"), s.get("t"), s.get("attach_s"),
                ", ".join("%s/grid %s %s" % (k.get("name"), k.get("grid"), k.get("status")) for k in s.get("kernels", []))
                or "no kernels", (" error=" + s["error"]) if s.get("error") else ""))
if sc == "spin":
    print("  check spin: %d/%d runs name rank %d in gpu-kernel-never-ends, %d name another" % (named, len(paths), bad, other))
else:
    print("  check %s: %d/%d runs with gpu-kernel-never-ends (want 0)" % (sc, named + other, len(paths)))
PYEOF

wait_marks() {  # wait_marks DIR N TIMEOUT: until N rank*.pid files exist (spin: at the hang; healthy: step 20)
    local t=0
    while [ "$(ls "$1"/rank*.pid 2>/dev/null | wc -l)" -lt "$2" ]; do
        sleep 1; t=$((t + 1))
        if [ $t -ge "$3" ]; then return 1; fi
    done
    return 0
}

for sc in spin healthy; do
    [ "$SECONDS" -ge "$BUDGET_S" ] && { say "== $sc: skipped (budget)"; continue; }
    n=$RUNS; [ "$sc" = healthy ] && n=$NEAR_RUNS
    d=$WORK/$sc; mkdir -p "$d"
    env HANG_READY_DIR="$d" PG_TIMEOUT="$PG_TIMEOUT" HANG_DIE_WITH_PARENT=1 setsid $PY -m torch.distributed.run \
        --standalone --nproc_per_node="$NPROC" "$REPO/tests/fixtures/gpu/nccl_job.py" "$sc" "$BAD_RANK" \
        > "$d/torchrun.log" 2>&1 &
    LAUNCHER=$!
    say "== $sc (launcher $LAUNCHER)"
    wait_marks "$d" "$NPROC" 150 || { say "  ranks not ready in 150 s"; tail -20 "$d/torchrun.log"; }
    sleep 3
    for i in $(seq 1 "$n"); do
        [ "$SECONDS" -ge "$BUDGET_S" ] && { say "  run $i: skipped (budget)"; break; }
        s=$(date +%s%N)
        HANGANALYZE_CUDA_GDB_RAW="$OUT/raw/$sc.run$i" timeout "$RUN_TIMEOUT" \
            hanganalyze --job "$LAUNCHER" --gpu-kernels -f json -o "$OUT/reports/$sc.run$i.json" \
            2> "$OUT/reports/$sc.run$i.err"
        say "  run $i: rc=$? wall=$(ms_since $s)"
        [ -s "$OUT/reports/$sc.run$i.err" ] && head -3 "$OUT/reports/$sc.run$i.err" | tee -a "$SUMMARY"
        hanganalyze "$OUT/reports/$sc.run$i.json" -o "$OUT/reports/$sc.run$i.txt" 2>/dev/null
    done
    $PY "$WORK/check.py" "$sc" "$BAD_RANK" "$OUT/reports/$sc".run*.json | tee -a "$SUMMARY"
    if command -v cuda-gdb >/dev/null && [ "$SECONDS" -lt "$BUDGET_S" ]; then  # one standalone timed attach per rank
        for pid in $(cat "$d"/rank*.pid); do
            s=$(date +%s%N)
            timeout 120 cuda-gdb -nx -batch -iex "set auto-load off" -iex "set debuginfod enabled off" \
                -iex "set pagination off" -iex "set width 0" -iex "set confirm off" -p "$pid" \
                -ex "info cuda devices" -ex "info cuda kernels" -ex detach > "$OUT/raw/$sc.standalone.pid$pid.txt" 2>&1
            say "  standalone cuda-gdb attach pid $pid: rc=$? $(ms_since $s)"
        done
    fi
    cp "$d/torchrun.log" "$OUT/reports/$sc.torchrun.log" 2>/dev/null
    kill -9 -- -"$LAUNCHER" 2>/dev/null; sleep 1
    for p in $(cat "$d"/rank*.pid 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; sleep 2
done
say "done in ${SECONDS}s"
