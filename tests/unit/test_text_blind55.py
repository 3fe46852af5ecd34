"""Fixes from open dev round 55 (manifest-blind55.yaml), each on the round's real paste and a near miss:
a native thread that takes or drops the GIL while the interpreter finalizes, by its other endings
(PyGILState_Release's fatal error, PyO3's panic on a worker thread); the daemon-thread stdio fatal
error cut by a terminal's wrap; an empty ``<span></span>`` a migrated issue left in gdb's ``#2``; a
log whose records open with ``[time name LEVEL]``."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return {f.signature: f.confidence for f in snap.findings}


def test_gilstate_release_fatal_error_while_finalizing(db):
    text = real_text("lance/lance-4152-1.txt")
    snap, wait = text_verdict(text, db)
    assert sigs(snap).get("python-finalization-gil-reacquire") == 0.8 and wait == "crashed"
    # near miss: the same fatal error in a running interpreter (a C extension's own misuse)
    near = text.replace("Python runtime state: finalizing", "Python runtime state: initialized")
    assert "python-finalization-gil-reacquire" not in sigs(text_verdict(near, db)[0])


def test_pyo3_panic_on_a_worker_thread(db):
    text = real_text("mcp-mesh/mcp-mesh-877-1.txt")
    assert sigs(text_verdict(text, db)[0]).get("python-finalization-gil-reacquire") == 0.6
    # near miss: a Rust program's main thread that never initialized Python
    near = text.replace("thread 'tokio-rt-worker' panicked", "thread 'main' panicked")
    try:
        found = sigs(text_verdict(near, db)[0])
    except InputError:
        found = {}
    assert "python-finalization-gil-reacquire" not in found


def test_daemon_thread_stdio_error_cut_by_a_wrap(db):
    text = real_text("nvim-dap-python/nvim-dap-python-146-1.txt")
    assert "at inter\npreter shutdown" in text
    assert "daemon-thread-stdio-at-shutdown" in sigs(text_verdict(text, db)[0])
    # near miss: another object's lock (a file of the program's, not a standard stream)
    near = text.replace("name='<stdin>'", "name='data.bin'")
    assert "daemon-thread-stdio-at-shutdown" not in sigs(text_verdict(near, db)[0])


def test_an_empty_span_in_gdbs_frame_number(db):
    text = real_text("scons/scons-2050-1.txt")
    assert "#<span></span>2" in text
    frames = parse_text(text).processes[0].threads[0].frames
    assert frames[0].function == "PyImport_ImportModuleLevel"
    # near miss: a span with text is no artefact: its words stay (and no frame is made of them)
    with pytest.raises(InputError):
        parse_text("#<span>note</span>2 was the frame\nnothing else\n")


def test_records_opening_with_time_name_and_level(db):
    text = real_text("qcodes/qcodes-175-1.txt")
    snap, wait = text_verdict(text, db)
    assert snap.processes[0].threads and wait == "queue"
    # near miss: without a level the bracket is no record prefix of this kind (and holds no frame here)
    with pytest.raises(InputError):
        parse_text("[10:49:46.311 DataServer] starting\n[10:49:46.312 DataServer] ready\n")
