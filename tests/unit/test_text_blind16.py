"""The mechanisms behind open general round 16's misses (manifest-blind16.yaml), each on the round's
real paste and a near miss it must not claim: lldb's stop reasons that name a crash (Linux's
``signal SIGSEGV: address not mapped ...`` and ``unknown crash reason``), lldb's ``gui`` Threads
window, a py-spy-style stack copied flush left with ``library.so:0`` places, libpq's wait for the
server's result, concurrent.futures' exit handler joining a worker (before 3.9), and CPython's
thread-state check ("the function must be called with the GIL held")."""

from __future__ import annotations

import pytest
from helpers import REPO, real_text, text_verdict

from hanganalyze.acquire.text import lldbgui, parse_text
from hanganalyze.acquire.text.detect import UNRECOGNISED
from hanganalyze.errors import InputError

REAL = REPO / "tests" / "data" / "realworld"


real = real_text


def analyzed(text: str, db):
    return text_verdict(text, db)


def sigs(snap):
    return [f.signature for f in snap.findings]


def funcs(t):
    return [f.function for f in t.frames]


# --- lldb: stop reasons that name a crash ------------------------------------------------------

def test_linux_lldbs_signal_stop_reason_with_its_description_is_the_signal(db):
    text = real("llvm-project/llvm-project-101162-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.signal == "SIGSEGV"  # "signal SIGSEGV: address not mapped to object (...)"
    assert analyzed(text, db)[1] == "crashed"


def test_lldbs_unknown_crash_reason_is_a_crash(db):
    text = real("durable-rules/durable-rules-124-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.signal == "SIGSEGV" and any("unknown crash reason" in n for n in proc.notes)
    assert analyzed(text, db)[1] == "crashed"


@pytest.mark.parametrize("reason", ["signal SIGSTOP", "breakpoint 1.1", "instruction step over"])
def test_a_stop_that_names_no_crash_is_no_signal(reason):
    text = ("(lldb) bt\n* thread #1, name = 'python', stop reason = %s\n"
            "  * frame #0: 0x00007ffff697cb87 libc.so.6`__GI___poll + 7\n"
            "    frame #1: 0x00007ffff79920eb libpython3.12.so.1.0`select_poll_poll + 40\n" % reason)
    assert parse_text(text).processes[0].signal is None


# --- lldb's gui Threads window -----------------------------------------------------------------

def test_lldbs_gui_threads_window_is_read_as_threads_and_frames(db):
    text = real("scrcpy/scrcpy-5536-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.pid == 22068 and "parsed as lldb gui Threads window" in proc.notes
    a, b, c = proc.threads
    assert funcs(a) == ["__semwait_signal", "nanosleep", "SDL_Delay_REAL", "SDL_WaitEventTimeout_REAL",
                        "await_for_server", "scrcpy", "main_scrcpy", "main", "start"]
    assert a.tid == 0x1d7a616 and funcs(c) == ["__accept", "net_accept", "net_accept_intr"]
    assert funcs(b) == ["__workq_kernreturn", "_pthread_wqthread", "start_wqthread"]
    assert analyzed(text, db)[1] is not None  # a verdict, not a refusal


def test_a_box_drawn_tree_without_frame_rows_is_not_the_lldb_window():
    text = ("┌──<Files>──────────────┐\n│ ◆─project               │\n│ ├─◆─src                 │\n"
            "│ │ ├─main.c              │\n│ │ └─util.c              │\n└───────────────────────┘\n")
    assert lldbgui.score(text.splitlines()) == 0
    with pytest.raises(InputError) as e:
        parse_text(text)
    assert str(e.value) == UNRECOGNISED


# --- a py-spy-style stack copied flush left; libpq's wait for the server ---------------------------

def test_a_flush_left_stack_with_library_places_is_one_thread_and_libpq_waits_for_the_server(db):
    text = real("psycopg2/psycopg2-1226-1.txt")
    proc = parse_text(text).processes[0]
    (t,) = proc.threads
    assert len(t.frames) == 11 and not proc.messages
    assert (t.frames[0].function, t.frames[0].library, t.frames[0].file) == ("poll", "/usr/lib/libc-2.32.so", None)
    assert t.frames[3].function == "PQgetResult" and t.frames[5].line == 829
    assert analyzed(text, db)[1] == "network"


def test_prose_after_a_flush_left_frame_is_no_frame():
    text = ("poll (/usr/lib/libc-2.32.so:0)\n"
            "see the docs (linked above)\nit hangs here (sometimes)\n")
    proc = parse_text(text).processes[0]
    (t,) = proc.threads
    assert funcs(t) == ["poll"] and proc.messages == ["see the docs (linked above)", "it hangs here (sometimes)"]


def test_a_poll_under_pythons_selectors_is_not_libpqs_network_wait(db):
    text = ("Thread 0x7f00 (most recent call first):\n"
            '  File "/usr/lib/python3.8/selectors.py", line 415 in select\n'
            '  File "/app/loop.py", line 20 in run\n')
    assert analyzed(text, db)[1] != "network"
    text = ("#0  0x00007f2 in poll () from /usr/lib/libc.so.6\n"
            "#1  0x00007f3 in wl_display_dispatch_queue () from /usr/lib/libwayland-client.so.0\n"
            "#2  0x00007f4 in main () from ./app\n")
    assert analyzed(text, db)[1] != "network"


# --- concurrent.futures' exit handler joining a worker (Python < 3.9) -----------------------------

@pytest.mark.parametrize("path", ["openstack-installer/openstack-installer-773-1.txt", "porcupine/porcupine-379-1.txt",
                                  # Python 2's exit joins (open round 22): the futures backport's Condition.wait,
                                  # threading._MainThread._exitfunc
                                  "gax-python/gax-python-96-1.txt", "grpc/grpc-pr12293-1.txt"])
def test_the_executors_exit_join_is_the_nondaemon_thread_hang(db, path):
    snap, wait = analyzed(real(path), db)
    assert "python-shutdown-nondaemon-threads" in sigs(snap) and wait == "join"


def test_an_error_the_executors_exit_join_raises_is_not_the_hang(db):
    text = ("Error in atexit._run_exitfuncs:\nTraceback (most recent call last):\n"
            '  File "/usr/lib/python3.7/concurrent/futures/thread.py", line 40, in _python_exit\n    t.join()\n'
            '  File "/usr/lib/python3.7/threading.py", line 1041, in join\n'
            '    raise RuntimeError("cannot join thread before it is started")\n'
            "RuntimeError: cannot join thread before it is started\n")
    assert "python-shutdown-nondaemon-threads" not in sigs(analyzed(text, db)[0])
    text = ("Traceback (most recent call last):\n"
            '  File "/app/main.py", line 9, in <module>\n    worker.join()\n'
            '  File "/usr/lib/python3.7/threading.py", line 1032, in join\n    self._wait_for_tstate_lock()\n'
            '  File "/usr/lib/python3.7/threading.py", line 1048, in _wait_for_tstate_lock\n'
            "    elif lock.acquire(block, timeout):\nKeyboardInterrupt\n")
    assert "python-shutdown-nondaemon-threads" not in sigs(analyzed(text, db)[0])


# --- CPython's thread-state check: the C API called without the GIL ----------------------------

def test_the_thread_state_checks_fatal_error_is_the_c_api_without_the_gil(db):
    snap, wait = analyzed(real("freecad/freecad-15584-1.txt"), db)
    assert "python-api-without-gil" in sigs(snap) and wait == "crashed"


@pytest.mark.parametrize("message", [
    "Fatal Python error: PyThreadState_Get: no current thread",
    "Fatal Python error: take_gil: PyMUTEX_LOCK(gil->mutex) failed",
    "Fatal Python error: _enter_buffered_busy: could not acquire lock for <_io.BufferedWriter name='<stdout>'>",
])
def test_other_fatal_errors_are_not_the_c_api_without_the_gil(db, message):
    text = ("%s\nPython runtime state: initialized\n\nCurrent thread 0x00007f (most recent call first):\n"
            '  File "/app/main.py", line 3 in <module>\n' % message)
    assert "python-api-without-gil" not in sigs(analyzed(text, db)[0])
