"""The slow-rank verdict (``rank-slow``, analyze/crossrank.py) on real captures: 3-rank gloo jobs
on CPU whose training loop runs at module level (tests/fixtures/torch_module_loop_job.py), read by
``hanganalyze --job`` with the sampling of issue 31 and kept in tests/data/progress_jobs/:

* ``slow``: rank 1 blocks ~0.4 s in ``augment_batch`` every step, the others wait in all_reduce:
  named slow (a warning), no hang finding; main called it "STUCK", collective-straggler (hang);
* ``healthy``: no hang finding, nobody named slow;
* ``stopped``: rank 1 sleeps for ever: still STUCK (collective-straggler, hang), never "slow".

And the evidence made ambiguous by hand: no slow claim where a waiting rank or the named rank did
not move."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import List

import pytest

from hanganalyze import pipeline
from hanganalyze.cli import verdict_exit_code
from hanganalyze.render.jobview import verdict
from hanganalyze_gdbext.model import Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "progress_jobs"
HANGS = ("hang", "deadlock")


def _snapshot(name: str) -> Snapshot:
    with gzip.open(DATA / ("gloo3-module-loop-%s.json.gz" % name), "rt", encoding="utf-8") as f:
        snap = Snapshot.from_dict(json.load(f))
    snap.findings, snap.warnings, snap.job = [], [], None
    return snap


def _sigs(snap: Snapshot) -> List[str]:
    return [f.signature for f in snap.findings]


# slow5-1..5: five --job runs in a row on one slow job (issue 31: named slow, no hang, 5 of 5)
@pytest.mark.parametrize("name", ["slow-0", "slow-1"] + ["slow5-%d" % i for i in range(1, 6)])
def test_a_rank_slowed_in_a_module_level_loop_is_named_slow(db, name):
    snap = pipeline.analyze(_snapshot(name), db)
    assert not [f for f in snap.findings if f.severity in HANGS], _sigs(snap)
    slow = snap.findings[0]
    assert slow.signature == "rank-slow" and slow.severity == "warning" and slow.ranks == [1], _sigs(snap)
    assert "collective-straggler" not in _sigs(snap)
    assert "rank 1 was outside the collective, in augment_batch (torch_module_loop_job.py:38)" in slow.summary
    assert "the job progresses: ranks 0,2 in all_reduce" in slow.summary and "slow, not stuck" in slow.summary
    line = verdict(snap, snap.job)
    assert line.startswith("rank 1 is in augment_batch") and "SLOW, not stuck" in line and "STUCK" not in line
    assert line.endswith("[rank-slow]"), line
    assert verdict_exit_code(snap) == 0  # the CLI's one rule: a warning is no hang


def test_a_healthy_job_gets_no_hang_and_no_slow_rank(db):
    snap = pipeline.analyze(_snapshot("healthy-0"), db)
    assert not [f for f in snap.findings if f.severity in HANGS or f.signature == "rank-slow"], _sigs(snap)


def test_a_stopped_rank_is_still_stuck(db):
    snap = pipeline.analyze(_snapshot("stopped-0"), db)
    strag = snap.findings[0]
    assert strag.signature == "collective-straggler" and strag.severity == "hang" and strag.ranks == [1]
    assert "rank 1 is stuck in augment_batch" in strag.summary and "rank-slow" not in _sigs(snap)
    progress = {p.rank: p for p in snap.job.progress}
    assert progress[1].state == "stuck"
    main = next(t for t in snap.processes[1].threads if t.tid == snap.processes[1].pid)
    assert main.progress.evidence == "never-woke" and main.progress.own_wakeups == 0
    assert all(p.samples.extended is None for p in snap.processes)  # never woke: no extension
    assert "STUCK" in verdict(snap, snap.job) and "slow" not in verdict(snap, snap.job).lower()


def _main(snap: Snapshot, rank: int):
    proc = next(p for p in snap.processes if p.rank == rank)
    return next(t for t in proc.threads if t.tid == proc.pid)


@pytest.mark.parametrize("rank", [0, 1])
def test_no_slow_claim_on_ambiguous_evidence(db, rank):
    """A waiting rank (0) or the slow rank (1) that did not move: no slow claim; the wait stays a
    straggler (a hang held over the samples)."""
    snap = _snapshot("slow-0")
    p = _main(snap, rank).progress
    p.state, p.evidence, p.own_wakeups, p.changed = "stuck", "same-place", 1, []
    snap = pipeline.analyze(snap, db)
    assert "rank-slow" not in _sigs(snap), _sigs(snap)


def test_the_evidence_that_decided_is_kept():
    snap = _snapshot("slow-0")
    slow, waiter = _main(snap, 1).progress, _main(snap, 0).progress
    assert slow.state == "progressing" and slow.own_wakeups >= 2 and slow.place_samples == slow.samples
    assert waiter.state == "progressing" and waiter.evidence in ("woke", "python-locals", "frames")
    assert snap.processes[0].samples.seed is not None
