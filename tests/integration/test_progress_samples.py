"""Stuck or slow, from repeated samples of real processes (issue 21 item 1).

One snapshot cannot tell a hung thread from a busy one; three samples over a second can.  A real
Python program with a thread stuck on a lock, one moving through short sleeps and one spinning on
one line; a real 3-rank gloo job that trains (no hang finding), one whose slow rank keeps moving
(a straggler, "slow, not stuck") and one whose rank really stalls (still "stuck").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
from helpers import FIXTURES, run_hanganalyze
from jobs import _launch, _markers, _venv_bin, start_torch_job

TIMEOUT = 300


def _json(args: List, tmp_path: Path, rc=(0, 3, 5, 6)) -> Dict:
    out = tmp_path / "out.json"
    t0 = time.monotonic()
    res = run_hanganalyze([str(a) for a in args] + ["--format", "json", "-o", str(out)], timeout=TIMEOUT)
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode in rc, "exit %d: %s" % (res.returncode, err[-2000:])
    snap = json.loads(out.read_text())
    snap["_took"] = time.monotonic() - t0
    snap["_rc"] = res.returncode
    return snap


@pytest.fixture
def three_threads(tmp_path):
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "py_progress.py"), str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "py_progress.py did not start"
            time.sleep(0.05)
        time.sleep(0.3)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _by_name(snap: Dict) -> Dict[str, Dict]:
    return {t["name"]: t for t in snap["processes"][0]["threads"]}


def test_stuck_progressing_spinning_threads(three_threads, tmp_path):
    snap = _json(["--pid", three_threads], tmp_path)
    proc = snap["processes"][0]
    # three samples: two intervals of 0.5 s, each jittered by up to 40 % (acquire/sampling.py): 0.6-1.4 s
    assert proc["samples"]["count"] == 3 and 0.55 <= proc["samples"]["window_s"] <= 3.0, proc["samples"]
    threads = _by_name(snap)
    assert threads["stuck"]["progress"]["state"] == "stuck", threads["stuck"]["progress"]
    assert threads["MainThread"]["progress"]["state"] == "stuck"
    mover = threads["mover"]["progress"]
    assert mover["state"] == "progressing", mover
    assert mover["samples"] == 3 and mover["changed"], mover
    spinner = threads["spinner"]["progress"]
    assert spinner["state"] == "spinning", spinner
    assert spinner["cpu_s"] > 0.05, spinner
    # the same line and C call in every sample, but its step counter moved: it ran, it is not stuck
    cruncher = threads["cruncher"]["progress"]
    assert cruncher["state"] == "progressing", cruncher
    assert any(c.startswith("Python locals changed in crunch") for c in cruncher["changed"]), cruncher
    assert all("py_activity" not in t for t in snap["processes"][0]["threads"])  # never written
    assert all(t["progress"]["cpu_s"] < 0.1 for t in (threads["stuck"], threads["MainThread"]))


def test_one_sample_is_todays_snapshot(three_threads, tmp_path):
    snap = _json(["--pid", three_threads, "--samples", "1"], tmp_path)
    proc = snap["processes"][0]
    assert "samples" not in proc
    assert all("progress" not in t for t in proc["threads"])


def test_text_report_shows_progress(three_threads):
    res = run_hanganalyze(["--pid", str(three_threads), "--samples", "2", "--interval", "0.3"], timeout=TIMEOUT)
    out = res.stdout.decode("utf-8", "replace")
    assert "progress: stuck over" in out and "progress: progressing over" in out, out[-3000:]


def _start_progress_job(scenario: str, tmp_path: Path, nproc: int = 3, slow_rank: int = 1):
    argv = [_venv_bin("torchrun"), "--standalone", "--nproc_per_node=%d" % nproc,
            str(FIXTURES / "torch_progress_job.py"), scenario, str(slow_rank)]
    job = _launch("torch", argv, tmp_path / "ready", tmp_path / "launcher.log", {})
    job.scenario, job.world_size, job.bad_rank = scenario, nproc, slow_rank
    deadline = time.monotonic() + 180
    while True:
        m = _markers(job.ready_dir)
        if all("rank%d.pid" % r in m for r in range(nproc)):
            break
        if time.monotonic() > deadline or job.proc.poll() is not None:
            job.stop()
            raise RuntimeError("job %s did not start:\n%s" % (scenario, job.log_tail()))
        time.sleep(0.2)
    job.rank_pids = {r: m["rank%d.pid" % r] for r in range(nproc)}
    time.sleep(0.5)
    return job


def _hangs(snap: Dict) -> List[Dict]:
    return [f for f in snap["findings"] if f["severity"] in ("hang", "deadlock")]


@pytest.mark.skipif(not os.path.exists(_venv_bin("torchrun")) and "torchrun" not in os.environ.get("PATH", ""),
                    reason="torchrun missing")
def test_healthy_gloo_job_gets_no_hang_finding(tmp_path):
    job = _start_progress_job("healthy", tmp_path)
    with job:
        snap = _json(["--job", job.launcher_pid], tmp_path)
        single = _json(["--job", job.launcher_pid, "--samples", "1"], tmp_path)
    print("3 samples: %.2f s, 1 sample: %.2f s" % (snap["_took"], single["_took"]))
    assert _hangs(snap) == [], [(f["signature"], f["summary"]) for f in snap["findings"]]
    assert snap["_rc"] == 0
    facts = snap["job"]["progress"]
    assert len(facts) == 3 and all(f["state"] == "progressing" for f in facts), facts


def test_slow_rank_that_moves_is_not_called_stuck(tmp_path):
    job = _start_progress_job("slow", tmp_path, slow_rank=1)
    with job:
        snap = _json(["--job", job.launcher_pid], tmp_path)
    strag = [f for f in snap["findings"] if f["signature"] == "collective-straggler"]
    assert strag, [(f["signature"], f["summary"]) for f in snap["findings"]]
    assert strag[0]["ranks"] == [1]
    assert "rank 1 is slow, not stuck: moving through" in strag[0]["summary"], strag[0]["summary"]
    assert "stuck in" not in strag[0]["summary"]
    assert strag[0]["severity"] == "info"


def test_real_straggler_is_still_stuck(tmp_path):
    job = start_torch_job("straggler", tmp_path, nproc=3, bad_rank=2)
    with job:
        snap = _json(["--job", job.launcher_pid], tmp_path, rc=(3,))
    strag = [f for f in snap["findings"] if f["signature"] == "collective-straggler"]
    assert strag and strag[0]["severity"] == "hang", [(f["signature"], f["summary"]) for f in snap["findings"]]
    assert strag[0]["ranks"] == [2]
    assert "rank 2 is stuck in load_next_batch" in strag[0]["summary"], strag[0]["summary"]
    assert "held for" in strag[0]["summary"] and "over 3 samples" in strag[0]["summary"]
