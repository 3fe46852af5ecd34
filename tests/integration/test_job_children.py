"""Each rank's children are part of the rank (issue 31), on a real 2-rank gloo job (torchrun, CPU)
whose ranks read their batches through a DataLoader with a worker process
(tests/fixtures/torch_loader_job.py).

- ``worker-hang``: rank 1's worker blocks forever in ``decode_sample``; rank 1's main thread waits
  for the batch (``_get_data`` -> ``queue.get`` -> ``select``), rank 0 waits in ``all_reduce``.
  ``--job`` names rank 1, at the user's line that asked for the batch, and shows the worker's frame;
  the workers (they inherit RANK) are captured under their rank, never counted as ranks, and no
  "came in more than once" warning is given.
- ``healthy`` (the near miss): the workers keep decoding, every step completes: no hang finding,
  though the workers are captured the same way.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from helpers import REPO, run_hanganalyze
from jobs import Job, _launch, _venv_bin, _wait_stuck, wait_rank_pids

SCRIPT = REPO / "tests" / "fixtures" / "torch_loader_job.py"
SERIOUS = ("crash", "deadlock", "hang", "error")


def _start(scenario: str, tmp_path: Path) -> Job:
    argv = [_venv_bin("torchrun"), "--standalone", "--nproc_per_node=2", str(SCRIPT), scenario, "1"]
    job = _launch("torch", argv, tmp_path / "ready", tmp_path / "launcher.log", {})
    job.scenario, job.world_size, job.bad_rank = scenario, 2, 1
    try:
        job.rank_pids = wait_rank_pids(job, 2, 120, "torchrun")
        if scenario == "worker-hang":
            names = ("rank0.pid", "rank1.pid", "worker1.pid")
            job.markers = _wait_stuck(job, lambda m: all(n in m for n in names),
                                      lambda m: [m[n] for n in names], lambda m: [], 120)
        else:
            time.sleep(1.0)  # a few dozen steps
    except BaseException:
        job.stop()
        raise
    return job


@pytest.fixture(scope="module")
def hang_job(tmp_path_factory) -> Iterator[Job]:
    job = _start("worker-hang", tmp_path_factory.mktemp("loader_hang"))
    try:
        yield job
    finally:
        job.stop()


def _analyze(job: Job, tmp_path: Path, fmt: str = "json") -> Dict:
    out = tmp_path / ("job." + fmt)
    res = run_hanganalyze(["--job", job.launcher_pid, "--format", fmt, "-o", out], timeout=300)
    err = res.stderr.decode("utf-8", "replace")
    assert err == "hanganalyze: wrote %s (%s)\n" % (out, fmt), err  # -o's one line, nothing else
    assert res.returncode in (0, 3), "exit %d" % res.returncode
    return {"rc": res.returncode, "text": out.read_text()}


def _children(proc: Dict) -> List[Dict]:
    return proc.get("children", [])


def test_worker_hang_names_the_rank_and_the_worker_frame(hang_job, tmp_path):
    got = _analyze(hang_job, tmp_path)
    snap = json.loads(got["text"])
    assert got["rc"] == 3
    # the ranks are the two rank processes; each one's DataLoader worker is under it, not beside it
    assert sorted((p["rank"], p["pid"]) for p in snap["processes"]) == sorted(
        (r, pid) for r, pid in hang_job.rank_pids.items())
    worker = hang_job.markers["worker1.pid"]
    by_rank = {p["rank"]: p for p in snap["processes"]}
    kids = _children(by_rank[1])
    assert [(c["pid"], c["role"], c["parent"]) for c in kids] == [(worker, "dataloader-worker", hang_job.rank_pids[1])]
    assert [c["role"] for c in _children(by_rank[0])] == ["dataloader-worker"]
    assert snap["job"]["ranks"] == "0-1" and snap["job"]["world_size"] == 2 and snap["job"]["processes"] == 2
    assert not [w for w in snap.get("warnings", []) if "more than once" in w], snap.get("warnings")
    # rank 1 is at fault, at the user's line, waiting for its worker, which is in decode_sample
    f = [x for x in snap["findings"] if x["signature"] == "collective-straggler"]
    assert f and f[0]["ranks"] == [1], [(x["signature"], x.get("ranks")) for x in snap["findings"]]
    assert re.search(r"rank 1 never reached it: it is in train \(torch_loader_job\.py:\d+\), waiting for "
                     r"DataLoader worker %d, which is in decode_sample \(torch_loader_job\.py:\d+\)" % worker,
                     f[0]["summary"]), f[0]["summary"]
    assert "selectors.py" not in f[0]["summary"]
    assert any("decode_sample" in e["text"] and e["rank"] == 1 for e in f[0]["evidence"]), f[0]["evidence"]
    state = {s["rank"]: s for s in snap["job"]["states"]}
    assert state[1]["state"] == "elsewhere" and state[1]["where"].startswith("train (")
    assert "decode_sample" in state[1]["waits_for"]
    assert state[0]["state"] == "collective" and state[0]["op"] == "all_reduce" and "waits_for" not in state[0]
    # the first screen says it too
    text = _analyze(hang_job, tmp_path, "text")["text"]
    verdict = next(line for line in text.splitlines() if line.startswith("VERDICT:"))
    assert re.match(r"VERDICT: rank 1 is in train \(torch_loader_job\.py:\d+\), waits for DataLoader worker %d, "
                    r"which is in decode_sample \(torch_loader_job\.py:\d+\)" % worker, verdict), verdict


def test_healthy_job_with_workers_gets_no_hang(tmp_path):
    job = _start("healthy", tmp_path)
    try:
        snap = json.loads(_analyze(job, tmp_path)["text"])
    finally:
        job.stop()
    serious = [(f["signature"], f["severity"]) for f in snap["findings"] if f["severity"] in SERIOUS]
    assert serious == [], serious
    assert sorted(p["rank"] for p in snap["processes"]) == [0, 1]
    assert all([c["role"] for c in _children(p)] == ["dataloader-worker"] for p in snap["processes"])
    assert not [w for w in snap.get("warnings", []) if "more than once" in w]
