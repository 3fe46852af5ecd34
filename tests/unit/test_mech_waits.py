"""Waits told by mechanism in dumps the corpus did not tune for (issue 32): py-bt-full's numbered
"Waiting for the GIL" and built-in lines, pystack's source lines, and the frames of wrappers that
wait for a collective or for the device without a c10d / CUDA frame (FSDP2, JAX, torch_xla).

Real texts: tests/data/text/pybt_full_gil_wait.txt is gdb 15's ``thread apply all py-bt-full`` of
a CPython 3.10 process (one thread spinning with the GIL, two sleeping threads waiting to take it
back; the self= reprs cut at the line ends are as gdb printed them);
tests/data/text/pystack_remote.txt is ``pystack remote`` of the txt_deadlock fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze import triage
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Frame

TEXT = Path(__file__).resolve().parents[1] / "data" / "text"


def _wait(text: str, db) -> str:
    snap = pipeline.analyze(parse_text(text), db)
    return next(f for f in snap.findings if f.signature == "triage").triage.wait


def test_pybt_full_gil_wait_lines_keep_each_thread_whole(db):
    text = (TEXT / "pybt_full_gil_wait.txt").read_text()
    threads = parse_text(text).processes[0].threads
    assert [t.tid for t in threads] == [14964, 14963, 14960]  # no headless thread split off
    for t in threads[:2]:
        assert t.state.gil == "waiting"
        assert [f.function for f in t.all_frames()][:2] == ["sleep", "waiter"]  # "#10 <built-in ...>" too
    assert threads[2].state.gil is None
    # the GIL wait is innermost (inside sleep's return), before the sleep it returns from
    assert _wait(text, db) == "gil"


def test_pybt_full_without_the_gil_lines_is_a_sleep_near_miss(db):
    text = (TEXT / "pybt_full_gil_wait.txt").read_text()
    kept = "\n".join(line for line in text.splitlines() if "Waiting for the GIL" not in line) + "\n"
    threads = parse_text(kept).processes[0].threads
    assert [t.tid for t in threads] == [14964, 14963, 14960]
    assert all(t.state.gil is None for t in threads)
    assert _wait(kept, db) == "sleep"


def test_pystack_source_lines_tell_the_wait():
    proc = parse_text((TEXT / "pystack_remote.txt").read_text()).processes[0]
    by_fn = {t.all_frames()[0].function: t for t in proc.threads if t.all_frames()}
    assert by_fn["sleeper"].all_frames()[0].source == "time.sleep(3600)"
    assert by_fn["take_b_then_a"].all_frames()[0].source == "with lock_a:"
    assert triage.classify(proc, by_fn["sleeper"]).category.id == "sleep"
    assert triage.classify(proc, by_fn["take_b_then_a"]).category.id == "lock"


def test_pystack_locals_are_no_source_line():
    """--locals rows under a frame whose source was not shown are values, not the line it stands on."""
    text = ('Traceback for thread 7 (python3.12) [] (most recent call last):\n'
            '    (Python) File "/app/main.py", line 9, in poll\n'
            '      Arguments:\n'
            '        q: <queue.Queue at 0x7f>\n')
    frame = parse_text(text).processes[0].threads[0].all_frames()[0]
    assert frame.function == "poll" and frame.source is None


def _category(function: str, file: str) -> str:
    f = Frame(kind="python", function=function, file=file)
    tab = triage.table()
    return next((c.id for c in tab.categories if triage._frame_matches(c, f)), "runs")


# frame names as they appear in real stacks: torchtitan#216's FSDP2 traceback
# (https://github.com/pytorch/torchtitan/pull/216: pre_forward -> wait_for_unshard ->
# foreach_all_gather_copy_out -> all_gather_work.wait()), JAX's and torch_xla's host-side waits
@pytest.mark.parametrize("function,file,want", [
    ("wait_for_unshard", "/data/torch/distributed/_composable/fsdp/_fsdp_param_group.py", "collective"),
    ("foreach_all_gather_copy_out", "/data/torch/distributed/_composable/fsdp/_fsdp_collectives.py", "collective"),
    ("block_until_ready", "/usr/lib/python3.10/site-packages/jax/_src/array.py", "gpu"),
    ("wait_device_ops", "/usr/lib/python3.10/site-packages/torch_xla/core/xla_model.py", "gpu"),
    ("initialize", "/usr/lib/python3.10/site-packages/jax/_src/distributed.py", "collective"),
    # near misses: FSDP2's own bookkeeping and a JAX function that waits for nothing
    ("pre_forward", "/data/torch/distributed/_composable/fsdp/_fsdp_param_group.py", "runs"),
    ("jit", "/usr/lib/python3.10/site-packages/jax/_src/api.py", "runs"),
])
def test_wrapper_frames_name_their_wait(function, file, want):
    assert _category(function, file) == want


def test_py_list_current_line_is_the_thread_innermost_python_line(db):
    """gdb's ``thread apply all py-list`` (sardana#1023): the '>' line is where the selected Python
    frame stands; ``waiter.acquire()`` is threading.Condition.wait's own wait."""
    text = (TEXT / "mechanisms" / "sardana-1023-py-list.txt").read_text()
    proc = parse_text(text).processes[0]
    t = next(t for t in proc.threads if t.tid == 21463)
    frames = t.all_frames()
    assert len(frames) == 1 and frames[0].line == 340 and frames[0].source == "waiter.acquire()"
    assert triage.classify(proc, t).category.id == "condition"
    assert _wait(text, db) == "condition"


def test_py_list_context_lines_are_no_frame_near_miss(db):
    """The same listing without its '>' line: the context lines are no frame, and a plain
    `lock.acquire()` line is a lock wait, not a condition's."""
    text = (TEXT / "mechanisms" / "sardana-1023-py-list.txt").read_text()
    kept = "\n".join(line for line in text.splitlines() if not line.startswith(">")) + "\n"
    with pytest.raises(InputError):  # no frame and no known line: nothing to read
        parse_text(kept)
    other = text.replace(">340                    waiter.acquire()", ">340                    self._lock.acquire()")
    assert _wait(other, db) == "lock"
