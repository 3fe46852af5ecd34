#!/usr/bin/env bash
# Where one sample of a GPU rank spends its time: a 2-rank NCCL straggler (tests/fixtures/gpu/nccl_job.py),
# then on rank 0: -X importtime and cProfile of `hanganalyze --pid R --samples 1` (warm cache) and
# pystack for reference.  OUT=DIR bash scripts/gpu_profile_rank.sh [--install]
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
PY=${PY:-python3}
if [ "${1:-}" = "--install" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$REPO"/.whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$REPO/analyzer:$REPO/gdbext${PYTHONPATH:+:$PYTHONPATH}"
# Bytecode as an installed copy has it (pip compiles at install): the copied tree has none, and a
# run that compiles ~90 modules from source each time measures the compiler, not hanganalyze.
unset PYTHONDONTWRITEBYTECODE
$PY -m compileall -q "$REPO/analyzer" "$REPO/gdbext" > /dev/null || echo "compileall failed"
D=$(mktemp -d)
HANG_READY_DIR=$D PG_TIMEOUT=300 HANG_DIE_WITH_PARENT=1 setsid $PY -m torch.distributed.run --standalone \
    --nproc_per_node=2 "$REPO/tests/fixtures/gpu/nccl_job.py" straggler 1 > "$D/log" 2>&1 &
L=$!
for i in $(seq 150); do [ -f "$D/rank0.pid" ] && [ -f "$D/rank1.pid" ] && break; sleep 1; done
sleep 3
R=$(cat "$D/rank0.pid")
HA=("$PY" -m hanganalyze --pid "$R" --samples 1 -f json -o /dev/null)
"${HA[@]}"; "${HA[@]}"  # warm the symbol cache and the bytecode
# interleaved, REPS (default 3) rounds: one sample of ours, then pystack's, on the same rank
for k in $(seq "${REPS:-3}"); do
    s=$(date +%s%N); "${HA[@]}"; echo "one sample: $(( ($(date +%s%N) - s) / 1000000 )) ms"
    s=$(date +%s%N); $PY -m pystack remote --native "$R" > /dev/null 2>&1; echo "pystack: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
s=$(date +%s%N); $PY -m hanganalyze --job "$L" -f json -o /dev/null; echo "--job (3 samples, 2 ranks): $(( ($(date +%s%N) - s) / 1000000 )) ms"
$PY -X importtime "${HA[@]:1}" 2> "$OUT/importtime.txt"
$PY -m cProfile -o "$OUT/prof.out" "${HA[@]:1}"
$PY - "$OUT/prof.out" <<'PYEOF' | tee "$OUT/prof.txt"
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative").print_stats(45); s.sort_stats("tottime").print_stats(25)
PYEOF
sort -t'|' -k2 -n "$OUT/importtime.txt" | tail -15
kill -9 -- -"$L" 2>/dev/null; pkill -9 -f nccl_job.py
