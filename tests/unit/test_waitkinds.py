"""Wait classification from native frame names, on stacks recorded from real processes
(pyenv and Debian's stripped python3.11, glibc with and without debug info)."""

from __future__ import annotations

from hanganalyze_gdbext.waitkinds import bare, classify

FUTEX = ["__futex_abstimed_wait_common64", "__futex_abstimed_wait_common", "__GI___futex_abstimed_wait_cancelable64"]


def test_gil_wait_on_stripped_python_is_found_through_exported_names():
    # Debian python3.11: take_gil is "??" (None), PyEval_RestoreThread is exported
    names = FUTEX + ["__pthread_cond_wait_common", "___pthread_cond_timedwait64", None, "PyEval_RestoreThread",
                     "PyGILState_Ensure", None, None, "wf_hold_then_call", "_PyEval_EvalFrameDefault"]
    assert classify(names) == ("gil", 6, 11)


def test_gil_wait_with_debug_info_decides_at_take_gil():
    names = FUTEX + ["__pthread_cond_wait_common", "___pthread_cond_timedwait64", "PyCOND_TIMEDWAIT", "take_gil",
                     "PyEval_RestoreThread"]
    assert classify(names)[:2] == ("gil", 6)


def test_mutex_with_and_without_libc_debug_info():
    dbg = ["futex_wait", "__GI___lll_lock_wait", "lll_mutex_lock_optimized", "___pthread_mutex_lock",
           "__gthread_mutex_lock", "std::mutex::lock", "poster"]
    assert classify(dbg)[:2] == ("mutex", 1)
    stripped = [None, "pthread_mutex_lock", None, None]
    assert classify(stripped)[:2] == ("mutex", 1)
    assert classify(["__pthread_mutex_clocklock_common", "main"])[0] == "mutex"
    assert classify(["pthread_mutex_unlock", "main"])[0] is None


def test_rwlock_join_condvar():
    assert classify(FUTEX + ["__pthread_rwlock_wrlock_full64", "___pthread_rwlock_wrlock", "rwwriter"])[:2] == (
        "rwlock", 3)
    assert classify([None, None, "std::thread::join()", None])[:2] == ("join", 2)
    assert classify(FUTEX + ["__pthread_clockjoin_ex", "std::thread::join()"])[:2] == ("join", 3)
    assert classify(FUTEX + ["__pthread_cond_wait_common", "___pthread_cond_wait", "worker"])[:2] == ("condvar", 3)


def test_python_lock_stops_at_the_eval_frame():
    names = FUTEX + ["do_futex_wait", "__new_sem_wait_slow64", "PyThread_acquire_lock_timed", None, None,
                     "PyObject_Vectorcall", "_PyEval_EvalFrameDefault", "_PyFunction_Vectorcall"]
    assert classify(names) == ("pylock", 5, 9)


def test_sleeping_thread_is_not_waiting():
    names = ["__GI___clock_nanosleep", None, None, "PyObject_Vectorcall", "_PyEval_EvalFrameDefault",
             "_PyEval_EvalFrameDefault"]
    assert classify(names) == (None, None, 4)
    assert classify([]) == (None, None, None)


def test_a_lock_taken_above_python_code_is_not_blamed():
    # a condvar wait inside Python's eval loop, with a mutex frame *above* the eval frame
    names = ["futex_wait", "pthread_cond_wait", "_PyEval_EvalFrameDefault", "pthread_mutex_lock"]
    assert classify(names) == ("condvar", 1, 2)


def test_bare_qualnames():
    assert bare("Condition.wait") == "wait" and bare("wait") == "wait" and bare(None) == ""
