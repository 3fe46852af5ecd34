"""Mechanisms from sealed round 9's misses (opened after it was scored): gdb's ``info threads`` table
read as each thread's innermost frame, and a stack with ``abort`` on top read as a crash where the
input names no signal (a WinDbg ``k`` of an uncaught C++ exception)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze.pipeline import analyze, load_signature_db

CORPUS = Path(__file__).resolve().parents[1] / "data" / "realworld"


@pytest.fixture(scope="module")
def db():
    return load_signature_db()


def _triage(text: str, db):
    snap = analyze(parse_text(text), db)
    return next(f for f in snap.findings if f.signature == "triage")


def test_info_threads_rows_are_threads_with_their_innermost_frame(db):
    text = (CORPUS / "tribler" / "tribler-2842-1.txt").read_text()
    (p,) = parse_text(text).processes
    assert len(p.threads) == 10 and all(len(t.frames) == 1 and t.frames[0].function == "poll" for t in p.threads)
    assert [t.tid for t in p.threads][:3] == [723, 730, 731] and p.threads[1].name == "QXcbEventReader"
    assert _triage(text, db).triage.wait == "idle"  # every thread in poll: nothing here says what hangs


def test_a_plain_bt_after_info_threads_is_the_selected_threads(db):
    text = (CORPUS / "cpython" / "cpython-91776-1.txt").read_text()
    (p,) = parse_text(text).processes
    (t,) = p.threads  # not the row's thread and a headless one
    assert t.tid == 329024 and t.current and t.frames[0].function == "do_futex_wait.constprop"
    assert any(f.function == "_enter_buffered_busy" for f in t.frames)


def test_near_miss_numbered_lines_are_not_info_threads():
    with pytest.raises(InputError):
        parse_text("  1    Thread one went to the shop\n  2    Thread two (LWP of sorts) stayed home\n")


def test_abort_on_top_is_a_crash_without_a_signal(db):
    text = (CORPUS / "pytorch" / "pytorch-31370-1.txt").read_text()  # WinDbg k: ucrtbase!abort <- terminate
    tri = _triage(text, db)
    assert tri.triage.wait == "crashed"
    assert "_ThrowRuntimeTypeLogicError" in tri.summary  # the blame frame is past the C runtime's


def test_near_miss_abort_deep_in_the_stack_is_no_crash(db):
    text = ("Thread 1 (Thread 0x7f0 (LWP 10)):\n"
            "#0  0x00007f1 in __futex_abstimed_wait_common64 () from /lib/libc.so.6\n"
            "#1  0x00007f2 in pthread_cond_wait () from /lib/libc.so.6\n"
            "#2  0x00007f3 in wait_for_work () from /usr/lib/libfoo.so\n"
            "#3  0x00007f4 in worker_main () from /usr/lib/libfoo.so\n"
            "#4  0x00007f5 in abort_on_error_handler () from /usr/lib/libfoo.so\n")
    assert _triage(text, db).triage.wait != "crashed"
