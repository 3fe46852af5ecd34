"""The paste sweep's residuals after rounds 13-16 (``scripts/paste_sweep.py``), each fixed by a rule
for the mangling: a real corpus text under the mangling that changed its answer, and a near miss the
rule must leave alone (a line that only looks like the mangling's)."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import REPO, real_text

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.unwrap import unwrap_layers

_spec = importlib.util.spec_from_file_location("paste_sweep", REPO / "scripts" / "paste_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)  # type: ignore[union-attr]


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


# ---- manglings added after round 16: chats, Jira, journald, docker, Windows, Jupyter -----------------


@pytest.mark.parametrize("path,name", [("jupyter/vscode-jupyter-17105-1.txt", "jupyter_ansi"),
                                       ("threadpoolctl/threadpoolctl-239-1.txt", "jupyter_ansi"),
                                       ("openblas/openblas-1456-1.txt", "jupyter_ansi")])
def test_colour_codes_without_their_esc_byte_go(db, path, name):
    """A Jupyter traceback copied from a rendered page keeps its colours as ``[0;31m`` text (the ESC
    byte gone): refused before (no line started as its format's); the same frames and answer now."""
    text = real_text(path)
    mangled = sweep.MANGLINGS[name](text)
    assert "[0;32m" in mangled and "\x1b" not in mangled
    assert _frames(mangled) == _frames(text)
    clean, got = sweep.analyze_text(text, ".txt", None, db), sweep.analyze_text(mangled, ".txt", None, db)
    assert got["wait"] == clean["wait"] and got["sigs"] == clean["sigs"]


def test_a_bracketed_duration_without_a_reset_stays():
    """Near miss: ``[10m]`` (ten minutes) in a log with one ``[0m`` at most is no colour code."""
    from hanganalyze.acquire.text.common import clean_lines

    assert clean_lines("waited [10m] for rank 3\nretry [0m] left") == ["waited [10m] for rank 3", "retry [0m] left"]
    assert clean_lines("\u2190[0;31mwaited[0m 10m\n[1mdone[0m") == ["waited 10m", "done"]  # Windows' ESC too


@pytest.mark.parametrize("path", ["openblas/openblas-1456-1.txt", "threadpoolctl/threadpoolctl-239-1.txt",
                                  "kafka-python/kafka-python-2077-1.txt"])
def test_a_chat_fence_glued_to_the_last_line_goes(db, path):
    """Slack / Discord: the block opened with ```` ```python ```` on its own line and closed by a fence
    glued to the last line (``...clone.S:109````` ````): the last line is the dump's again (a gdb
    thread header, each line in backticks: the last one was no longer in a pair), the same answer."""
    text = real_text(path)
    mangled = sweep.MANGLINGS["chat_fence"](text)
    assert mangled.rstrip().endswith("```") and not mangled.rstrip().endswith("\n```")
    assert _frames(mangled) == _frames(text)
    clean, got = sweep.analyze_text(text, ".txt", None, db), sweep.analyze_text(mangled, ".txt", None, db)
    assert got["wait"] == clean["wait"] and got["sigs"] == clean["sigs"]


def test_a_fence_glued_to_the_first_line_goes_and_an_unpaired_one_stays():
    """The opening fence glued to the first line pairs with a closing one: both go.  Near miss: a
    line that only starts with three backticks (no block closes it) keeps them."""
    from hanganalyze.acquire.text.common import clean_lines

    assert clean_lines("```Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyboardInterrupt```") \
        == ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "KeyboardInterrupt"]
    assert clean_lines("```x = 1\nnothing closes it")[0] == "```x = 1"


@pytest.mark.parametrize("path", ["kafka-python/kafka-python-2077-1.txt", "openblas/openblas-1456-1.txt"])
def test_jira_code_markup_goes(db, path):
    """``{code:python}`` ... ``{code}`` lines around a paste are Jira's markup: a margin inside them is
    every line's again (kafka-python-2077 was refused), the same answer."""
    text = real_text(path)
    mangled = sweep.MANGLINGS["jira"](text)
    assert _frames(mangled) == _frames(text)
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == sweep.analyze_text(text, ".txt", None, db)["wait"]


def test_a_brace_line_of_a_dump_stays():
    """Near miss: a dump's own brace lines (a JSON document's ``{``, a dict's ``{code: 1}``) stay."""
    from hanganalyze.acquire.text.common import clean_lines

    assert clean_lines("{\n  \"pid\": 1\n}\n{code: 1}") == ["{", '  "pid": 1', "}", "{code: 1}"]


@pytest.mark.parametrize("name", ["journal", "docker_ts", "wrap100+crlf"])
def test_journald_docker_and_windows_console_keep_the_answer(db, name):
    """journalctl's ``Nov 28 12:00:00 host python3[4711]:``, docker logs --timestamps' nanoseconds,
    a Windows console's CRLF at 100 columns: the same frames and answer (a rule already held)."""
    for path in ("ibpythonic/ibpythonic-1-1.txt", "threadpoolctl/threadpoolctl-239-1.txt"):
        text = real_text(path)
        mangled = sweep.MANGLINGS[name](text)
        assert _frames(mangled) == _frames(text), path
        got, clean = sweep.analyze_text(mangled, ".txt", None, db), sweep.analyze_text(text, ".txt", None, db)
        assert got["sigs"] == clean["sigs"], path
