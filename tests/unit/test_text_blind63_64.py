"""Fixes made after sealed rounds 63/64 were scored and opened (manifest-blind63/64.yaml), each on the
round's real paste and a near miss; not counted in the rounds' score: Open MPI's last line under its
fatal-signal backtrace, a macOS .ips report's JSON, vLLM's worker whose method raised, Ray Tune's
runner thread that raised, Windows 9x's invalid page fault, a lock file's creation refused with
EEXIST, a faulthandler dump its author abridged; and CPython's pre-3.9 fatal errors for the GIL
released or restored with no thread state (python-api-without-gil, widened)."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def _not_crashed(text, db):
    return not crash_said(text, db)


@pytest.mark.parametrize("name, line, calm", [
    ("horovod/horovod-1185-1.txt", "*** End of error message ***", "--- end of the job's output ---"),
    ("invokeai/invokeai-2336-1.txt", '"faultingThread" : 0', '"runningThread" : 0'),
    ("openrlhf/openrlhf-313-1.txt", "Error executing method start_worker_execution_loop",
     "Finished executing method start_worker_execution_loop"),
    ("ray/ray-23405-1.txt", "Runner Thread raised error.", "Runner Thread finished."),
    ("wxglade/wxglade-196-1.txt", "verursachte einen Fehler durch eine ungültige Seite", "meldete etwas"),
])
def test_a_runtimes_own_crash_line(db, name, line, calm):
    text = real_text(name)
    assert line in text
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the line reworded to one no crash writes
    near = text.replace(line, calm)
    if name.startswith("openrlhf"):
        near = near.replace("This might cause deadlock in distributed execution.", "")
    assert _not_crashed(near, db)


def test_vllm_workers_error_is_no_lock_wait_for_its_deadlock_word(db):
    assert text_verdict(real_text("openrlhf/openrlhf-313-1.txt"), db)[1] != "lock"


def test_a_lock_files_creation_refused_with_eexist(db):
    text = real_text("cherrypy/cherrypy-604-1.txt")
    assert "stale-file-lock" in sigs(text_verdict(text, db)[0])
    near = text.replace(".lock'", ".json'")  # the same error for a file that is no lock
    try:
        assert "stale-file-lock" not in sigs(text_verdict(near, db)[0])
    except InputError:
        pass


def test_a_faulthandler_dump_its_author_abridged(db):
    text = real_text("suews/suews-1762-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert (frames[0].function, frames[0].line) == ("create_module", 1293) and frames[-1].function == "run"
    assert frames[1].function == "<module>"
    # near miss: the same rows under no thread header are no dump (one line of prose among them)
    with pytest.raises(InputError):
        parse_text("numpy/__init__.py, line 122\n")


@pytest.mark.parametrize("name", ["mdsplus/mdsplus-263-1.txt", "ufo-core/ufo-core-48-1.txt",
                                  "cefpython/cefpython-535-1.txt"])
def test_old_pythons_fatal_error_for_a_gil_released_without_a_thread_state(db, name):
    text = real_text(name)
    snap, wait = text_verdict(text, db)
    assert "python-api-without-gil" in sigs(snap) and wait == "crashed"
    # near miss: another fatal error of the same interpreter (start-up, no GIL involved)
    near = "\n".join("Fatal Python error: Py_Initialize: unable to load the file system codec"
                     if "Fatal Python error" in x else x for x in text.splitlines()) + "\n"
    assert "python-api-without-gil" not in sigs(text_verdict(near, db)[0])


@pytest.mark.parametrize("name", ["clipmanager/clipmanager-9-1.txt", "dask/dask-6664-1.txt"])
def test_a_thread_state_released_that_is_not_current(db, name):
    snap, wait = text_verdict(real_text(name), db)
    assert "python-api-without-gil" in sigs(snap) and wait == "crashed"
    # near miss: the same release while the runtime finalizes is the finalization class's
    fin = real_text(name) + "Python runtime state: finalizing (tstate=0x00007f0a1c2b3d40)\n"
    assert "python-api-without-gil" not in sigs(text_verdict(fin, db)[0])
