#!/usr/bin/env bash
# Capture every pod of a Kubernetes job, then merge: one report for the whole job (docs/job.md).
#
#   scripts/capture-k8s.sh OUTDIR -l SELECTOR [-n NAMESPACE] [-c CONTAINER] [--debug IMAGE]
#
# For each pod the selector names (e.g. -l training.kubeflow.org/job-name=train), scripts/capture-node.sh
# runs inside the pod's process namespace and writes one snapshot per rank and the pod's node summary;
# they come back over the same kubectl stream (a tar, as kubectl cp does) into OUTDIR/<pod>.rank<R>.json
# and OUTDIR/<pod>.node.json. Pods are captured HANGANALYZE_PODS_PARALLEL (default 16) at a time.
#   default:       kubectl exec POD -c CONTAINER: the training image has hanganalyze (pip install) and
#                  bash; the container may trace its own processes (same user, no CAP_SYS_PTRACE needed
#                  unless Yama's ptrace_scope is 1 or more on the node).
#   --debug IMAGE: kubectl debug POD --profile=sysadmin --target=CONTAINER --image=IMAGE: an ephemeral
#                  container with hanganalyze, in the training container's pid namespace and allowed
#                  to trace it (the image needs nothing; the pod's own container needs no capability).
# Without ptrace, each rank's snapshot still holds what /proc shows, and says why (README).
# Then the merge: hanganalyze OUTDIR -o HANGANALYZE_REPORT (default OUTDIR.html).
# Exit status: hanganalyze's on the merged job (0, 3, 5, 6; 4 some pod or rank could not be read).
# KUBECTL and HANGANALYZE name the commands (default kubectl, hanganalyze).
set -u -o pipefail
usage="usage: capture-k8s.sh OUTDIR -l SELECTOR [-n NAMESPACE] [-c CONTAINER] [--debug IMAGE]"
out=${1:?$usage}
shift
selector="" ns=() container="" image=""
while [ $# -gt 0 ]; do
  case "$1" in
    -l) selector=${2:?$usage}; shift 2 ;;
    -n) ns=(-n "${2:?$usage}"); shift 2 ;;
    -c) container=${2:?$usage}; shift 2 ;;
    --debug) image=${2:?$usage}; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
[ -n "$selector" ] || { echo "$usage" >&2; exit 2; }
kubectl=${KUBECTL:-kubectl}
hanganalyze=${HANGANALYZE:-hanganalyze}
parallel=${HANGANALYZE_PODS_PARALLEL:-16}
report=${HANGANALYZE_REPORT:-${out%/}.html}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" || exit 2
mapfile -t pods < <("$kubectl" get pods "${ns[@]}" -l "$selector" -o name)
if [ ${#pods[@]} -eq 0 ]; then
  echo "capture-k8s: no pod matches -l $selector" >&2
  exit 2
fi
# What runs in each pod: capture-node.sh (sent along, base64: the image needs only bash, base64 and tar),
# its messages to stderr, its files as a tar on stdout. The pod's name is its host name.
payload=$(base64 -w0 < "$here/capture-node.sh")
remote="d=\$(mktemp -d) && echo $payload | base64 -d > \$d/capture-node.sh && bash \$d/capture-node.sh \$d/out >&2; \
tar -C \$d/out -cf - . && rm -rf \$d"
capture_pod() {  # capture_pod POD: its files into OUTDIR, its messages prefixed with its name
  local pod=${1#pod/} cmd
  if [ -n "$image" ]; then
    cmd=("$kubectl" debug "${ns[@]}" "$pod" -i -q --profile=sysadmin --image="$image")
    [ -n "$container" ] && cmd+=(--target="$container")
  else
    cmd=("$kubectl" exec "${ns[@]}" -i "$pod")
    [ -n "$container" ] && cmd+=(-c "$container")
  fi
  "${cmd[@]}" -- bash -c "$remote" 2> >(sed "s|^|capture-k8s: $pod: |" >&2) | tar -C "$out" -xf - ||
    echo "capture-k8s: $pod: capture failed" >&2
}
running=0
for pod in "${pods[@]}"; do
  capture_pod "$pod" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
echo "capture-k8s: ${#pods[@]} pod(s) captured into $out; merging into $report" >&2
"$hanganalyze" "$out" -o "$report"
