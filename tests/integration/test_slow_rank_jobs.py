"""Stuck or slow, for real (issue 31): real 3-rank gloo jobs on CPU whose training loop runs at
MODULE level (tests/fixtures/torch_module_loop_job.py: the step counter is a global, no fast local
moves), read by ``hanganalyze --job`` with the default sampling.

* ``slow``: rank 1 blocks ~0.4 s in ``augment_batch`` every step and the others wait for it in
  ``all_reduce``: named slow (``rank-slow``, a warning), no hang finding, exit 0.  Before issue 31
  the three samples landed in the sleep every time: "STUCK", collective-straggler (hang), 5 of 5.
* ``stopped``: rank 1 sleeps for ever: still STUCK (collective-straggler, hang), and fast: a thread
  that never woke needs no longer window.

One job per scenario (module-scoped); the healthy job is test_progress_samples.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
from helpers import FIXTURES, run_hanganalyze
from jobs import _launch, _markers, _venv_bin

NPROC, BAD = 3, 1
TIMEOUT = 300


def _start(scenario: str, tmp: Path):
    argv = [_venv_bin("torchrun"), "--standalone", "--nproc_per_node=%d" % NPROC,
            str(FIXTURES / "torch_module_loop_job.py"), scenario, str(BAD)]
    job = _launch("torch", argv, tmp / "ready", tmp / "launcher.log", {})
    deadline = time.monotonic() + 180
    while not all("rank%d.pid" % r in _markers(job.ready_dir) for r in range(NPROC)):
        if time.monotonic() > deadline or job.proc.poll() is not None:
            job.stop()
            raise RuntimeError("job %s did not start:\n%s" % (scenario, job.log_tail()))
        time.sleep(0.2)
    time.sleep(0.5)
    return job


def _read(job, tmp: Path) -> Dict:
    """``--job`` once, JSON and the text's verdict line, with its wall time."""
    out = tmp / "out.json"
    t0 = time.monotonic()
    res = run_hanganalyze(["--job", str(job.launcher_pid), "--format", "json", "-o", str(out)], timeout=TIMEOUT)
    took = time.monotonic() - t0
    assert res.returncode in (0, 3), res.stderr.decode("utf-8", "replace")[-2000:]
    snap = json.loads(out.read_text())
    text = run_hanganalyze([str(out)], timeout=TIMEOUT).stdout.decode("utf-8", "replace")
    snap["_rc"], snap["_took"] = res.returncode, took
    snap["_verdict"] = next((ln for ln in text.splitlines() if ln.startswith("VERDICT:")), "")
    return snap


@pytest.fixture(scope="module")
def slow_job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slow-module-loop")
    job = _start("slow", tmp)
    with job:
        yield _read(job, tmp)


@pytest.fixture(scope="module")
def stopped_job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stopped-module-loop")
    job = _start("stopped", tmp)
    with job:
        yield _read(job, tmp)


def _hangs(snap: Dict) -> List:
    return [(f["signature"], f["summary"]) for f in snap["findings"] if f["severity"] in ("hang", "deadlock")]


def test_a_rank_slowed_in_a_module_level_loop_is_named_slow(slow_job):
    snap = slow_job
    print("slow: %.2f s: %s" % (snap["_took"], snap["_verdict"]))
    assert _hangs(snap) == [] and snap["_rc"] == 0, _hangs(snap)
    slow = [f for f in snap["findings"] if f["signature"] == "rank-slow"]
    assert slow and slow[0]["ranks"] == [BAD] and slow[0]["severity"] == "warning", \
        [(f["signature"], f["summary"]) for f in snap["findings"]]
    assert "in augment_batch" in slow[0]["summary"]
    assert snap["_verdict"].startswith("VERDICT: rank 1 is in augment_batch") and "SLOW, not stuck" in snap["_verdict"]
    assert "STUCK" not in snap["_verdict"] and snap["_verdict"].endswith("[rank-slow]")
    facts = {p["rank"]: p for p in snap["job"]["progress"]}
    assert all(facts[r]["state"] == "progressing" for r in range(NPROC)), facts


def test_a_stopped_rank_is_still_stuck_and_fast(stopped_job):
    snap = stopped_job
    print("stopped: %.2f s: %s" % (snap["_took"], snap["_verdict"]))
    strag = [f for f in snap["findings"] if f["signature"] == "collective-straggler"]
    assert strag and strag[0]["severity"] == "hang" and strag[0]["ranks"] == [BAD], _hangs(snap)
    assert "rank 1 is stuck in augment_batch" in strag[0]["summary"]
    assert not [f for f in snap["findings"] if f["signature"] == "rank-slow"]
    assert "STUCK" in snap["_verdict"] and "SLOW" not in snap["_verdict"]
    assert all(p["samples"]["count"] == 3 and "extended" not in p["samples"] for p in snap["processes"])
    rank1 = next(p for p in snap["processes"] if p["rank"] == BAD)
    main = next(t for t in rank1["threads"] if t["tid"] == rank1["pid"])
    assert main["progress"]["evidence"] == "never-woke", main["progress"]
    assert snap["_took"] < 20, snap["_took"]  # the window was not extended (the reads alone on a loaded machine)


def test_a_module_level_loop_that_counts_in_a_global_progresses(tmp_path):
    """The same line and C call in every sample, no fast locals: its global step counter moved."""
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "py_module_loop.py"), str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "py_module_loop.py did not start"
            time.sleep(0.05)
        time.sleep(0.3)
        out = tmp_path / "out.json"
        res = run_hanganalyze(["--pid", str(proc.pid), "--format", "json", "-o", str(out)], timeout=TIMEOUT)
        assert res.returncode in (0, 3), res.stderr.decode("utf-8", "replace")[-2000:]
        snap = json.loads(out.read_text())
    finally:
        proc.kill()
        proc.wait()
    main = next(t for t in snap["processes"][0]["threads"] if t["tid"] == proc.pid)
    assert main["progress"]["state"] == "progressing", main["progress"]
    assert main["progress"]["evidence"] == "python-locals" and main["progress"]["changed"][0] == \
        "Python locals changed in <module>", main["progress"]
