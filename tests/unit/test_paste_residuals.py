"""The paste sweep's residuals (``scripts/paste_sweep.py``), each fixed by a rule for the mangling:
a real corpus text under the mangling that changed its answer, and a near miss the rule must leave
alone (a line that only looks like the mangling's)."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import REPO, real_text

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.common import clean_and_join

_spec = importlib.util.spec_from_file_location("paste_sweep", REPO / "scripts" / "paste_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def db():
    return pipeline.load_signature_db()


def _frames(text: str):
    return [[(f.function, f.file, f.line) for f in t.frames] for p in parse_text(text).processes for t in p.threads]


# ---- interleaved Ctrl-C tracebacks (spinalcordtoolbox-618) ----------------------------------------

SCT = "spinalcordtoolbox/spinalcordtoolbox-618-1.txt"


def test_interleaved_headerless_tracebacks_are_all_read(db):
    """Pool workers interrupted together print their tracebacks into one terminal in turn, and the
    paste has no ``Traceback`` header: every block after a ``KeyboardInterrupt`` is read, so the
    worker waiting in the task queue's ``get`` is there whatever way the paste was wrapped."""
    text = real_text(SCT)
    frames = _frames(text)
    assert len(frames) == 3
    assert [f[0] for f in frames[2]] == ["get", "worker", "run"]  # innermost first
    assert all(f[0] == "get" for f in frames[1])
    clean = sweep.analyze_text(text, ".txt", None, db)
    assert clean["wait"] == "queue"
    for name in ("lineno", "backticks", "timestamp", "wrap80", "srun"):
        assert _frames(sweep.MANGLINGS[name](text)) == frames, name
        assert sweep.analyze_text(sweep.MANGLINGS[name](text), ".txt", None, db)["wait"] == "queue", name


def test_a_file_line_after_a_headed_traceback_stays_a_message():
    """Near miss: a ``File`` line logged after a whole traceback (its header, its exception) opens
    no block of its own; only headerless blocks follow one another that way."""
    text = ("Traceback (most recent call last):\n"
            '  File "/app/main.py", line 10, in <module>\n'
            "    main()\n"
            "ValueError: bad\n"
            'retrying after  File "/app/main.py", line 10, in <module>\n'
            '  File "/app/other.py", line 3, in helper\n')
    procs = parse_text(text).processes
    assert [len(t.frames) for p in procs for t in p.threads] == [1]
    assert any("other.py" in m for m in procs[0].messages)


def test_one_line_repeated_at_an_odd_width_is_no_terminal_width():
    """The same full-width line three times (one frame in several interleaved tracebacks) at 91
    columns is no cut: the line under it (``KeyboardInterrupt``) stays a line of its own."""
    lines = clean_and_join(real_text(SCT))
    assert "KeyboardInterrupt" in lines
    assert not any(x.endswith("workerKeyboardInterrupt") for x in lines)


def test_alike_cuts_at_a_usual_width_are_still_joined(db):
    """Near miss: at 80 columns, cuts of lines that share a long path are alike (``[rank0]:   File
    "/mnt/.../torch/``) and are still the terminal's: joined, the labelled bug found."""
    text = real_text("pytorch/pytorch-78061-1.txt")
    mangled = sweep.MANGLINGS["rank0+wrap80"](text)
    cut = [x for x in mangled.split("\n") if len(x) == 80]
    assert len(cut) >= 3 and len(set(cut)) < 3
    assert "python-api-without-gil" in sweep.analyze_text(mangled, ".txt", None, db)["sigs"]
