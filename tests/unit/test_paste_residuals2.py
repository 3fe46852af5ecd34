"""The paste sweep's residuals after rounds 13-16 (``scripts/paste_sweep.py``), each fixed by a rule
for the mangling: a real corpus text under the mangling that changed its answer, and a near miss the
rule must leave alone (a line that only looks like the mangling's)."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import REPO, real_text

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.unwrap import unwrap_layers

_spec = importlib.util.spec_from_file_location("paste_sweep", REPO / "scripts" / "paste_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def db():
    return pipeline.load_signature_db()


def _frames(text: str):
    return [[(f.function, f.file, f.line) for f in t.frames] for p in parse_text(text).processes for t in p.threads]


# ---- a stack printer's " : " margin under another wrapper (kafka-python-2077) -----------------------

KAFKA = "kafka-python/kafka-python-2077-1.txt"


@pytest.mark.parametrize("name", ["quote", "backticks", "timestamp", "srun", "compose", "lineno_bar",
                                  "rank0+timestamp", "wrap80", "ray+wrap120"])
def test_a_margin_under_another_wrapper_is_taken_off_too(db, name):
    """The margin every line carries is one of the unwrap layers, not only a cleaning step on the
    lines as they came: under a quote, a timestamp, a collector's tag or backticks the dump is read
    (refused before), the same frames, the heartbeat thread's wait on the client lock."""
    text = real_text(KAFKA)
    mangled = sweep.MANGLINGS[name](text)
    assert _frames(mangled) == _frames(text)
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == "lock"


def test_a_colon_some_lines_start_with_under_a_timestamp_stays():
    """Near miss: under a log's timestamps a few messages start with ``: `` (a YAML dump, a shell's
    no-op): no column every line carries, so no layer takes their colon off."""
    lines = ["2025-01-03 12:00:0%d,000 %s" % (i, x) for i, x in
             enumerate([": retry 1", "connecting to broker", ": retry 2", "giving up", "closed"])]
    layers = unwrap_layers(lines)
    assert layers and all(": retry 1" in [x.strip() for x in bare] for bare, _ in layers)


# ---- ray stack's workers under one launcher tag (ray-3417) ------------------------------------------

RAY = "ray/ray-3417-1.txt"


@pytest.mark.parametrize("name", ["rank0", "default0", "mpirun", "rank0+timestamp", "rank0+wrap80"])
def test_two_dumps_under_one_rank_tag_stay_two_processes(db, name):
    """``[rank0]:`` on every line puts both ``ray stack`` workers (pids 2787, 2788) under rank 0:
    two stacks of one input under two pids are two processes, not one rank's sources to join, so
    the idle worker's answer (``runs``) is kept beside the redis reader's (``io``)."""
    text = real_text(RAY)
    clean = sweep.analyze_text(text, ".txt", None, db)
    got = sweep.analyze_text(sweep.MANGLINGS[name](text), ".txt", None, db)
    assert clean["waits"] == ["io", "runs"]
    assert got["waits"] == clean["waits"] and got["wait"] == clean["wait"]


def _proc(pid, path, rank=0):
    from hanganalyze_gdbext.model import Frame, Process, Thread

    p = Process(pid=pid, source="text", threads=[Thread(tid=1, frames=[Frame(function="f", kind="python")])])
    p.rank, p.input_file = rank, path
    return p


def test_a_ranks_stacks_from_two_inputs_or_one_pid_are_still_joined():
    """Near miss: a rank's stacks read twice (two texts, a container's pid and the host's; one text
    with the pid twice) are one rank's sources, joined as before."""
    from hanganalyze.analyze.rankjoin import join_sources
    from hanganalyze_gdbext.model import Snapshot

    for procs in ([_proc(10, "/a.txt"), _proc(11, "/b.txt")], [_proc(10, "/a.txt"), _proc(10, "/a.txt")]):
        snap = Snapshot(processes=procs)
        join_sources(snap)
        assert len(snap.processes) == 1
    snap = Snapshot(processes=[_proc(10, "/a.txt"), _proc(11, "/a.txt")])
    join_sources(snap)
    assert [p.pid for p in snap.processes] == [10, 11]


# ---- a collector's tagged lines cut by a narrow terminal (ibpythonic-1, porcupine-379) ---------------


@pytest.mark.parametrize("path,name", [("ibpythonic/ibpythonic-1-1.txt", "rank0+wrap80"),
                                       ("porcupine/porcupine-379-1.txt", "srun+wrap80")])
def test_a_tagged_line_exactly_the_width_is_no_cut_when_the_pieces_lack_the_tag(db, path, name):
    """The terminal cut lines srun / torchrun had tagged, so its pieces carry no tag; a tagged
    ``File`` line exactly 80 wide is followed by the tagged source line, which is the collector's
    next line, not the cut's rest: the frame's function stays ``_shutdown`` / ``_wait_for_tstate_lock``
    and the exit's join on a non-daemon thread is recognised."""
    text = real_text(path)
    mangled = sweep.MANGLINGS[name](text)
    assert any(len(x) == 80 and x.rstrip().endswith(("_shutdown", "_tstate_lock")) for x in mangled.split("\n"))
    assert _frames(mangled) == _frames(text)
    assert "python-shutdown-nondaemon-threads" in sweep.analyze_text(mangled, ".txt", None, db)["sigs"]


def test_pieces_tagged_one_by_one_are_still_joined():
    """Near miss: output cut at 80 and then tagged (every piece carries ``0: ``): a full tagged line
    and the next tagged piece are one line again."""
    from hanganalyze.acquire.text.common import clean_and_join

    text = real_text("ibpythonic/ibpythonic-1-1.txt")
    lines = clean_and_join(sweep.MANGLINGS["wrap80+rank0"](text))
    assert ("[rank0]:   File \"/opt/conda/lib/python3.6/threading.py\", line 1072, in _wait_for_tstate_lock"
            in lines)
    assert _frames(sweep.MANGLINGS["wrap80+rank0"](text)) == _frames(text)
