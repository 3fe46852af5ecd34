"""``python -m asyncio ps PID`` / ``pstree PID`` pastes (CPython 3.14, the real fixture programs
``tests/fixtures/py_asyncio.py``: ``tests/data/text/asyncio_*.txt``) -> ``processes[].asyncio``,
with the same asyncio findings and task tree as a core; cut or garbage pastes never raise."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.detect import detect, scores
from hanganalyze.errors import InputError
from hanganalyze.pipeline import analyze, load_signature_db
from hanganalyze.render.asynctree import process_lines
from hanganalyze.render.html import render_html
from hanganalyze_gdbext.model.asyncio import AsyncTask

DATA = Path(__file__).resolve().parents[1] / "data" / "text"
MODES = ("cycle", "events", "orphan", "gather", "blocked", "healthy")
#: What the asyncio findings say for each fixture (ps cannot see the loop thread's native stack:
#: ``blocked`` gives none from a paste).
EXPECT = {"cycle": {"asyncio-await-cycle"}, "events": {"asyncio-orphan-wait"}, "orphan": {"asyncio-orphan-wait"},
          "gather": set(), "blocked": set(), "healthy": set()}


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _tasks(snap) -> Dict[str, AsyncTask]:
    p = snap.processes[0]
    assert p.asyncio is not None
    return {t.name: t for t in p.asyncio.all_tasks()}


def _findings(snap):
    return {f.signature for f in analyze(snap, load_signature_db()).findings if f.signature.startswith("asyncio-")}


@pytest.mark.parametrize("tool", ["ps", "pstree"])
@pytest.mark.parametrize("mode", MODES)
def test_detected_and_findings(tool, mode):
    text = _read("asyncio_%s_%s.txt" % (tool, mode))
    assert scores(text.splitlines())[0][1] == "asyncio"
    snap = parse_text(text)
    assert "parsed as python -m asyncio ps/pstree" in snap.processes[0].notes
    assert _findings(snap) == EXPECT[mode]
    assert process_lines(snap.processes[0])  # the task tree comes out


def test_ps_ids_threads_stacks_awaiters():
    snap = parse_text(_read("asyncio_ps_gather.txt"))
    (lp,) = snap.processes[0].asyncio.loops
    assert lp.thread == 5616
    tasks = _tasks(snap)
    assert tasks["Task-1"].id == "0x7fb1a6518410"
    assert [f.function for f in tasks["Task-3"].coroutine_stack] == ["sleep", "napper"]  # innermost first
    assert tasks["Task-3"].awaited_by == ["0x7fb1a6518410"]
    assert [a.task for a in tasks["Task-1"].awaits] == [tasks["Task-2"].id, tasks["Task-3"].id]
    assert tasks["Task-3"].awaits[0].kind == "sleep"


def test_ps_cycle_both_awaiters():
    tasks = _tasks(parse_text(_read("asyncio_ps_cycle.txt")))
    assert sorted(tasks) == ["Task-1", "Task-2", "Task-3"]
    assert sorted(tasks["Task-2"].awaited_by) == sorted([tasks["Task-1"].id, tasks["Task-3"].id])
    assert [a.task for a in tasks["Task-3"].awaits] == [tasks["Task-2"].id]


def test_pstree_files_lines_and_nesting():
    snap = parse_text(_read("asyncio_pstree_events.txt"))
    tasks = _tasks(snap)
    st = tasks["Task-2"].coroutine_stack
    assert [(f.function, f.file.rsplit("/", 1)[-1], f.line) for f in st] == [
        ("Event.wait", "locks.py", 213), ("waits_then_sets", "py_asyncio.py", 38)]
    assert [f.function for f in tasks["Task-1"].coroutine_stack] == ["main"]
    assert tasks["Task-3"].awaited_by == [tasks["Task-1"].id] and tasks["Task-3"].awaits[0].kind == "event"
    assert snap.processes[0].asyncio.loops[0].thread is None


def test_pstree_several_roots():
    tasks = _tasks(parse_text(_read("asyncio_pstree_healthy.txt")))
    assert sorted(tasks) == ["Task-1", "Task-3", "Task-4"]
    assert not any(t.awaited_by for t in tasks.values())
    assert [f.function for f in tasks["Task-1"].coroutine_stack] == ["Server.serve_forever", "main"]


def test_pstree_cycle_refusal():
    snap = parse_text(_read("asyncio_pstree_cycle.txt"))
    tasks = _tasks(snap)
    assert sorted(tasks) == ["Task-2", "Task-3"]
    assert any("refused an await cycle" in n for n in snap.processes[0].asyncio.notes)


def test_ps_and_pstree_pasted_together():
    snap = parse_text(_read("asyncio_ps_gather.txt") + "\n" + _read("asyncio_pstree_gather.txt"))
    tasks = _tasks(snap)
    assert tasks["Task-3"].id.startswith("0x")
    assert tasks["Task-3"].coroutine_stack[0].line == 702  # files and lines from the tree


def test_html_of_a_paste_escapes_and_shows_tree():
    text = _read("asyncio_ps_orphan.txt").replace("Task-3 ", "<b>x</b>", 1)
    page = render_html(analyze(parse_text(text), load_signature_db()))
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert 'class="group atree-loose" open><summary><span class="tlabel">asyncio tasks: loop' in page


@pytest.mark.parametrize("name", ["asyncio_ps_cycle.txt", "asyncio_pstree_blocked.txt", "asyncio_ps_healthy.txt"])
def test_cut_pastes_parse_partially(name):
    text = _read(name)
    for cut in range(1, len(text), 7):
        for part in (text[:cut], text[cut:]):
            try:
                snap = parse_text(part)
            except InputError as e:
                assert "\n" not in str(e)
                continue
            analyze(snap, load_signature_db())
            for p in snap.processes:
                process_lines(p)


def test_garbage_is_one_line_error():
    for text in ("tid task id task name coroutine stack\n", "└── (T)\n│   ├──\n", "cycle: → →\n",
                 "hello\nworld\n"):
        with pytest.raises(InputError) as e:
            parse_text(text, input_format="asyncio")
        assert "\n" not in str(e.value)
    assert detect(_read("asyncio_ps_gather.txt").splitlines()).NAME == "asyncio"


def test_words_fallback_when_spaces_collapsed():
    text = "\n".join(" ".join(line.split()) for line in _read("asyncio_ps_cycle.txt").splitlines())
    tasks = _tasks(parse_text(text))
    assert sorted(tasks) == ["Task-1", "Task-2", "Task-3"]
    assert [a.task for a in tasks["Task-3"].awaits] == [tasks["Task-2"].id]
