"""DDP with uneven inputs (issue 31's DDP-uneven case), from a real 2-rank gloo job on CPU
(tests/fixtures/gpu/nccl_job.py ``uneven`` with HANG_BACKEND=gloo, ``hanganalyze --job`` JSON, 3 samples):
rank 0 still syncs its gradients at the end of ``backward`` (``c10d::Reducer::finalize_backward``),
rank 1 ran out of batches and waits in ``barrier`` called from ``evaluate``.  Before, the Reducer's wait
was not a collective wait: rank 0 was "in a collective" (gloo's thread) with no op and no call site,
compatible with anything, and the job got ``collective-hang`` ("every rank waits in the same
collective"), which the stacks do not show."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

from hanganalyze.analyze.rankstate import rank_state
from hanganalyze.pipeline import analyze, load_signature_db
from hanganalyze_gdbext.model import Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "progress_jobs" / "ddp_uneven_gloo.json.gz"


def _snapshot() -> Snapshot:
    with gzip.open(DATA, "rt") as f:
        return Snapshot.from_dict(json.load(f))


def _reanalyzed(snap: Snapshot) -> Snapshot:
    snap.findings = []
    snap.job = None
    return analyze(snap, load_signature_db())


def test_the_reducer_wait_is_ddp_gradient_allreduce_at_the_users_backward():
    snap = _snapshot()
    s0 = rank_state(0, snap.processes[0])
    assert (s0.state, s0.op) == ("collective", "allreduce")
    assert "Reducer::finalize_backward" in (s0.where or "")
    assert s0.call_site == "ddp_uneven_loop (nccl_job.py:255)"  # the loss.backward() line, not torch's frames
    s1 = rank_state(1, snap.processes[1])
    assert (s1.state, s1.op, s1.call_site) == ("collective", "barrier", "evaluate (nccl_job.py:237)")


def test_uneven_inputs_is_a_mismatch_naming_both_sides_with_the_ddp_cause():
    out = _reanalyzed(_snapshot())
    ids = [f.signature for f in out.findings]
    assert "collective-mismatch" in ids and "collective-hang" not in ids
    f = next(f for f in out.findings if f.signature == "collective-mismatch")
    assert f.ranks == [0, 1]  # two ranks, no majority: both sides named
    assert "allreduce called from ddp_uneven_loop" in f.summary and "barrier called from evaluate" in f.summary
    assert "uneven inputs" in f.cause and any("model.join()" in x for x in f.fix)


def test_near_miss_both_ranks_in_the_ddp_gradient_sync_is_no_mismatch():
    """Both ranks at the same backward (a slow or dead network under DDP): the same collective."""
    snap = _snapshot()
    snap.processes[1].threads = copy.deepcopy(snap.processes[0].threads)
    for p in snap.processes:
        p.samples = None
        for t in p.threads:
            t.progress = None
    out = _reanalyzed(snap)
    ids = [f.signature for f in out.findings]
    assert "collective-mismatch" not in ids
    assert "collective-hang" in ids
