"""Stacks that no debugger printed the usual way, each on a real paste and a near miss: call lists an
issue's author wrote by hand (arrow blocks, ``module:function()`` lines), .NET's SOS stacks (lldb's
``eestack``), and the waits they show (CPython's lock as a condition variable on macOS; a
PyGILState_Ensure still making its thread state)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def test_arrow_blocks_one_thread_each(db):
    text = real_text("underworld3/underworld3-661-1.txt")
    snap = parse_text(text)
    threads = snap.processes[0].threads
    assert [t.name for t in threads] == ["main thread", "faulthandler", "Timer thread"]
    assert [f.function for f in threads[0].frames] == [
        "__psynch_cvwait", "PyThread_acquire_lock_timed", "cancel_dump_traceback_later",
        "faulthandler_cancel_dump_traceback_later_py"]
    assert [f.function for f in threads[2].frames][:2] == ["take_gil", "PyEval_RestoreThread"]
    # the faulthandler thread's dumper, where the author stopped writing, is no fault: the main
    # thread's wait (CPython's lock, a condition variable on macOS) is the answer
    assert text_verdict(text, db)[1] == "lock"


@pytest.mark.parametrize("prose", [
    "Steps: build -> install -> run\nthen it hangs\n",  # prose with arrows on one line
    "main thread   foo\n              bar baz\n",  # no arrow at all
    "a -> b\n",  # one short line
])
def test_arrows_in_prose_are_no_call_list(prose):
    with pytest.raises(InputError):
        parse_text(prose)


def test_module_function_lines_outermost_first(db):
    text = real_text("cpython/cpython-96071-1.txt")
    frames = [f.function for f in parse_text(text).processes[0].threads[0].frames]
    assert frames[0] == "HEAD_LOCK" and frames[-1] == "PyGILState_Ensure" and frames.count("HEAD_LOCK") == 2
    # the innermost PyGILState_Ensure is still making its thread state: it waits on the HEAD lock, not
    # for the GIL
    assert text_verdict(text, db)[1] == "lock"


def test_a_scripts_calls_are_no_call_list():
    # near miss: a script calling functions one after another (no ``module:`` before them)
    with pytest.raises(InputError):
        parse_text("setup()\nload_data()\ntrain()\nevaluate()\nsave()\n")


def test_sos_eestack(db):
    text = real_text("pythonnet/pythonnet-884-1.txt")
    snap = parse_text(text)
    t = snap.processes[0].threads[0]
    names = [f.function for f in t.frames]
    assert names[:3] == ["Py_DecRef", "DomainBoundILStubClass.IL_STUB_PInvoke", "Python.Runtime.Runtime.XDecref"]
    assert t.frames[0].library == "libpython3.6m.so"
    assert "Python.Runtime.Runtime.Initialize" in names


def test_sos_clrstack_rows():
    text = ("OS Thread Id: 0x1a2c (3)\n"
            "        Child SP               IP Call Site\n"
            "000000D5F0F7E8A8 00007ffd7a0c6f44 [HelperMethodFrame_1OBJ: 000000d5f0f7e8a8] "
            "System.Threading.Monitor.ObjWait(Int32, System.Object)\n"
            "000000D5F0F7E9D0 00007ffd1b8a3e62 System.Threading.Monitor.Wait(System.Object, Int32)\n"
            "000000D5F0F7EA40 00007ffd1b8a1111 Program.Main(System.String[])\n")
    t = parse_text(text).processes[0].threads[0]
    assert t.tid == 0x1A2C
    assert [f.function for f in t.frames] == ["System.Threading.Monitor.ObjWait", "System.Threading.Monitor.Wait",
                                              "Program.Main"]


def test_sos_header_without_rows_is_no_stack():
    # near miss: the table's header and prose, no row
    with pytest.raises(InputError):
        parse_text("Child-SP         RetAddr          Caller, Callee\nnothing was printed after this\n")


def test_a_condition_variable_wait_outside_cpythons_lock_stays_a_condition(db):
    # near miss of the macOS lock: __psynch_cvwait under a C++ condition variable's wait
    text = ("Thread 2 (Thread 0x7f0 (LWP 12)):\n"
            "#0  0x00007ff in __psynch_cvwait ()\n"
            "#1  0x00007ff in _pthread_cond_wait ()\n"
            "#2  0x00007ff in std::condition_variable::wait(std::unique_lock<std::mutex>&) ()\n"
            "#3  0x00007ff in worker_loop ()\n")
    assert text_verdict(text, db)[1] == "condition"
    lock = text.replace("std::condition_variable::wait(std::unique_lock<std::mutex>&)", "PyThread_acquire_lock_timed")
    assert text_verdict(lock, db)[1] == "lock"


def test_take_gil_under_ensure_is_still_the_gil(db):
    # near miss of the thread-state rule: PyGILState_Ensure that reached take_gil waits for the GIL
    text = ("Thread 3 (Thread 0x7f1 (LWP 13)):\n"
            "#0  0x00007ff in futex_wait ()\n"
            "#1  0x00007ff in pthread_cond_timedwait ()\n"
            "#2  0x00007ff in take_gil ()\n"
            "#3  0x00007ff in PyEval_RestoreThread ()\n"
            "#4  0x00007ff in PyGILState_Ensure ()\n"
            "#5  0x00007ff in callback ()\n")
    assert text_verdict(text, db)[1] == "gil"
    making = text.replace("take_gil", "new_threadstate").replace("PyEval_RestoreThread", "PyThreadState_New")
    making = making.replace("pthread_cond_timedwait", "pthread_mutex_lock")
    assert text_verdict(making, db)[1] == "lock"
