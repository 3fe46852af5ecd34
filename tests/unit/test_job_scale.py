"""A 4,096-rank job built from the real stacks of a 2-rank NCCL straggler (tests/data/job): the
diagnosis names the one straggler, and every report stays readable (Markdown fits a GitHub issue,
large jobs show one process per rank class).  Speed is measured in bench/bench_job.py, not here."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.render import render
from hanganalyze_gdbext.model import DistIdentity, Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "job"
RANKS = 4096
STRAGGLER = 1234


@pytest.fixture(scope="module")
def big_job():
    procs = {r: parse_text((DATA / ("fstrag.rank%d.pyspy.txt" % r)).read_text()).processes[0] for r in (0, 1)}
    snap = Snapshot()
    for rank in range(RANKS):
        p = copy.deepcopy(procs[1 if rank == STRAGGLER else 0])
        p.rank, p.pid = rank, 10000 + rank
        p.label = None
        p.dist = DistIdentity(world_size=RANKS, from_="test")
        for t in p.threads:
            t.tid = p.pid
        snap.processes.append(p)
    return pipeline.analyze(snap, pipeline.load_signature_db())


def test_the_straggler_among_4096_ranks(big_job):
    f = big_job.findings[0]
    assert f.signature == "collective-straggler" and f.ranks == [STRAGGLER]
    assert f.summary.startswith("ranks 0-1233,1235-4095 wait in the device sync after a collective called from "
                                "train_step (fr_strag.py:9); rank 1234 never reached it: it is in load_next_batch")
    assert big_job.job.world_size == RANKS and big_job.job.missing == ""
    assert [(c.ranks, c.size) for c in big_job.job.classes] == [("0-1233,1235-4095", 4095), ("1234", 1)]
    peer = [x for x in big_job.findings if x.signature == "collective-peer-wait"]
    assert len(peer) == 1 and len(peer[0].ranks) == RANKS - 1  # one finding for 4,095 ranks, not 4,095


def test_reports_of_4096_ranks_stay_small(big_job):
    md = render(big_job, "md")
    assert len(md) < 65000 and "collective-straggler" in md and "1234" in md
    assert "Merged call tree" in md and "0-1233,1235-4095" in md
    text = render(big_job, "text")
    assert "RANK CLASSES" in text and text.count("THREADS of ") == 2  # one process shown per class
    html = render(big_job, "html")
    assert html.count('class="calltree"') >= 1 and len(html) < 5 * 1024 * 1024
    data = json.loads(render(big_job, "json"))
    assert len(data["processes"]) == RANKS  # JSON keeps every rank
