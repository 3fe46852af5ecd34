"""Fixes from open dev round 46 (manifest-blind46.yaml), each on the round's real paste and a near miss:
a Rust panic's line; a thread take_gil ends at finalization with the frames above its exit cut; Markdown's
escapes on every line of a Visual Studio call stack; a kernel's own device-side assertion line; c10's
Windows backtrace under its abort handler; the ranks of a launcher each dying of the same uncaught
exception."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_a_rust_panics_line_is_a_crash(db):
    text = real_text("rustpython/rustpython-7813-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the words in a sentence are prose, and the rest of the text names nothing
    prose = text.replace("thread '<unnamed>' (453342) panicked at", "the docs say a thread panicked at")
    with pytest.raises(InputError):
        parse_text(prose)


def test_a_thread_take_gil_ends_at_finalization_its_top_cut(db):
    text = real_text("rclpy/rclpy-1484-1.txt")
    snap, wait = text_verdict(text, db)
    f = next(f for f in snap.findings if f.signature == "python-finalization-gil-reacquire")
    assert f.confidence <= 0.5 and wait == "crashed"  # exiting, not waiting for the GIL
    # near miss: the same GIL take with no exit above it is a GIL wait, no finalization exit
    lines = [x for x in text.splitlines() if "__do_cancel" not in x and "pthread_exit" not in x
             and "PyThread_exit_thread" not in x]
    snap, wait = text_verdict("\n".join(lines) + "\n", db)
    assert "python-finalization-gil-reacquire" not in sigs(snap) and wait == "gil"


def test_markdown_escapes_on_every_line_are_taken_off(db):
    text = real_text("pywin32/pywin32-401-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].library == "python26.dll" and any(f.function == "_heap_alloc" for f in t.frames)
    # near miss: one escaped line among plain ones is no wrapper (the backslash stays)
    one = "ntdll.dll!7756240b()\nntdll.dll!77562054()\nmsvcr71.dll\\!\\_heap\\_alloc\\(\\)\nntdll.dll!77562033()\n"
    assert all(f.function != "_heap_alloc" for f in parse_text(one).processes[0].threads[0].frames)


def test_a_kernels_own_assertion_line_is_the_device_side_assert(db):
    text = real_text("garak/garak-199-1.txt")
    snap, wait = text_verdict(text, db)
    assert "cuda-device-side-assert" in sigs(snap) and wait == "crashed"
    # near miss: the same line without a kernel's block / thread coordinates is no kernel's: nothing known
    host = text.replace("block: [1,0,0], thread: [0,0,0] ", "").replace("block: [1,0,0], thread: [1,0,0] ", "")
    with pytest.raises(InputError):
        parse_text(host)


def test_c10s_windows_backtrace_under_its_abort_handler(db):
    text = real_text("therock/therock-5014-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert (t.frames[1].function, t.frames[1].library) == ("terminate", "ucrtbase.dll")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same rows without the abort handler's line are a stack, no crash named
    rows = "\n".join(x for x in text.splitlines() if "AbortHandler" not in x) + "\n"
    assert text_verdict(rows, db)[1] != "crashed"


def test_a_launchers_ranks_each_dying_of_an_uncaught_exception(db):
    text = real_text("deepspeed/deepspeed-618-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    # near miss: an error record among the launcher's lines says someone caught and logged it
    logged = text.replace("[WARNING] [runner.py:117:fetch_hostfile]", "[ERROR] [runner.py:117:fetch_hostfile]")
    assert not crash_said(logged, db)
