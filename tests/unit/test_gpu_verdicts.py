"""The job verdicts on real 2-GPU and 4-GPU NCCL jobs, re-checked from the captured JSON (issue 21).

``scripts/gpu_verdicts.sh`` ran each scenario of ``tests/fixtures/gpu/nccl_job.py`` on a 2-GPU and a
4-GPU machine (PyTorch 2.11, NCCL 2.28.9) and ``hanganalyze --job`` five times in a row on it, with
the default three samples: ``tests/data/gpu_verdicts/`` (2 ranks) and
``tests/data/gpu_verdicts_4gpu/`` (4 ranks), ``<scenario>.run<N>.json`` (README.md there gives the
machine and the table). Here, with no GPU, each captured report is checked for the right answer, the
five runs for the same answer, and each JSON is analyzed again from the file (its threads'
``progress`` kept), which must give the same answer: so a change in the analysis that would turn a
right verdict wrong fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from helpers import REPO, run_hanganalyze

#: capture folder -> ranks in the job (rank 1 at fault where one is)
DATASETS = {"gpu_verdicts": 2, "gpu_verdicts_4gpu": 4, "gpu_verdicts_house": 2, "gpu_verdicts_onecard": 2,
            "gpu_verdicts_s32": 2}
FIVE = ("healthy", "killed", "mismatch", "seed", "straggler")
#: capture folder -> its scenarios (the 4-GPU set adds a straggler asleep in a checkpoint writer
#: after the step's collective, and a healthy loop whose host runs ahead of the device)
SCENARIOS = {"gpu_verdicts": FIVE, "gpu_verdicts_4gpu": FIVE + ("checkpoint", "healthy_async"),
             "gpu_verdicts_house": FIVE,
             # 2x H200 after issue 32's triage changes (waits from timeout lines, join-vs-lock, a lock
             # inside the driver): the rank that stops, the slow rank, the mismatch, the killed rank
             "gpu_verdicts_s32": ("healthy", "slow", "straggler", "mismatch", "killed"),
             # 2 ranks on one H100 (NCCL's socket transport), with live RAS and NVML: stopped, mismatch, seed;
             # DDP with uneven inputs on one H200
             "gpu_verdicts_onecard": ("mismatch", "seed", "straggler", "uneven")}
RUNS = 5
HANG = ("hang", "deadlock")


def _load(path: Path) -> Dict:
    return json.loads(path.read_text())


def _answer(snap: Dict) -> Tuple[Tuple[str, Tuple[int, ...]], ...]:
    """The verdict: every hang-class finding by signature and ranks (triage and info left out)."""
    return tuple(sorted((f["signature"], tuple(f.get("ranks") or ())) for f in snap["findings"]
                        if f["severity"] in HANG))


def _reanalyzed(path: Path, tmp_path: Path, extra: List[Path] = ()) -> Dict:
    out = tmp_path / ("re-" + path.name)
    res = run_hanganalyze([str(path)] + [str(p) for p in extra] + ["--format", "json", "-o", str(out)], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")[-2000:]
    return _load(out)


def _finding(snap: Dict, sig: str) -> Dict:
    found = [f for f in snap["findings"] if f["signature"] == sig]
    assert found, "no %s in %s" % (sig, [(f["signature"], f.get("ranks")) for f in snap["findings"]])
    return found[0]


def check_healthy(snap: Dict, nproc: int) -> None:
    assert not [f for f in snap["findings"] if f["severity"] in HANG], _answer(snap)
    mains = [t for p in snap["processes"] for t in p["threads"] if t.get("name") == "MainThread"]
    assert len(mains) == nproc and all(t["progress"]["state"] == "progressing" for t in mains), \
        [t.get("progress") for t in mains]


def check_straggler(snap: Dict, nproc: int) -> None:
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [1], f
    assert "load_next_batch" in f["summary"] and "stuck in load_next_batch" in f["summary"], f["summary"]
    assert not [x for x in snap["findings"] if x["signature"] in ("collective-mismatch", "collective-hang")]


def check_mismatch(snap: Dict, nproc: int) -> None:
    f = _finding(snap, "collective-mismatch")
    if nproc == 2:  # one rank each way: neither blamed alone
        assert f["ranks"] == [0, 1] and "no majority" in f["summary"], f
    else:  # three ranks in all_reduce, rank 1 in broadcast: the odd one out
        assert f["ranks"] == [1] and "no majority" not in f["summary"], f
    assert "train_step" in f["summary"] and "sync_params" in f["summary"], f["summary"]
    assert not [x for x in snap["findings"] if x["signature"] == "collective-straggler"]


def check_killed(snap: Dict, nproc: int) -> None:
    f = _finding(snap, "rank-missing")
    assert f["ranks"] == [1], f
    assert "rank 1 of %d is not among the processes of launcher" % nproc in f["summary"], f["summary"]
    assert [p["rank"] for p in snap["processes"]] == [r for r in range(nproc) if r != 1]


def check_checkpoint(snap: Dict, nproc: int) -> None:
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [1], f
    assert "stuck in save_checkpoint" in f["summary"] and "train_step" in f["summary"], f["summary"]
    assert not [x for x in snap["findings"] if x["signature"] in ("collective-mismatch", "collective-hang")]
    blamed = {r for x in snap["findings"] if x["severity"] in HANG and x["signature"] != "collective-peer-wait"
              for r in x.get("ranks") or ()}
    assert blamed == {1}, blamed  # the waiters, caught at their own line, are never accused


def check_seed(snap: Dict, nproc: int) -> None:
    f = _finding(snap, "nccl-destroy-with-live-cuda-graph")
    assert f["ranks"] == list(range(nproc)), f


def check_uneven(snap: Dict, nproc: int) -> None:
    """DDP, rank 1 out of batches in ``barrier`` (evaluate), rank 0 in the device sync after its
    gradient sync: the two calls differ, so both sides are named (no majority with two ranks); never
    "every rank waits in the same collective"."""
    f = _finding(snap, "collective-mismatch")
    assert f["ranks"] == [0, 1] and "no majority" in f["summary"], f
    assert "ddp_uneven_loop" in f["summary"] and "barrier called from evaluate" in f["summary"], f["summary"]
    assert "uneven inputs" in f["cause"]
    assert not [x for x in snap["findings"] if x["signature"] in ("collective-hang", "collective-straggler")]


def check_slow(snap: Dict, nproc: int) -> None:
    """Rank 1 sleeps 0.4 s a step, every step completes: the slow rank named from NCCL RAS's
    counters over time, never a hang."""
    assert not [f for f in snap["findings"] if f["severity"] in HANG], _answer(snap)
    f = _finding(snap, "nccl-ras-slow-rank")
    assert f["ranks"] == [1], f


CHECKS = {"healthy": check_healthy, "slow": check_slow, "uneven": check_uneven, "straggler": check_straggler,
          "mismatch": check_mismatch, "killed": check_killed, "seed": check_seed, "checkpoint": check_checkpoint,
          "healthy_async": check_healthy}


CASES = [(folder, sc) for folder in sorted(DATASETS) for sc in SCENARIOS[folder]]


@pytest.mark.parametrize("folder,scenario", CASES, ids=["%s-%s" % c for c in CASES])
def test_five_runs_same_right_answer(folder, scenario, tmp_path):
    data, nproc = REPO / "tests" / "data" / folder, DATASETS[folder]
    runs = sorted(data.glob("%s.run*.json" % scenario), key=lambda p: int(p.stem.rsplit("run", 1)[1]))
    assert len(runs) >= RUNS, runs
    snaps = [_load(p) for p in runs]
    for snap in snaps:
        CHECKS[scenario](snap, nproc)
    assert len({_answer(s) for s in snaps}) == 1, [_answer(s) for s in snaps]
    again = _reanalyzed(runs[0], tmp_path)
    CHECKS[scenario](again, nproc)
    assert _answer(again) == _answer(snaps[0])
    if scenario.startswith("healthy"):  # it passes through a device sync every step: no finding of that instant
        # (NCCL RAS's counters moving between its queries is evidence over time, not of that instant)
        assert not [f for f in again["findings"] if f["severity"] == "info"
                    and f["signature"] != "nccl-ras-progressing"], again["findings"]


JOINS = [(folder, sc) for folder in sorted(DATASETS) for sc in ("mismatch", "straggler")]


@pytest.mark.parametrize("folder,scenario", JOINS, ids=["%s-%s" % c for c in JOINS])
def test_stacks_dumps_and_log_of_one_job_join_by_rank(folder, scenario, tmp_path):
    """The first run's stacks, every rank's flight-recorder dump and the torchrun log: one process
    per rank (the log's lines that name no rank stay apart, never blamed), every rank's sources
    named, and the same verdict as the stacks alone."""
    data, nproc = REPO / "tests" / "data" / folder, DATASETS[folder]
    extra = [data / ("%s.fr.rank_%d" % (scenario, r)) for r in range(nproc)] + [data / ("%s.torchrun.log" % scenario)]
    snap = _reanalyzed(data / ("%s.run1.json" % scenario), tmp_path, extra)
    ranked = [p for p in snap["processes"] if p.get("rank") is not None]
    assert sorted(p["rank"] for p in ranked) == list(range(nproc)), \
        [(p.get("rank"), p.get("sources")) for p in snap["processes"]]
    for p in ranked:
        assert p["sources"] == ["stacks", "flight-recorder", "log"], p["sources"]
    CHECKS[scenario](snap, nproc)
    assert _answer(_load(data / ("%s.all-sources.json" % scenario))) == _answer(snap)
