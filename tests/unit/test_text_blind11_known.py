"""The mechanisms behind open round 11's known-bug misses (manifest-blind11.yaml), on the round's real
pastes and near misses they must not claim:

* a single thread in CPython's drop_gil, called by the eval loop itself (<= 3.8), waiting for the GIL's
  forced switch: the thread that asked for the GIL is not in the process, so the process is a child of
  a raw fork / clone that inherited the request (fork-child-inherited-lock); 3.9+'s drop_gil under
  eval_frame_handle_pending has an exit race with the same look (python/cpython#96387), not claimed;
* a static constructor run by dlopen (the loader lock held) that joins a thread
  (dynamic-loader-lock-deadlock), read from a call chain an issue's author wrote by hand, outermost
  call first and indented a step a line (the ``call-chain`` text format);
* the interpreter's exit joining a non-daemon thread, seen in native frames only on CPython 3.13+
  (ThreadHandle_join / PyEvent_WaitTimed under wait_for_thread_shutdown), one thread shown.
"""

from __future__ import annotations

import re

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import calltree, parse_text
from hanganalyze.acquire.text.common import clean_lines


def sigs(snap) -> dict:
    return {f.signature: f.confidence for f in snap.findings}


# --- a fork / clone child handing the GIL to a parent thread -------------------------------------

@pytest.mark.parametrize("path", ["benchexec/benchexec-435-1.txt",  # a clone() child (CPython 3.6)
                                  "grpc/grpc-18075-1.txt"])  # Python run in an atfork child handler (3.7)
def test_a_single_thread_in_the_eval_loops_drop_gil_is_a_fork_child(db, path):
    snap, wait = text_verdict(real_text(path), db)
    found = sigs(snap)
    assert "fork-child-inherited-lock" in found and found["fork-child-inherited-lock"] < 0.8
    assert wait == "gil"


@pytest.mark.parametrize("path", ["cpython/cpython-91414-1.txt",  # 3.9: under eval_frame_handle_pending
                                  "cpython/cpython-96387-1.txt"])  # 3.9 exit race, its caller cut
def test_drop_gil_of_cpython_39_or_an_unseen_caller_is_not_claimed(db, path):
    snap, wait = text_verdict(real_text(path), db)
    assert "fork-child-inherited-lock" not in sigs(snap) and wait == "gil"


def test_drop_gil_with_another_thread_shown_is_not_a_fork_child(db):
    text = real_text("benchexec/benchexec-435-1.txt")
    two = ("Thread 2 (Thread 0x7fcf01 (LWP 12))\n"
           "#0  0x00007fcf09d7b9f3 in pthread_cond_timedwait@@GLIBC_2.3.2 () from /lib/libpthread.so.0\n"
           "#1  0x000000000052a111 in take_gil (tstate=0x23c0000) at ../Python/ceval_gil.h:224\n"
           "#2  0x000000000052a222 in PyEval_RestoreThread (tstate=0x23c0000) at ../Python/ceval.c:369\n\n"
           "Thread 1 (Thread 0x7fcf02 (LWP 11))\n" + text)
    snap, _ = text_verdict(two, db)
    assert len(snap.processes[0].threads) == 2
    assert "fork-child-inherited-lock" not in sigs(snap)


def test_drop_gil_under_the_pending_calls_handler_is_not_claimed(db):
    text = real_text("benchexec/benchexec-435-1.txt")
    handler = "#1  0x000000000052a500 in eval_frame_handle_pending (tstate=0x23b7480) at Python/ceval.c:882\n"
    moved = re.sub(r"(#1 .*\n)", lambda m: m.group(1) + handler, text, count=1)
    assert moved != text
    assert "fork-child-inherited-lock" not in sigs(text_verdict(moved, db)[0])


# --- a hand-written call chain: a constructor under dlopen joins a thread ------------------------

def test_the_hand_written_chain_is_read_outermost_first(db):
    snap = parse_text(real_text("pytorch/pytorch-189110-1.txt"))
    (thread,) = snap.processes[0].threads
    names = [f.function for f in thread.frames]
    assert names[0] == "std::thread::join" and names[-1] == "_dl_open"
    assert names.index("call_init") == names.index("_dl_init") - 1  # "_dl_init -> call_init"
    assert thread.frames[names.index("_GLOBAL__sub_I_numa_wrapper.cpp")].library == "libtorch_rocshmem.so"
    assert "__GI_exit" in names and "(status=1)" not in " ".join(names)


def test_a_constructor_under_dlopen_joining_a_thread_is_the_loader_lock_deadlock(db):
    snap, wait = text_verdict(real_text("pytorch/pytorch-189110-1.txt"), db)
    found = sigs(snap)
    assert "dynamic-loader-lock-deadlock" in found and found["dynamic-loader-lock-deadlock"] < 0.8
    assert wait == "join"  # what the stuck thread waits for; the loader lock is what the joined one waits for


def _without(text: str, *names: str) -> str:
    out = "\n".join(x for x in text.splitlines() if not any(n in x for n in names)) + "\n"
    assert out != text
    return out


def test_a_join_at_exit_outside_a_constructor_or_outside_dlopen_is_not_claimed(db):
    text = real_text("pytorch/pytorch-189110-1.txt")
    # exit() called by the program itself: no constructor, no loader lock
    no_ctor = _without(text, "_dl_open", "_dl_init", "_GLOBAL__sub_I", "NUMAWrapper")
    snap, wait = text_verdict(no_ctor, db)
    assert "dynamic-loader-lock-deadlock" not in sigs(snap) and wait == "join"
    # a constructor run at program start (no dlopen under it): no loader lock held
    no_dlopen = _without(text, "_dl_open", "_dl_init")
    assert "dynamic-loader-lock-deadlock" not in sigs(text_verdict(no_dlopen, db)[0])


@pytest.mark.parametrize("text", [
    # code climbs but its lines are statements, not bare symbols
    "def f(x):\n    if x:\n        for y in x:\n            while y:\n                y = g(y)\n",
    # YAML keys and prose bullets
    "a:\n  b:\n    c:\n      d:\n        e: 1\n",
    "- first point\n  - a detail\n    - another detail\n      - more\n        - the last\n",
    # a symbol chain of four lines only
    "main\n run\n  step\n   wait\n",
])
def test_no_staircase_of_bare_symbols_is_no_call_chain(text):
    assert calltree.score(clean_lines(text)) == 0


# --- the interpreter's exit joining a non-daemon thread: CPython 3.13+ native frames --------------

#: The main thread of a CPython 3.13.15 process whose non-daemon thread waits on an Event forever,
#: read live with hanganalyze --pid and written as gdb's `bt` prints it (its Python frame left out).
BT_313 = """\
#0  __futex_abstimed_wait_common64 () at futex-internal.c:57
#1  0x00007f77edca3f16 in __futex_abstimed_wait_common () at futex-internal.c:87
#2  0x00007f77edcaed90 in __new_sem_wait_slow64.constprop.0 () at sem_waitcommon.c:183
#3  _PySemaphore_PlatformWait () at Python/parking_lot.c:151
#4  0x00007f77ee034552 in _PySemaphore_Wait () at Python/parking_lot.c:222
#5  0x00007f77ee034713 in _PyParkingLot_Park () at Python/parking_lot.c:327
#6  0x00007f77ee02ec09 in PyEvent_WaitTimed () at Python/lock.c:301
#7  0x00007f77ee0b378a in ThreadHandle_join () at ./Modules/_threadmodule.c:513
#8  0x00007f77ee0b3956 in thread_shutdown () at ./Modules/_threadmodule.c:2367
#9  0x00007f77edf2762c in cfunction_vectorcall_NOARGS () at Objects/methodobject.c:483
#10 _PyObject_VectorcallTstate () at ./Include/internal/pycore_call.h:168
#11 0x00007f77edee39b4 in PyObject_Vectorcall () at Objects/call.c:327
#12 0x00007f77edfe0e04 in _PyEval_EvalFrameDefault () at Python/generated_cases.c.h:813
#13 _PyEval_EvalFrame () at ./Include/internal/pycore_ceval.h:120
#14 0x00007f77edfecdf0 in _PyEval_Vector () at Python/ceval.c:1820
#15 0x00007f77edee36ac in _PyFunction_Vectorcall () at Objects/call.c:413
#16 _PyObject_VectorcallTstate () at ./Include/internal/pycore_call.h:168
#17 0x00007f77edee3a6b in PyObject_VectorcallMethod () at Objects/call.c:857
#18 PyObject_CallMethodNoArgs () at ./Include/cpython/abstract.h:65
#19 0x00007f77ee037180 in wait_for_thread_shutdown () at Python/pylifecycle.c:3468
#20 0x00007f77ee03aef8 in _Py_Finalize () at Python/pylifecycle.c:2037
#21 0x00007f77ee03b2b2 in Py_FinalizeEx () at Python/pylifecycle.c:2261
#22 0x00007f77ee063022 in Py_RunMain () at Modules/main.c:836
#23 0x00007f77ee063658 in pymain_main () at Modules/main.c:864
"""


def test_the_313_exit_join_in_native_frames_is_the_nondaemon_thread_hang(db):
    snap, wait = text_verdict(BT_313, db)
    assert "python-shutdown-nondaemon-threads" in sigs(snap) and wait == "join"


def test_a_313_join_from_the_program_is_not_the_exit(db):
    # the same join called by the script (t.join() at module level), not by wait_for_thread_shutdown
    text = BT_313.split("#19 ")[0] + ("#19 0x00007f77ee0600aa in run_eval_code_obj () at Python/pythonrun.c:1291\n"
                                       "#20 0x00007f77ee063022 in Py_RunMain () at Modules/main.c:836\n")
    text = text.replace("thread_shutdown", "ThreadHandle_join_method")
    snap, wait = text_verdict(text, db)
    assert "python-shutdown-nondaemon-threads" not in sigs(snap) and wait == "join"
