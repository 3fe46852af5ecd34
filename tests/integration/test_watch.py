"""``hanganalyze watch`` on real gloo jobs (torchrun, CPU, 2 ranks): a job that trains then hangs is
captured (wrapper mode, ``--then kill``), a slow healthy job is left alone and its output passed
through, and a running hung job is captured with ``--job`` and left running, its node summary
merging as any other.  One job per scenario, module-scoped; short ``--stall`` so the suite stays short.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator

import pytest
from helpers import FIXTURES, REPO, run_hanganalyze
from jobs import TAG_VAR, start_torch_job, tagged_pids

pytest.importorskip("torch")

STALL = 3.0
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def _watch(tmp: Path, argv, timeout: float = 180.0) -> Dict[str, object]:
    """``hanganalyze watch ARGV`` with the tests' job environment; its result, the job's tag and times."""
    tag = uuid.uuid4().hex
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", HANG_READY_DIR=str(tmp / "ready"),
               HANG_DIE_WITH_PARENT="1", **{TAG_VAR: tag})
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    (tmp / "ready").mkdir()
    t0 = time.time()
    try:
        res = subprocess.run([sys.executable, "-m", "hanganalyze", "watch"] + [str(a) for a in argv], env=env,
                             cwd=str(REPO), capture_output=True, timeout=timeout)
    finally:
        left = tagged_pids(tag)
        for pid in left:  # a failed test must not leave a job behind
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    return {"res": res, "left": left, "t0": t0, "t1": time.time()}


@pytest.fixture(scope="module")
def hung_run(tmp_path_factory) -> Dict[str, object]:
    tmp = tmp_path_factory.mktemp("watch_hang")
    run = _watch(tmp, ["--stall", STALL, "--poll", "0.5", "--then", "kill", "-o", tmp / "report.md", "--",
                       TORCHRUN, "--standalone", "--nproc_per_node=2", FIXTURES / "torch_job.py", "straggler", "1"])
    run["tmp"] = tmp
    return run


def test_hang_captured_named_and_killed(hung_run) -> None:
    res, tmp = hung_run["res"], hung_run["tmp"]
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 3, err[-3000:]
    assert "hanganalyze: watch: hang captured" in err
    report = (tmp / "report.md").read_text()
    assert "rank 1 is in load_next_batch" in report
    doc = json.loads((tmp / "report.json").read_text())
    assert doc["warnings"][0].startswith("hanganalyze watch: hang detected")
    # read live, both ranks: the capture was taken before the kill
    assert sorted(p["rank"] for p in doc["processes"]) == [0, 1]
    assert all(p["source"] == "live" for p in doc["processes"])
    assert any(f["signature"] == "collective-straggler" for f in doc["findings"])
    assert hung_run["left"] == []  # --then kill: nothing of the job is left
    assert "rank 0 step 1" in res.stdout.decode(errors="replace")  # the steps before the hang, passed through
    # latency: from the straggler's marker (the hang starts) to the report, within the stall + 10 s
    latency = (tmp / "report.md").stat().st_mtime - (tmp / "ready" / "rank1.pid").stat().st_mtime
    print("watch latency %.1f s (stall %.0f s)" % (latency, STALL))
    assert 0 < latency <= STALL + 10


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory) -> Dict[str, object]:
    tmp = tmp_path_factory.mktemp("watch_slow")
    run = _watch(tmp, ["--stall", "2", "--poll", "0.5", "-o", tmp / "report.html", "--",
                       TORCHRUN, "--standalone", "--nproc_per_node=2", FIXTURES / "torch_steps_job.py", "6", "1"])
    run["tmp"] = tmp
    return run


def test_slow_healthy_job_left_alone(slow_run) -> None:
    """Rank 1 sleeps 0.4 s a step for 6 s, three times the 2 s stall: never captured, exit 0."""
    res, tmp = slow_run["res"], slow_run["tmp"]
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 0, err[-3000:]
    assert "hang captured" not in err
    assert sorted(p.name for p in tmp.iterdir()) == ["ready"]  # no report, no JSON, no tail
    # the ranks share torchrun's stdout and their unbuffered prints interleave there (as in a
    # terminal): each rank's steps are checked in order, not whole lines
    out = res.stdout.decode(errors="replace")
    for rank in (0, 1):
        steps = [int(s) for s in re.findall(r"rank %d step (\d+)" % rank, out)]
        assert len(steps) >= 8 and steps == list(range(len(steps))), (rank, out[-2000:])


@pytest.fixture(scope="module")
def running_hung_job(tmp_path_factory) -> Iterator[object]:
    job = start_torch_job("straggler", tmp_path_factory.mktemp("watch_job"), nproc=2, bad_rank=1)
    try:
        yield job
    finally:
        job.stop()


def test_watch_job_pid_captures_and_keeps(running_hung_job, tmp_path: Path) -> None:
    job = running_hung_job
    res = run_hanganalyze(["watch", "--job", job.launcher_pid, "--stall", "2", "--poll", "0.5",
                           "-o", tmp_path / "r.json", "--node-summary", tmp_path / "n.node.json"], timeout=120)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 3, err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert any(f["signature"] == "collective-straggler" and f.get("ranks") == [1] for f in doc["findings"]), \
        [(f["signature"], f.get("ranks")) for f in doc["findings"]]
    assert sorted(job.live_rank_pids) == [0, 1]  # --then keep: the job runs on
    merged = run_hanganalyze([tmp_path / "n.node.json", "--format", "json"], timeout=120)
    assert merged.returncode == 3, merged.stderr
    mdoc = json.loads(merged.stdout)
    assert any(f["signature"] == "collective-straggler" and f.get("ranks") == [1] for f in mdoc["findings"]), \
        [(f["signature"], f.get("ranks")) for f in mdoc["findings"]]
