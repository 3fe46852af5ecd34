"""The mechanisms behind open round 10's misses told by frames and source lines (manifest-blind10.yaml),
each on the round's real paste and a near miss it must not claim: a join read as the condition
variable or lock it waits in (boost's join_noexcept, a paste without addresses, the join-vs-lock
deadlock), a pipe send on a full pipe, a launcher waiting for its ranks, and a lock file's retry
loop whose cause one stack cannot tell (a stale lock, a live holder, a file system without locks)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.sourcewait import line_category
from hanganalyze.analyze.threadchoice import join_holds_lock
from hanganalyze.names import normalize_function

real = real_text


def analyzed(text: str, db):
    return text_verdict(text, db)


def found(snap) -> dict:
    return {f.signature: f.confidence for f in snap.findings}


def pyspy(*frames: str) -> str:
    body = "".join("    %s\n" % f for f in frames)
    return ('Process 10: python app.py\nPython v3.10.12 (/usr/bin/python3.10)\n\n'
            'Thread 10 (idle): "MainThread"\n' + body)


# --- a join, whatever it waits in ---------------------------------------------------------------

def test_boosts_join_noexcept_is_a_join_not_its_condition_variable(db):
    """steem: the main thread in boost::thread::join_noexcept, which waits on the thread's condition
    variable; the trailing-qualifier strip cut the name to ``join_`` so no join pattern saw it."""
    assert analyzed(real("steem/steem-3583-1.txt"), db)[1] == "join"


def test_a_condition_variable_under_no_join_stays_a_condition(db):
    text = ("#0  0x00007f in pthread_cond_wait () from /lib64/libpthread.so.0\n"
            "#1  0x000000000183a913 in boost::condition_variable::wait(boost::unique_lock<boost::mutex>&) ()\n"
            "#2  0x000000000204e43d in app::WorkQueue::pop() ()\n"
            "#3  0x000000000116e564 in main ()\n")
    assert analyzed(text, db)[1] == "condition"


def test_a_qualifier_is_stripped_only_as_a_word_of_its_own():
    assert normalize_function("boost::thread::join_noexcept()") == "boost::thread::join_noexcept"
    assert normalize_function("is_const") == "is_const"
    assert normalize_function("f(int) const noexcept") == "f"
    assert normalize_function("g(int)const&") == "g"


def test_a_frame_without_its_address_keeps_its_function_name(db):
    """trick: ``#0  in __pthread_timedjoin_ex () from lib`` (the paster took the addresses out):
    the function was read as ``in __pthread_timedjoin_ex`` and matched no list."""
    text = real("trick/trick-1656-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames[:2]] == ["__pthread_timedjoin_ex", "Trick::ThreadBase::join_thread"]
    assert analyzed(text, db)[1] == "join"


@pytest.mark.parametrize("path", ["microprofile/microprofile-19-1.txt", "trick/trick-1656-1.txt"])
def test_the_join_vs_lock_deadlock_is_the_joins(path, db):
    """The main thread joins a thread that waits for a lock, and no other thread is there to hold
    it: the joiner holds it (the shutdown's join under the lock), so the join ranks with the lock
    and the main thread's wait is the answer."""
    snap, wait = analyzed(real(path), db)
    assert wait == "join"
    waits = sorted(t.wait for f in snap.findings if f.signature == "triage" for t in f.triage.threads)
    assert waits == ["join", "lock"]


JOIN_AND_LOCK = """\
Thread 2 (Thread 0x7f4aded35700 (LWP 21069)):
#0  0x00007f4ae132954c in __lll_lock_wait () from /usr/lib/libpthread.so.0
#1  0x00007f4ae1322000 in pthread_mutex_lock () from /usr/lib/libpthread.so.0
#2  0x00007f4ae200f000 in Server::loop () at server.cpp:40

Thread 1 (Thread 0x7f4ae2bc4740 (LWP 21048)):
#0  0x00007f4ae132133d in pthread_join () from /usr/lib/libpthread.so.0
#1  0x00007f4ae200f467 in Server::shutdown () at server.cpp:90
#2  0x00007f4ae200f500 in main () at main.cpp:10
"""


def test_a_lock_with_another_possible_holder_keeps_its_rank(db):
    """Near miss: a third thread that sleeps could hold the lock itself (a sleep under a lock): the
    lock stays the answer, as before; without it the join is."""
    assert analyzed(JOIN_AND_LOCK, db)[1] == "join"
    text = ("Thread 3 (Thread 0x7f4ad0000700 (LWP 21070)):\n"
            "#0  0x00007f4ae1330000 in nanosleep () from /usr/lib/libpthread.so.0\n"
            "#1  0x00007f4ae200f000 in Flusher::run () at flusher.cpp:10\n\n") + JOIN_AND_LOCK
    assert analyzed(text, db)[1] == "lock"


def test_join_holds_lock_needs_an_unknown_owner_and_no_other_holder():
    rank = {"join": 2, "lock": 1, "idle": 6, "sleep": 4}
    assert join_holds_lock([("join", None), ("lock", None)], rank)
    assert join_holds_lock([("join", None), ("lock", None), ("idle", None)], rank)
    assert not join_holds_lock([("join", None), ("lock", 42)], rank)  # memory names the holder
    assert not join_holds_lock([("join", None), ("lock", None), ("sleep", None)], rank)
    assert not join_holds_lock([("lock", None), ("lock", None)], rank)


def test_pythons_join_over_its_tstate_lock_is_a_join(db):
    """threading.Thread.join waits in _wait_for_tstate_lock's lock: a join; the user's own line
    ``t.join()`` with nothing below (a Ctrl-C traceback) is one too."""
    text = pyspy("_wait_for_tstate_lock (threading.py:1116)", "join (threading.py:1096)", "main (app.py:20)")
    assert analyzed(text, db)[1] == "join"
    tb = ('Traceback (most recent call last):\n  File "/home/u/app.py", line 20, in main\n'
          "    t.join()\nKeyboardInterrupt\n")
    assert analyzed(tb, db)[1] == "join"


@pytest.mark.parametrize("join", ["_Thrd_join", "std::thread::JoinHandle<T>::join",
                                  "std::sys::pal::unix::thread::Thread::join"])
def test_other_runtimes_joins_are_joins(join, db):
    """MSVC's std::thread::join and Rust's JoinHandle::join wait in a futex or an OS wait below."""
    text = ("#0  0x00007f in syscall () from /lib64/libc.so.6\n#1  0x0000 in %s ()\n"
            "#2  0x0000 in app::shutdown () at app.cpp:9\n#3  0x0000 in main ()\n" % join)
    assert analyzed(text, db)[1] == "join"


def test_cpython_313s_join_over_its_event_is_a_join(db):
    """Python 3.13+: Thread.join waits on the handle's event (the parking lot's semaphore, a futex)
    under ThreadHandle_join; native frames only (no Python frames merged) still say join, and the
    same semaphore under no join stays a lock."""
    inner = ("#0  0x00007f in syscall () from /lib64/libc.so.6\n"
             "#1  0x0000 in _PySemaphore_PlatformWait () from /usr/lib/libpython3.13.so.1.0\n"
             "#2  0x0000 in _PySemaphore_Wait () from /usr/lib/libpython3.13.so.1.0\n"
             "#3  0x0000 in _PyParkingLot_Park () from /usr/lib/libpython3.13.so.1.0\n"
             "#4  0x0000 in PyEvent_WaitTimed () from /usr/lib/libpython3.13.so.1.0\n")
    outer = "#6  0x0000 in _PyEval_EvalFrameDefault () from /usr/lib/libpython3.13.so.1.0\n"
    assert analyzed(inner + "#5  0x0000 in ThreadHandle_join () from /usr/lib/libpython3.13.so.1.0\n" + outer,
                    db)[1] == "join"
    assert analyzed(inner + "#5  0x0000 in PyMutex_Lock () from /usr/lib/libpython3.13.so.1.0\n" + outer,
                    db)[1] == "lock"


def test_a_condition_in_the_programs_own_code_is_no_join(db):
    assert analyzed(pyspy("wait (threading.py:320)", "get (app.py:20)", "main (app.py:30)"), db)[1] == "condition"
    tb = ('Traceback (most recent call last):\n  File "/home/u/app.py", line 20, in main\n'
          "    with self._cond:\nKeyboardInterrupt\n")
    assert analyzed(tb, db)[1] == "lock"


# --- a pipe send on a full pipe -----------------------------------------------------------------

def test_a_connection_send_on_a_full_pipe_is_the_pipes_wait(db):
    """airflow: py-spy shows the scheduler in multiprocessing's Connection.send (_send_bytes ->
    _send) while the reader is itself blocked sending: a pipe another process should drain."""
    assert analyzed(real("airflow/airflow-7935-1.txt"), db)[1] == "queue"


def test_an_http_send_is_no_pipe(db):
    text = pyspy("sendall (socket.py:720)", "send (http/client.py:999)", "fetch (app.py:30)")
    assert analyzed(text, db)[1] == "network"
    assert analyzed(pyspy("compute (app.py:20)", "main (app.py:30)"), db)[1] == "runs"  # py-spy's idle, but it runs


# --- a launcher waiting for its ranks -------------------------------------------------------------

def test_the_deepspeed_runner_waits_for_its_child(db):
    """accelerate: the `deepspeed` runner interrupted in main at ``result.wait()`` (a Popen): the
    launcher only starts the ranks and waits for them."""
    assert analyzed(real("accelerate/accelerate-2724-1.txt"), db)[1] == "child"


def test_the_elastic_agents_monitoring_loop_waits_for_its_workers(db):
    text = pyspy("_invoke_run (torch/distributed/elastic/agent/server/api.py:870)",
                 "run (torch/distributed/elastic/agent/server/api.py:696)",
                 "launch_agent (torch/distributed/launcher/api.py:254)", "main (torch/distributed/run.py:879)")
    assert analyzed(text, db)[1] == "child"


def test_torch_spawns_join_waits_for_its_children_not_a_queue(db):
    """ProcessContext.join waits on the children's sentinels with multiprocessing.connection.wait;
    the same wait under a program's own function stays the pipe's."""
    text = pyspy("select (selectors.py:415)", "wait (multiprocessing/connection.py:947)",
                 "join (torch/multiprocessing/spawn.py:118)", "start_processes (torch/multiprocessing/spawn.py:197)",
                 "main (train.py:40)")
    assert analyzed(text, db)[1] == "child"
    text = pyspy("select (selectors.py:415)", "wait (multiprocessing/connection.py:947)",
                 "next_result (app.py:12)", "main (app.py:40)")
    assert analyzed(text, db)[1] == "queue"


def test_a_torchrun_stack_cut_above_the_agent_is_no_child_wait(db):
    """Near miss (pai-megatron, a real torchrun traceback cut at agent.run): the frames that lead
    to the agent do not say whether it is in its rendezvous or its monitoring loop."""
    assert analyzed(real("pai-megatron/pai-megatron-patch-468-1.txt"), db)[1] != "child"


# --- a lock file's retry loop -----------------------------------------------------------------

def test_an_flock_retry_loop_is_a_file_lock_that_names_no_single_cause(db):
    """datasets: the vendored filelock's _acquire, whose flock fails with ENOLCK on a file system
    without locks, so the loop retries forever: a file-lock wait, and the lock-file finding names the
    causes it cannot tell apart instead of a confident stale lock."""
    snap, wait = analyzed(real("huggingface/datasets-1672-1.txt"), db)
    assert wait == "file-lock"
    f = next(f for f in snap.findings if f.signature == "stale-file-lock")
    assert f.confidence < 0.8
    assert "ENOLCK" in f.cause and "live holder" in f.cause and "stale" in f.cause


def test_a_plain_lock_file_stays_a_confident_stale_lock(db):
    """Near miss: torch's FileBaton polls a plain file that outlives a killed build: still the
    stale-or-held lock file, confidently."""
    assert found(analyzed(real("deepspeed/deepspeedexamples-302-1.txt"), db)[0]).get("stale-file-lock", 0) >= 0.8


def test_filelocks_sleep_is_the_file_lock_and_a_plain_sleep_is_not(db):
    snap, wait = analyzed(pyspy("acquire (filelock/_api.py:332)", "download (app.py:30)"), db)
    assert wait == "file-lock" and found(snap)["stale-file-lock"] < 0.8
    snap, wait = analyzed(pyspy("sleep (time.py:1)", "poll_until_ready (app.py:20)", "main (app.py:30)"), db)
    assert wait == "sleep" and "stale-file-lock" not in found(snap)


def test_a_lock_call_on_the_source_line_is_a_file_lock():
    assert line_category("fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)") == "file-lock"
    assert line_category("fcntl.fcntl(fd, fcntl.F_SETLKW, data)") == "file-lock"
    assert line_category("msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)") == "file-lock"
    assert line_category("flags = fcntl.fcntl(fd, fcntl.F_GETFL)") is None
