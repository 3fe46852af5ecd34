#!/usr/bin/env bash
# hanganalyze's direct reader against py-spy and pystack (and cuda-gdb) on one rank of a real,
# stuck NCCL job on a GPU machine.  Usage (on the device machine, wheels carried in .whl/, py-spy
# and pystack among them):
#
#   OUT=DIR ROUNDS=3 bash scripts/gpu_bench_direct.sh
#
# Starts `torchrun --nproc_per_node=2 tests/fixtures/gpu/nccl_job.py straggler 1` (both ranks on
# the GPUs there are; rank 1 sleeps, rank 0 waits in all_reduce), then on rank 0, round-robin
# ROUNDS times: `hanganalyze --pid` (direct), `py-spy dump --native --pid`, `pystack remote
# --native`; once `hanganalyze --engine gdb --gdb cuda-gdb --pid` for reference.  Writes
# $OUT/bench.txt (wall s, max RSS MiB per run) and both hanganalyze JSONs.  No core is taken.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT}
ROUNDS=${ROUNDS:-3}
PY=${PY:-python3}
GDB=${GDB:-$(command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)}
WORK=$(mktemp -d /tmp/gpubench.XXXXXX)
mkdir -p "$OUT" "$WORK/bin" "$WORK/ready"
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*"; }

$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$REPO"/.whl/*.whl || { echo "wheel install failed"; exit 1; }
cp -r "$REPO" "$WORK/src" && rm -rf "$WORK/src/.whl" "$WORK/src/build" "$WORK/src"/*.egg-info
(cd "$WORK/src" && $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site .) \
    || { echo "project install failed"; exit 1; }
export PYTHONPATH=/tmp/site
printf '#!/bin/sh\nexec %s -m hanganalyze "$@"\n' "$(command -v $PY)" > "$WORK/bin/hanganalyze"
chmod +x "$WORK/bin/hanganalyze"
export PATH="$WORK/bin:/tmp/site/bin:$PATH"
nvidia-smi -L; nproc
$PY -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
command -v py-spy pystack llvm-addr2line addr2line

(
    unset PYTHONPATH
    export HANG_READY_DIR=$WORK/ready PG_TIMEOUT=600 HANG_DIE_WITH_PARENT=1 HANG_BACKEND=nccl
    exec torchrun --standalone --nproc_per_node=2 "$REPO/tests/fixtures/gpu/nccl_job.py" straggler 1
) > "$WORK/torchrun.log" 2>&1 &
TR=$!
for _ in $(seq 1 480); do
    [ "$(ls "$WORK/ready" | grep -c '^rank[0-9]*\.pid$')" -ge 2 ] && break
    kill -0 "$TR" 2>/dev/null || break
    sleep 0.5
done
R0=$(cat "$WORK/ready/rank0.pid" 2>/dev/null) || { echo "job did not start"; tail -40 "$WORK/torchrun.log"; exit 1; }
sleep 3
log "torchrun $TR, rank 0 pid $R0"

measure() {  # measure NAME CMD...: one line "NAME wall_s maxrss_MiB rc"
    local name=$1; shift
    $PY - "$name" "$@" <<'EOF' >> "$OUT/bench.txt"
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
print("%-34s %.3f %.0f %d" % (sys.argv[1], wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, r.returncode))
if r.returncode not in (0, 3):
    sys.stderr.write(r.stderr.decode(errors="replace")[-800:])
EOF
}
# first run: empty symbol cache
measure "hanganalyze-first-run" hanganalyze --pid "$R0" -f json -o "$OUT/direct.json"
for r in $(seq 1 "$ROUNDS"); do
    measure "hanganalyze--pid" hanganalyze --pid "$R0" -f json -o "$WORK/d.json"
    measure "py-spy-dump--native" py-spy dump --native --pid "$R0"
    measure "pystack-remote--native" pystack remote --native "$R0"
done
measure "hanganalyze--engine-gdb-cuda-gdb" hanganalyze --pid "$R0" --engine gdb --gdb "$GDB" --timeout 300 \
    -f json -o "$OUT/cudagdb.json"
cat "$OUT/bench.txt"
$PY - "$OUT/direct.json" "$OUT/cudagdb.json" <<EOF
import json, sys
sys.path.insert(0, "$REPO/tests")
from engines import snapshot_differences
d, g = (json.load(open(p)) for p in sys.argv[1:3])
diff = snapshot_differences(d, g)
print("direct vs cuda-gdb: %d differences" % len(diff))
for x in diff[:20]:
    print("  ", x[:300])
print("findings", [f["signature"] for f in d["findings"]], "threads", len(d["processes"][0]["threads"]))
EOF
kill -TERM "$TR" $(pgrep -P "$TR") 2>/dev/null; sleep 2; kill -KILL "$TR" $(cat "$WORK"/ready/rank*.pid) 2>/dev/null
log done
