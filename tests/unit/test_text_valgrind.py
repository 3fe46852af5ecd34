"""Valgrind's reports (tests/data/valgrind/: real pastes): an error's first stack is a thread (where
it made the error), the stacks of a block's history are not; a memory error (memcheck's invalid
read or write) is a crash's line; the signal that ended the process marks its thread.  Near misses:
a block's history after the error makes no thread; a line that only mentions valgrind is no report."""

from __future__ import annotations

import pytest
from helpers import REPO, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError

DATA = REPO / "tests" / "data" / "valgrind"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_an_invalid_write_is_a_crash_where_it_was_made(db):
    snap, wait = text_verdict(_read("datalad-1382.txt"), db)
    assert wait == "crashed"
    (t,) = snap.processes[0].threads
    assert (t.frames[0].function, t.frames[0].file, t.frames[0].line) == ("gc_list_remove", "gcmodule.c", 251)
    assert snap.processes[0].pid == 12629


def test_frames_without_symbols_keep_their_library_and_a_blocks_history_is_no_thread(db):
    text = _read("robocup-software-674.txt") + (
        "==22530==    at 0x4C2CDFB: free (vg_replace_malloc.c:530)\n"
        "==22530==    by 0x8474C46: PyNode_Free (in /usr/lib/x86_64-linux-gnu/libpython3.5m.so.1.0)\n")
    threads = parse_text(text).processes[0].threads
    assert len(threads) == 1 and threads[0].frames[0].function is None
    assert threads[0].frames[0].library == "/usr/lib/x86_64-linux-gnu/libpython3.5m.so.1.0"
    assert text_verdict(text, db)[1] == "crashed"


def test_the_signal_that_ended_the_process_marks_its_thread():
    proc = parse_text(_read("foro-2377.txt")).processes[0]
    assert proc.signal == "SIGPIPE" and proc.threads[0].current
    assert [f.function for f in proc.threads[0].frames][:2] == ["send", "envioDePaginaAsigFija"]


def test_a_sentence_about_valgrind_is_no_report():
    with pytest.raises(InputError):
        parse_text("I ran it under valgrind (memcheck) and it shows nothing (see the log)\n")
