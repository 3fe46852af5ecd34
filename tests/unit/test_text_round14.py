"""Open round 14 (general, non-ML dumps: manifest-blind14.yaml): the mechanisms behind its blind
misses, each on the round's real paste and a near miss it must not claim: a `` : `` margin on every
line of a stack dump, an ``info threads`` row the terminal wrapped (the GIL's futex on its second
line), gRPC core's shutdown waiting for its own threads (a join), a headerless stack the text ends
on (a thread dumper's listing: its innermost line is where it stood), a "no worker thread" rule on
a `bt` of one thread (the others were never printed), and a single thread waiting for the dynamic
loader's lock in dlopen (a forked child's inherited lock)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.gutter import strip_gutter
from hanganalyze.errors import InputError

real = real_text


def analyzed(text: str, db):
    return text_verdict(text, db)


def found(snap) -> dict:
    return {f.signature: f.confidence for f in snap.findings}


# --- a margin on every line ---------------------------------------------------------------------

def test_a_colon_margin_on_every_line_is_no_part_of_the_dump(db):
    """kafka-python 2077: refused before (no line started the way a traceback's does)."""
    text = real("kafka-python/kafka-python-2077-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert [f.function for f in t.frames][:2] == ["_handle_heartbeat_failure", "_call_backs"]
    assert t.frames[0].source == "with self.coordinator._lock:"
    assert analyzed(text, db)[1] == "lock"


def test_a_margin_some_lines_lack_is_kept():
    lines = [" : one", " : two", "three", " : four"]
    assert strip_gutter(lines) is None
    assert strip_gutter([" : a", " | b", " : c"]) is None  # two different marks
    assert strip_gutter([" : a", " : b"]) is None  # too few lines for a column
    assert strip_gutter([" : a", "", " :", " : b"]) == ["a", "", "", "b"]


def test_prose_with_colons_is_still_no_dump():
    with pytest.raises(InputError):
        parse_text(" : the worker stopped\n : nothing in the log\n : we restarted it\n")


# --- an info threads row the terminal wrapped --------------------------------------------------

def test_a_wrapped_info_threads_row_names_the_gil(db):
    """uWSGI 2040: the GIL's ``<gil_cond+40>`` is on the row's second line; before, the row's frame
    was ``futex_abstimed_wait_cancelable (private=<optimized out>,`` and the triage said "lock"."""
    text = real("uwsgi/uwsgi-2040-1.txt")
    proc = parse_text(text).processes[0]
    assert [t.frames[0].function for t in proc.threads] == ["futex_abstimed_wait_cancelable",
                                                            "futex_wait_cancelable"]
    assert proc.threads[0].waits is not None and proc.threads[0].waits.kind == "gil"
    assert proc.threads[1].waits is None  # g_cv_wait is no GIL
    assert analyzed(text, db)[1] == "gil"


def test_a_wrapped_row_does_not_swallow_the_next_row():
    text = ("(gdb) info threads\n"
            "  Id   Target Id         Frame\n"
            "* 1    Thread 0x7f1 (LWP 11) \"app\" 0x00007f1 in futex_wait_cancelable (private=<optimized out>,\n"
            "  2    Thread 0x7f2 (LWP 12) \"app\" 0x00007f2 in epoll_wait (epfd=3, events=0x1, maxevents=8, "
            "timeout=-1) at epoll_wait.c:30\n")
    proc = parse_text(text).processes[0]
    assert [t.tid for t in proc.threads] == [11, 12]
    assert proc.threads[1].frames[0].function == "epoll_wait"
    assert all(t.waits is None for t in proc.threads)


# --- gRPC core's shutdown waits for its threads ---------------------------------------------------

def test_grpc_shutdown_waiting_for_its_timer_threads_is_a_join(db):
    """gRPC 17001: Channel.close -> grpc_shutdown -> stop_threads waits on g_cv_shutdown; before,
    "a condition nobody signals"."""
    assert analyzed(real("grpc/grpc-17001-1.txt"), db)[1] == "join"


def test_a_condition_wait_elsewhere_in_grpc_stays_a_condition(db):
    text = ("Thread 3 (Thread 0x7f21b7012700 (LWP 12486)):\n"
            "#0  pthread_cond_wait@@GLIBC_2.3.2 () at pthread_cond_wait.S:185\n"
            "#1  0x00007f219d90f952 in gpr_cv_wait (cv=0x7f2, mu=0x7f3, abs_deadline=...) at sync_posix.cc:79\n"
            "#2  0x00007f219d93d737 in grpc_core::Executor::ThreadMain (arg=0x1) at executor.cc:200\n")
    assert analyzed(text, db)[1] == "condition"


# --- a headerless stack the text ends on ----------------------------------------------------------

def test_a_headerless_stack_the_text_ends_on_reads_its_innermost_line(db):
    text = ('  File "/app/worker.py", line 10, in run\n'
            "    self.step()\n"
            '  File "/app/worker.py", line 20, in step\n'
            "    with self.state_lock:\n")
    t = parse_text(text).processes[0].threads[0]
    assert not any(n.startswith("Python traceback") for n in t.notes)
    assert analyzed(text, db)[1] == "lock"


def test_a_headed_traceback_cut_before_its_exception_keeps_the_old_reading(db):
    text = ("Traceback (most recent call last):\n"
            '  File "/app/worker.py", line 10, in run\n'
            "    self.step()\n"
            '  File "/app/worker.py", line 20, in step\n'
            "    with self.state_lock:\n")
    assert analyzed(text, db)[1] != "lock"


def test_a_headerless_stack_that_ends_in_an_exception_raised_there(db):
    text = ('  File "/app/worker.py", line 10, in run\n'
            "    self.step()\n"
            '  File "/app/worker.py", line 20, in step\n'
            "    with self.state_lock:\n"
            "RuntimeError: the state is gone\n")
    assert analyzed(text, db)[1] != "lock"


# --- "no worker thread" in a bt of one thread -----------------------------------------------------

BT = real_text("openblas/openblas-937-1.txt")


def test_a_bt_of_one_thread_does_not_prove_the_pool_threads_gone(db):
    """OpenBLAS 937: a caller spinning in exec_blas_async_wait, no fork in the report; before,
    openblas-fork at full confidence from the absence of blas_thread_server threads nobody printed."""
    snap, _ = analyzed(BT, db)
    conf = found(snap).get("openblas-fork")
    assert conf is not None and conf < 0.8
    f = next(f for f in snap.findings if f.signature == "openblas-fork")
    assert "absence is not observed" in f.summary


def test_the_same_thread_listed_alone_by_thread_apply_all_keeps_its_confidence(db):
    text = "Thread 1 (Thread 0x7fb70e1b0700 (LWP 4242)):\n" + BT.split("\n", 1)[1]
    snap, _ = analyzed(text, db)
    assert found(snap).get("openblas-fork", 0) >= 0.8


# --- a single thread waiting for the loader's lock in dlopen ---------------------------------------

ANSIBLE = real_text("ansible/ansible-59642-1.txt")


def test_a_single_thread_waiting_for_the_loader_lock_is_an_inherited_lock(db):
    """Ansible 59642: a forked worker loading libnss_compat blocks on _rtld_global's lock."""
    snap, wait = analyzed(ANSIBLE, db)
    conf = found(snap).get("fork-child-inherited-lock")
    assert conf is not None and 0.5 <= conf < 0.8
    assert wait == "loader-lock"


def test_the_loader_wait_with_its_holder_in_view_is_no_inherited_lock(db):
    holder = ("Thread 2 (Thread 0x7f56a0000700 (LWP 77)):\n"
              "#0  0x00007f56aa5e0000 in __lll_lock_wait () from /lib64/libpthread.so.0\n"
              "#1  0x00007f56aa5e0001 in pthread_mutex_lock () from /lib64/libpthread.so.0\n"
              "#2  0x00007f56aa5e0002 in my_ctor_lock () from /opt/lib/libplugin.so\n"
              "#3  0x00007f56aa5e0003 in call_init (l=0x1) at dl-init.c:72\n"
              "#4  0x00007f56aa5e0004 in _dl_init (main_map=0x1) at dl-init.c:119\n"
              "#5  0x00007f56aa5e0005 in dl_open_worker (a=0x1) at dl-open.c:758\n")
    text = holder + "\nThread 1 (Thread 0x7f56ab000740 (LWP 76)):\n" + ANSIBLE  # gdb lists the newest first
    assert len(parse_text(text).processes[0].threads) == 2
    assert "fork-child-inherited-lock" not in found(analyzed(text, db)[0])


def test_a_constructor_waiting_under_dlopen_is_not_the_loader_wait(db):
    text = ("#0  0x00007f56aa5e0000 in __lll_lock_wait () from /lib64/libpthread.so.0\n"
            "#1  0x00007f56aa5e0001 in pthread_mutex_lock () from /lib64/libpthread.so.0\n"
            "#2  0x00007f56aa5e0002 in my_ctor_lock () from /opt/lib/libplugin.so\n"
            "#3  0x00007f56aa5e0003 in call_init (l=0x1) at dl-init.c:72\n"
            "#4  0x00007f56aa5e0004 in _dl_init (main_map=0x1) at dl-init.c:119\n"
            "#5  0x00007f56aa5e0005 in dl_open_worker (a=0x1) at dl-open.c:758\n")
    assert "fork-child-inherited-lock" not in found(analyzed(text, db)[0])
