#!/usr/bin/env bash
# Capture every rank of this node into one snapshot JSON per rank, for `hanganalyze FOLDER` later.
#
#   scripts/capture-node.sh OUTDIR [AGENT_PID ...]
#
# Without AGENT_PID, every torchrun / torch.distributed.run agent and Slurm step (slurmstepd) of this
# node is used, except the step this script runs in (srun --overlap); with none, every process that
# names a rank in its environment (a Kubernetes pod running `python train.py`: scripts/capture-k8s.sh).  Each worker (a child of an
# agent) is analyzed live with `hanganalyze --pid` (read-only, detached afterwards), at most
# HANGANALYZE_PARALLEL (default: number of CPUs) at a time, into OUTDIR/<host>.rank<R>.json (R from
# the worker's RANK, else OMPI_COMM_WORLD_RANK, else SLURM_PROCID).  Run it on every node through the job's own
# launcher (srun --overlap, pdsh, kubectl exec: see docs/job.md), then merge: hanganalyze OUTDIR.
# It also writes OUTDIR/<host>.node.json, the node summary (`hanganalyze --format node`): a folder of them
# merges at cluster scale (16,384 nodes), and the report names the rank files for the stacks.
# Exit status: 0 when every rank was captured, 1 otherwise (the other ranks' files are still written).
set -u
out=${1:?usage: capture-node.sh OUTDIR [AGENT_PID ...]}
shift
mkdir -p "$out" || exit 1
hanganalyze=${HANGANALYZE:-hanganalyze}
parallel=${HANGANALYZE_PARALLEL:-$(nproc)}
host=$(hostname -s 2>/dev/null || echo node)
agents=("$@")
if [ ${#agents[@]} -eq 0 ]; then
  mapfile -t agents < <(pgrep -f 'torch\.distributed\.run|torchrun' || true; pgrep -x slurmstepd || true)
fi
# Our own ancestors are no agents to capture: under `srun --overlap` our slurmstepd's child is this
# script, which carries SLURM_PROCID too.
ancestors=" "
p=$$
while [ -n "$p" ] && [ "$p" -gt 1 ] 2>/dev/null; do
  ancestors="$ancestors$p "
  p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
done
rank_of() {  # the rank a process's environment names (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID), or nothing
  local env_of r
  env_of=$(tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null)
  r=$(sed -n 's/^RANK=//p' <<<"$env_of")
  [ -n "$r" ] || r=$(sed -n 's/^OMPI_COMM_WORLD_RANK=//p' <<<"$env_of")
  [ -n "$r" ] || r=$(sed -n 's/^SLURM_PROCID=//p' <<<"$env_of")
  echo "$r"
}
workers=()
for agent in "${agents[@]}"; do
  case "$ancestors" in *" $agent "*) continue ;; esac
  mapfile -t -O "${#workers[@]}" workers < <(pgrep -P "$agent")
done
if [ ${#agents[@]} -eq 0 ]; then
  # No agent: a Kubernetes pod or container running the rank itself (`python train.py` with RANK set,
  # often pid 1 or under `sh -c`; the container's environment gives every process its RANK). Its
  # workers are the Python processes that name a rank, less those whose parent is a Python process of
  # the same rank (DataLoader workers, multiprocessing children). In a pod /proc holds only the pod's.
  is_python() {
    local e
    e=$(readlink "/proc/$1/exe" 2>/dev/null) || e=$(cat "/proc/$1/comm" 2>/dev/null)
    case "${e##*/}" in python*) return 0 ;; esac
    return 1
  }
  for d in /proc/[0-9]*; do
    w=${d#/proc/}
    case "$ancestors" in *" $w "*) continue ;; esac
    r=$(rank_of "$w")
    [ -n "$r" ] && is_python "$w" || continue
    parent=$(awk '{print $4}' "$d/stat" 2>/dev/null)
    [ -n "$parent" ] && is_python "$parent" && [ "$(rank_of "$parent")" = "$r" ] && continue
    workers+=("$w")
  done
fi
if [ ${#workers[@]} -eq 0 ]; then
  echo "capture-node: no torchrun agent and no process with a RANK on $host" >&2
  exit 1
fi
status=0
running=0
for w in "${workers[@]}"; do
    r=$(rank_of "$w")
    [ -n "$r" ] || continue  # not a worker (no RANK)
    "$hanganalyze" --pid "$w" --format json -o "$out/$host.rank$r.json" 2>"$out/.$host.rank$r.err" &
    running=$((running + 1))
    if [ "$running" -ge "$parallel" ]; then
      wait -n || true
      running=$((running - 1))
    fi
done
wait
for err in "$out"/.*.err; do
  [ -e "$err" ] || continue
  if [ -s "$err" ]; then
    json="$out/$(basename "${err%.err}" | sed 's/^\.//').json"
    if [ -s "$json" ]; then
      # a warning (no ptrace: /proc only) is said, not a failure; "wrote FILE" is not news
      grep -v '^hanganalyze: wrote ' "$err" | sed 's/^hanganalyze: /capture-node: /' >&2
    else
      echo "capture-node: $(cat "$err")" >&2
      status=1
    fi
  fi
  rm -f "$err"
done
# The node summary (written by render/node.py, read by acquire/nodesummary.py): what the job verdict
# needs of each rank and the node's merged call tree; `hanganalyze OUTDIR` merges the summaries of every node (or summaries of summaries).
# Exit 3 only says a hang was found; 2 and 4 are failures.
set -- "$out/$host".rank*.json
if [ -e "$1" ]; then
  "$hanganalyze" --format node -o "$out/$host.node.json" "$@" 2>"$out/.$host.node.err"
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    echo "capture-node: node summary: $(cat "$out/.$host.node.err")" >&2
    status=1
  fi
  rm -f "$out/.$host.node.err"
fi
exit $status
