#!/usr/bin/env bash
# The job view on a real NCCL job on GPUs: what ran on the 2-GPU machine to make tests/data/gpu_job/.
#
#   OUT=DIR bash scripts/gpu_job_capture.sh [--install]
#
# On a machine with fewer GPUs than ranks the ranks share the GPUs (the fixture gives each rank its own
# NCCL_HOSTID, so NCCL uses its socket transport).
#
# For each scenario of tests/fixtures/gpu/nccl_job.py (straggler, mismatch; rank BAD_RANK=1 at fault):
#   1. start `torchrun --nproc_per_node=2` with the flight recorder on (TORCH_FR_BUFFER_SIZE=2000
#      TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=<dir>/fr.rank_) and a process-group
#      timeout of PG_TIMEOUT s; wait for both ranks' ready markers, then 3 s;
#   2. `hanganalyze --job <torchrun pid> --gdb cuda-gdb --format json` (live: attach, read, detach),
#      timed (wall time, peak RSS of hanganalyze and its gdbs); the Markdown report is rendered
#      from that JSON; for the straggler, also `hanganalyze --pid R0 --pid R1` (if there is time
#      left before the PG timeout);
#   3. wait (bounded) for the NCCL watchdog's timeout and the flight-recorder dumps of every rank,
#      then `hanganalyze <scenario>.job.json fr.rank_0 fr.rank_1` (stacks and dumps joined by rank);
#   4. kill the job (torchrun and every rank) before the next scenario.
#
# Writes to $OUT (at most 8 files come back from the device machine):
#   <scenario>.job.json, <scenario>.fr.rank_0, <scenario>.fr.rank_1 (straggler, mismatch),
#   extra.tar.gz (Markdown reports, job+fr JSONs, the --pid JSON, timings, torchrun logs, stderr).
# The caller tees stdout to $OUT/capture.log.
#
# --install: put hanganalyze and its dependencies (wheels carried in .whl/) into /tmp/site.
# Environment: GDB (cuda-gdb), PG_TIMEOUT (120), SCENARIOS ("straggler mismatch"), NPROC (2),
# BAD_RANK (1), HANG_BACKEND (nccl; gloo for a dry run on a machine with no GPU), BUDGET_S (540:
# no new step starts after this many seconds of the script).
set -u
# NVLink multicast stays off in every process (the device machine's rule: it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?set OUT to the output folder}
GDB=${GDB:-$(command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)}
PG_TIMEOUT=${PG_TIMEOUT:-120}
SCENARIOS=${SCENARIOS:-"straggler mismatch"}
NPROC=${NPROC:-2}
BAD_RANK=${BAD_RANK:-1}
BUDGET_S=${BUDGET_S:-540}
HANG_BACKEND=${HANG_BACKEND:-nccl}
PY=${PY:-python3}
WORK=$(mktemp -d /tmp/gpujob.XXXXXX)
EXTRA=$WORK/extra
mkdir -p "$OUT" "$EXTRA" "$WORK/bin"
TIMINGS=$EXTRA/timings.txt
JOB_PIDS=()

log() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*"; }
section() { echo; echo "=================== $* ==================="; }

# ------------------------------------------------------------------------------------- install
if [ "${1:-}" = "--install" ]; then
    section install
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$REPO"/.whl/*.whl || { echo "wheel install failed"; exit 1; }
    export PYTHONPATH=/tmp/site
fi
# The project itself: its two import folders (analyzer/, gdbext/) on the path, no install step; the
# source checkout's signatures/ is found beside them (hanganalyze/datapaths.py).
export PYTHONPATH="$REPO/analyzer:$REPO/gdbext${PYTHONPATH:+:$PYTHONPATH}"
printf '#!/bin/sh\nexec %s -m hanganalyze "$@"\n' "$(command -v $PY)" > "$WORK/bin/hanganalyze"
chmod +x "$WORK/bin/hanganalyze"
export PATH="$WORK/bin:$PATH"
HA=hanganalyze

# ------------------------------------------------------------------------------------- the machine
section machine
uname -a
nvidia-smi -L 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
$PY - <<'EOF' 2>&1
import sys, platform
print("python", sys.version.split()[0], sys.executable)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())
    if torch.cuda.is_available():
        print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:
    print("torch:", e)
for m in ("typer", "click", "pygdbmi", "elftools", "jinja2", "yaml", "jsonschema"):
    try:
        mod = __import__(m)
        print(m, getattr(mod, "__version__", "?"), mod.__file__)
    except Exception as e:
        print(m, "MISSING", e)
import hanganalyze
print("hanganalyze", hanganalyze.__file__)
EOF
command -v "$GDB" || log "no $GDB on PATH"
"$GDB" --version 2>&1 | head -2
nproc; free -g | head -2

# cuda-gdb runs gdbext in its embedded Python: check it has one (cuda-gdb picks its Python build by
# the libpython it finds, else falls back to cuda-gdb-minimal with no Python).
gdb_python() { timeout 120 "$1" -nx -batch -ex 'python import sys; print("GDBPY", sys.version.split()[0], sys.prefix)' 2>&1 | grep GDBPY; }
if ! gdb_python "$GDB"; then
    log "$GDB has no Python"
    CG_DIR=$(dirname "$(readlink -f "$(command -v "$GDB" || echo /usr/local/cuda/bin/cuda-gdb)")")
    if [ -f "$REPO/.gdbpy/libpython3.12.so.1.0" ] && [ -x "$CG_DIR/cuda-gdb-python3.12-tui" ]; then
        printf '#!/bin/sh\nexport LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PYTHONHOME=/usr\nexec %s "$@"\n' \
            "$REPO/.gdbpy" "$CG_DIR/cuda-gdb-python3.12-tui" > "$WORK/bin/cuda-gdb-py"
        chmod +x "$WORK/bin/cuda-gdb-py"
        if gdb_python "$WORK/bin/cuda-gdb-py"; then
            GDB=$WORK/bin/cuda-gdb-py
            log "using $GDB (cuda-gdb-python3.12-tui with a carried libpython3.12)"
        fi
    fi
fi
log "gdb: $GDB"

# ------------------------------------------------------------------------------------- helpers
# measure FILE LABEL -- CMD...: run CMD, then append "LABEL wall_s=.. peak_tree_rss_mib=.. maxrss_mib=.. rc=.."
# to FILE.  The tree RSS is the sum over hanganalyze and every descendant (its gdbs), sampled
# every 0.05 s; maxrss is getrusage(RUSAGE_CHILDREN).ru_maxrss: the largest single process.
cat > "$WORK/measure.py" <<'EOF'
import os, resource, subprocess, sys, threading, time
out, label, cmd = sys.argv[1], sys.argv[2], sys.argv[4:]
page = os.sysconf("SC_PAGE_SIZE")
def tree_rss(root):
    kids, rss = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d, "rb") as f:
                raw = f.read()
            ppid = int(raw[raw.rfind(b")") + 2:].split()[1])
            with open("/proc/%s/statm" % d) as f:
                rss[int(d)] = int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(kids.get(p, []))
    return total
t0 = time.monotonic()
proc = subprocess.Popen(cmd)
peak = [0]
def sample():
    while proc.poll() is None:
        peak[0] = max(peak[0], tree_rss(proc.pid))
        time.sleep(0.05)
th = threading.Thread(target=sample, daemon=True)
th.start()
rc = proc.wait()
wall = time.monotonic() - t0
th.join(1)
maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
line = "%s wall_s=%.1f peak_tree_rss_mib=%.0f maxrss_mib=%.0f rc=%d" % (label, wall, peak[0] / 2**20, maxrss, rc)
with open(out, "a") as f:
    f.write(line + "\n")
print(line, flush=True)
sys.exit(rc)
EOF
measure() { $PY "$WORK/measure.py" "$@"; }

# findings FILE: the findings and rank states of a report, as the product wrote them.
findings() {
    $PY - "$1" <<'EOF'
import json, sys
try:
    snap = json.load(open(sys.argv[1]))
except Exception as e:
    print("  (no report: %s)" % e); sys.exit(0)
for f in snap.get("findings", []):
    print("  FINDING %s [%s] ranks=%s: %s" % (f.get("signature"), f.get("severity"), f.get("ranks"), f.get("summary")))
job = snap.get("job") or {}
for s in job.get("states", []):
    print("  state rank %s: %s op=%s call_site=%s where=%s seq=%s" % (
        s.get("rank"), s.get("state"), s.get("op"), s.get("call_site"), s.get("where"), s.get("seq")))
for c in job.get("classes", []):
    print("  class %s (%s): %s" % (c.get("ranks"), c.get("state"), c.get("where")))
for p in snap.get("processes", []):
    if p.get("error"):
        print("  process rank %s error: %s" % (p.get("rank"), p.get("error")))
    for n in (p.get("notes") or [])[:5]:
        print("  note rank %s: %s" % (p.get("rank"), n))
for w in snap.get("warnings", []) or []:
    print("  warning:", w)
EOF
}

kill_job() {  # kill_job TORCHRUN_PID: torchrun, then every rank (each rank has its own session)
    local tr=$1 p
    local ranks
    ranks=$(pgrep -P "$tr" 2>/dev/null)
    for p in "${JOB_PIDS[@]}" $ranks; do kill -TERM "$p" 2>/dev/null; done
    kill -TERM "$tr" 2>/dev/null
    sleep 3
    for p in "${JOB_PIDS[@]}" $ranks "$tr"; do kill -KILL "$p" 2>/dev/null; done
    wait "$tr" 2>/dev/null
    log "torchrun exit status: $?"
    JOB_PIDS=()
}

# ------------------------------------------------------------------------------------- scenarios
for sc in $SCENARIOS; do
    section "scenario $sc"
    if [ "$SECONDS" -gt $((BUDGET_S - PG_TIMEOUT - 60)) ]; then
        log "SKIPPED $sc: not enough time left in the budget"
        continue
    fi
    d=$WORK/$sc
    mkdir -p "$d/ready"
    (
        unset PYTHONPATH
        export HANG_READY_DIR=$d/ready PG_TIMEOUT HANG_DIE_WITH_PARENT=1 HANG_BACKEND \
            TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=$d/fr.rank_
        if command -v torchrun >/dev/null; then
            exec torchrun --standalone --nproc_per_node="$NPROC" "$REPO/tests/fixtures/gpu/nccl_job.py" "$sc" "$BAD_RANK"
        fi
        exec $PY -m torch.distributed.run --standalone --nproc_per_node="$NPROC" \
            "$REPO/tests/fixtures/gpu/nccl_job.py" "$sc" "$BAD_RANK"
    ) > "$d/torchrun.log" 2>&1 &
    TR=$!
    log "torchrun pid $TR: $sc, bad rank $BAD_RANK, PG timeout $PG_TIMEOUT s"
    ready=0
    for _ in $(seq 1 480); do
        n=$(ls "$d/ready" | grep -c '^rank[0-9]*\.pid$')
        [ "$n" -ge "$NPROC" ] && { ready=1; break; }
        kill -0 "$TR" 2>/dev/null || break
        sleep 0.5
    done
    T_READY=$SECONDS
    for f in "$d"/ready/rank*.pid; do [ -f "$f" ] && JOB_PIDS+=("$(cat "$f")"); done
    log "ready=$ready markers: $(cd "$d/ready" && echo *) pids: ${JOB_PIDS[*]:-}"
    if [ "$ready" != 1 ]; then
        log "FAILED: the job did not get stuck"; tail -50 "$d/torchrun.log"; kill_job "$TR"
        cp "$d/torchrun.log" "$EXTRA/$sc.torchrun.log"; continue
    fi
    ps -o pid,ppid,stat,pcpu,rss,cmd -p "$(IFS=,; echo "${JOB_PIDS[*]}")" 2>&1
    grep -v "^\*\*\*\|^W.*run.py\|OMP_NUM_THREADS" "$d/torchrun.log" | cut -c1-300 | head -12
    sleep 3
    ls "$d/ready"

    # ---- the job, live: every rank of the torchrun
    log "hanganalyze --job $TR"
    measure "$TIMINGS" "$sc --job" -- $HA --job "$TR" --gdb "$GDB" --timeout 300 --format json \
        -o "$OUT/$sc.job.json" 2> "$d/job.stderr"
    rc=$?
    log "--job exit $rc; stderr:"; head -c 3000 "$d/job.stderr"; cp "$d/job.stderr" "$EXTRA/$sc.job.stderr"
    findings "$OUT/$sc.job.json"
    # Two cuda-gdb sessions at once may not be allowed: if a rank could not be analyzed, once more one at a time.
    if [ "$rc" != 3 ] || grep -q '"error": "' "$OUT/$sc.job.json" 2>/dev/null; then
        log "a rank was not analyzed: hanganalyze --job $TR --parallel 1"
        mv "$OUT/$sc.job.json" "$EXTRA/$sc.job.parallel.json" 2>/dev/null
        measure "$TIMINGS" "$sc --job --parallel 1" -- $HA --job "$TR" --parallel 1 --gdb "$GDB" --timeout 300 \
            --format json -o "$OUT/$sc.job.json" 2> "$d/job1.stderr"
        log "--job --parallel 1 exit $?; stderr:"; head -c 3000 "$d/job1.stderr"
        findings "$OUT/$sc.job.json"
    fi
    JOB_WALL=$(( SECONDS - T_READY ))
    $HA "$OUT/$sc.job.json" --format md -o "$EXTRA/$sc.job.md" 2>&1; log "md from the JSON: exit $? ($(wc -c < "$EXTRA/$sc.job.md" 2>/dev/null) chars)"
    ls "$d/ready"

    # ---- several --pid (one scenario is enough), if the ranks are still stuck long enough for it
    if [ "$sc" = straggler ]; then
        left=$(( PG_TIMEOUT - (SECONDS - T_READY) - 3 ))
        if [ "$left" -gt $(( JOB_WALL + 15 )) ]; then
            args=()
            for r in $(seq $((NPROC - 1)) -1 0); do args+=(--pid "$(cat "$d/ready/rank$r.pid")"); done
            log "hanganalyze ${args[*]} ($left s before the PG timeout)"
            measure "$TIMINGS" "$sc --pid x$NPROC" -- $HA "${args[@]}" --gdb "$GDB" --timeout 300 --format json \
                -o "$EXTRA/$sc.pids.json" 2> "$d/pids.stderr"
            log "--pid exit $?; stderr:"; head -c 2000 "$d/pids.stderr"
            findings "$EXTRA/$sc.pids.json"
        else
            log "SKIPPED --pid: only $left s left before the PG timeout (--job took about $JOB_WALL s)"
        fi
    fi

    # ---- the flight recorder: every rank dumps when the watchdog times out
    deadline=$(( T_READY + PG_TIMEOUT + 120 ))
    [ "$deadline" -gt "$BUDGET_S" ] && deadline=$BUDGET_S
    log "waiting for the PG timeout and the dumps (until +${deadline}s)"
    last=""; stable=0; gone=0; sizes=""
    while [ "$SECONDS" -lt "$deadline" ]; do
        sizes=""
        for r in $(seq 0 $((NPROC - 1))); do sizes="$sizes $(stat -c %s "$d/fr.rank_$r" 2>/dev/null || echo -)"; done
        kill -0 "$TR" 2>/dev/null && gone=0 || gone=$((gone + 1))
        if ! echo "$sizes" | grep -q -- '-'; then
            if [ "$sizes" = "$last" ]; then stable=$((stable + 1)); else stable=0; fi
            [ "$stable" -ge 2 ] && [ "$gone" -ge 1 ] && break  # every dump written and the job is gone
            [ "$stable" -ge 5 ] && break
        fi
        [ "$gone" -ge 8 ] && break  # the job ended without (all) its dumps
        last=$sizes
        sleep 1
    done
    log "dumps:$sizes (torchrun alive: $(kill -0 "$TR" 2>/dev/null && echo yes || echo no))"
    ls -la "$d"
    for r in $(seq 0 $((NPROC - 1))); do
        [ -f "$d/fr.rank_$r" ] && cp "$d/fr.rank_$r" "$OUT/$sc.fr.rank_$r"
    done
    kill_job "$TR"
    grep -E "Watchdog caught|last enqueued|dump signal|Received|ranks? [0-9]|Error|error" "$d/torchrun.log" | cut -c1-400 | head -30
    cp "$d/torchrun.log" "$EXTRA/$sc.torchrun.log"
    frs=()
    for r in $(seq 0 $((NPROC - 1))); do [ -f "$OUT/$sc.fr.rank_$r" ] && frs+=("$OUT/$sc.fr.rank_$r"); done
    if [ "${#frs[@]}" -gt 0 ] && [ -f "$OUT/$sc.job.json" ]; then
        log "hanganalyze $sc.job.json ${frs[*]##*/}"
        $HA "$OUT/$sc.job.json" "${frs[@]}" --format json -o "$EXTRA/$sc.job+fr.json" 2> "$d/fr.stderr"
        log "job+fr exit $?"; head -c 2000 "$d/fr.stderr"
        findings "$EXTRA/$sc.job+fr.json"
        $HA "$OUT/$sc.job.json" "${frs[@]}" --format md -o "$EXTRA/$sc.job+fr.md" 2>/dev/null
    fi
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv 2>&1 | head -5
done

section done
cat "$TIMINGS" 2>/dev/null
tar -czf "$OUT/extra.tar.gz" -C "$WORK" extra && ls -la "$OUT"
