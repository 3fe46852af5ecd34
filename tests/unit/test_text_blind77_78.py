"""Fixes made after sealed rounds 77/78 were scored and opened (manifest-blind77/78.yaml), each on the
round's real paste and a near miss; not counted in the rounds' score: TensorFlow's check of a failed
pthread_create (the thread limit), a TCPStore connect timeout given in seconds, pytest's "E" lines
around a captured traceback, the flight recorder's analysis report as text, Home Assistant's list of
the non-daemon threads its exit waits for, GLib's fatal messages, an extension's error report
faulting in the thread state (the C API called with the GIL released), and a pool worker's task
that waits (not the worker between tasks)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_tensorflows_check_of_a_failed_thread_creation(db):
    text = real_text("sealed77/meta-dataset-84-1.txt")
    assert "thread-limit-reached" in sigs(text_verdict(text, db)[0])
    # near miss: the same check failing on a mutex (no thread creation)
    near = text.replace("Thread tf_data_iterator_resource creation via pthread_create() failed.",
                        "Mutex lock failed.")
    assert near != text and "thread-limit-reached" not in sigs(text_verdict(near, db)[0])


def test_a_tcpstore_connect_timeout_in_seconds(db):
    text = real_text("sealed77/nanodet-415-1.txt")
    assert "c10d-store-rendezvous-hang" in sigs(text_verdict(text, db)[0])
    # near miss: a socket of another client timing out (no TCPStore connect)
    near = text.replace("while trying to connect to", "while reading from").replace("TCPStore(", "HTTPClient(")
    assert "c10d-store-rendezvous-hang" not in sigs(text_verdict(near, db)[0])


def test_pytests_e_lines_around_a_traceback_are_unwrapped(db):
    snap = parse_text(real_text("sealed77/data-659-1.txt"))
    frames = [f for t in snap.processes[0].threads for f in t.frames]
    assert frames and frames[0].function == "__init__" and frames[0].file.endswith("dataloader.py")
    # near miss: pytest's E lines of an assertion are no traceback
    with pytest.raises(InputError):
        parse_text("E       assert 3 == 4\nE        +  where 3 = len([1, 2, 3])\n")


def test_the_flight_recorders_analysis_report(db):
    text = real_text("sealed77/pytorch-151666-1.txt")
    assert text_verdict(text, db)[1] == "collective"
    # near miss: a collective's record without the report's verdict lines
    calm = "\n".join(x for x in text.splitlines() if "has errors" not in x and "Culprit rank" not in x) + "\n"
    try:
        assert text_verdict(calm, db)[1] != "collective"
    except InputError:
        pass  # refused: nothing in it a hang leaves


def test_home_assistants_non_daemon_threads_at_exit(db):
    text = real_text("sealed78/core-78200-1.txt")
    snap, wait = text_verdict(text, db)
    assert "python-shutdown-nondaemon-threads" in sigs(snap) and wait == "join"
    # near miss: the same listing of daemon threads (they do not hold the exit)
    near = text.replace("non-daemonic threads", "daemonic threads")
    try:
        assert "python-shutdown-nondaemon-threads" not in sigs(text_verdict(near, db)[0])
    except InputError:
        pass


def test_glibs_fatal_messages_are_a_crash(db):
    text = real_text("sealed78/meerk40t-2673-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: GTK's warning (it goes on)
    with pytest.raises(InputError):
        parse_text("(python3:1234): Gtk-WARNING **: 12:00:01.123: Negative content width -2 (allocation 1)\n")


def test_an_extensions_error_report_faulting_in_the_thread_state(db):
    text = real_text("sealed78/pygame-3049-1.txt")
    snap, wait = text_verdict(text, db)
    f = next(f for f in snap.findings if f.signature == "python-api-without-gil")
    assert f.confidence < 0.8 and wait == "crashed"
    # near miss: the same error setter called by the interpreter itself (no extension between)
    near = text.replace("v4l2_read_frame", "_PyEval_EvalFrameDefault")
    assert "python-api-without-gil" not in sigs(text_verdict(near, db)[0])


def test_a_pool_workers_task_that_joins_is_a_join_not_an_idle_worker(db):
    assert text_verdict(real_text("sealed78/core-77906-1.txt"), db)[1] == "join"
    # near miss: the same executor worker between tasks, reading its queue: idle
    idle = ('Thread 0x7F01 (idle): "SyncWorker_5"\n'
            "    wait (threading.py:320)\n    get (queue.py:171)\n    _worker (concurrent/futures/thread.py:81)\n"
            "    run (threading.py:953)\n    _bootstrap_inner (threading.py:1016)\n    _bootstrap (threading.py:973)\n")
    assert text_verdict(idle, db)[1] == "idle"
