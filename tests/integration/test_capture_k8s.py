"""The Kubernetes recipe (scripts/capture-k8s.sh, docs/job.md), as far as it runs without a cluster:
``kubectl`` is a stand-in whose pods are private pid and host-name namespaces on this machine
(``unshare``), each running one rank as a pod does (RANK in every process's environment, no
torchrun agent, the rank under pid 1).  The script sends capture-node.sh into each "pod", gets the
rank snapshots and the pod's node summary back as a tar over the stream, and merges them: the job
report names both ranks' deadlocks.  With ``--debug IMAGE`` it asks for ``kubectl debug
--profile=sysadmin --target=CONTAINER``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "py_deadlock.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="private pid namespaces (the stand-in pods) need root and unshare")

#: kubectl's stand-in: `get pods` lists two pods; `exec`/`debug` run the command in a new pid and UTS
#: namespace (the pod), where bash (pid 1, as a container's entry point) started the rank first.
FAKE_KUBECTL = r"""#!/usr/bin/env bash
case "$1" in
  get) echo "$*" >> "$FAKE_LOG"; printf 'pod/train-0\npod/train-1\n'; exit 0 ;;
  exec|debug) echo "${*:1:$#-1} SCRIPT" >> "$FAKE_LOG"  # the script itself (6 KB) left out: short appends
    [ -z "$FAKE_DRY" ] || exit 1 ;;  # a pod that cannot be reached
  *) exit 1 ;;
esac
shift
pod=""
while [ "$1" != "--" ]; do case "$1" in -n|-c) shift ;; -*) ;; *) pod=$1 ;; esac; shift; done
shift
exec unshare --pid --fork --mount-proc --uts bash -c '
  hostname "$0"; export RANK=${0##*-} WORLD_SIZE=2
  ready=$(mktemp); "$FAKE_PYTHON" "$FAKE_FIXTURE" > "$ready" 2>&1 &
  for _ in $(seq 600); do grep -q READY "$ready" && break; sleep 0.05; done; rm -f "$ready"; sleep 0.3
  "$@"' "$pod" "$@"
"""


def _capture(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    env = dict(os.environ, KUBECTL=str(kubectl), FAKE_LOG=str(tmp_path / "kubectl.log"), FAKE_PYTHON=sys.executable,
               FAKE_FIXTURE=str(FIXTURE), HANGANALYZE_REPORT=str(tmp_path / "job.json"), **env)
    cmd = ["bash", str(ROOT / "scripts" / "capture-k8s.sh"), str(tmp_path / "hang"), "-l", "job=train", "-n", "ml",
           "-c", "trainer"] + list(args)
    proc = subprocess.Popen(cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the stand-in pods die with their pid 1
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_every_pod_captured_and_merged(tmp_path):
    res = _capture(tmp_path)
    assert res.returncode == 5, res.stderr[-3000:]  # the merged job: a deadlock
    out = tmp_path / "hang"
    assert sorted(p.name for p in out.iterdir()) == ["train-0.node.json", "train-0.rank0.json",
                                                     "train-1.node.json", "train-1.rank1.json"], res.stderr
    calls = (tmp_path / "kubectl.log").read_text().splitlines()
    assert calls[0] == "get pods -n ml -l job=train -o name"
    for pod in ("train-0", "train-1"):
        assert "exec -n ml -i %s -c trainer -- bash -c SCRIPT" % pod in calls, calls
    report = json.loads((tmp_path / "job.json").read_text())
    assert sorted(p["rank"] for p in report["processes"]) == [0, 1]
    deadlocks = [f for f in report["findings"] if f["severity"] == "deadlock"]
    assert deadlocks and "worker-a" in json.dumps(deadlocks), report["findings"]


def test_debug_containers_asked_for_and_unreachable_pods_said(tmp_path):
    """--debug IMAGE: an ephemeral container allowed to trace the training container; a pod that
    cannot be reached is one line naming it, and nothing to merge is hanganalyze's input error."""
    res = _capture(tmp_path, "--debug", "hanganalyze:latest", FAKE_DRY="1")
    calls = (tmp_path / "kubectl.log").read_text().splitlines()
    for pod in ("train-0", "train-1"):
        assert ("debug -n ml %s -i -q --profile=sysadmin --image=hanganalyze:latest --target=trainer -- bash -c "
                "SCRIPT" % pod) in calls, calls
        assert "capture-k8s: %s: capture failed" % pod in res.stderr, res.stderr
    assert res.returncode == 2, res.stderr
