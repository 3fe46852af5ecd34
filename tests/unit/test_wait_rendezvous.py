"""Issue 32, waits from mechanisms (the rendezvous class of misses): each rule on the real paste
of tests/data/realworld and a near miss where it must not fire.

* a Python line over CPython's lock primitive names the wait built on it (gevent#2010: gdb's
  ``do_futex_wait`` with py-list's ``>339 waiter.acquire()`` is ``Condition.wait``);
* a semaphore inside the CUDA driver's unnamed frames, no caller in view, is no lock another
  thread holds (horovod#26: the other process's thread in ``ncclAllReduce`` is the answer);
* a worker's loop reading its next task is idle (vLLM's ``worker_busy_loop`` over the broadcast
  queue), the executor reading its workers' replies is a queue wait;
* a process whose paste holds no main thread (the first thread a ``threading.Thread``) proves no
  rank elsewhere, and its triage comes after a process whose main thread is in the paste
  (sglang#17941: a scheduler's helper threads, then the PP2 scheduler in gloo's receive).
"""

from __future__ import annotations

import pytest
from helpers import REPO, real_text

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze import triage
from hanganalyze.analyze.sourcewait import source_wait
from hanganalyze.analyze.threadchoice import main_missing
from hanganalyze_gdbext.model import Frame, Process, Thread

real = real_text


def analyzed(text: str, db):
    snap = pipeline.analyze(parse_text(text), db)
    tri = [f for f in snap.findings if f.signature == "triage"]
    return snap, tri


def wait_of(text: str, db) -> str:
    return analyzed(text, db)[1][0].triage.wait


# --- a Python line over the interpreter's lock primitive ---------------------------------------


def test_gdb_futex_wait_under_conditions_waiter_acquire_is_a_condition_wait(db):
    text = real("gevent/gevent-2010-1.txt")
    _snap, tri = analyzed(text, db)
    assert tri[0].triage.wait == "condition", tri[0].summary
    assert tri[0].triage.from_ == "source line"


@pytest.mark.parametrize("line, wait", [
    ("self._lock.acquire()", "lock"),      # the line says a lock: the native answer stands
    ("sys.stdout.flush()", "lock"),        # I/O over a lock wait: a buffered stream's own lock
    ("time.sleep(0.5)", "lock"),           # a sleep is not built on the lock
    ("x = compute(y)", "lock"),            # a line that names nothing
])
def test_near_miss_lines_that_do_not_name_a_wait_built_on_the_lock_keep_the_lock(db, line, wait):
    text = real("gevent/gevent-2010-1.txt").replace("waiter.acquire()\n    if __debug__", "%s\n    if __debug__" % line)
    text = text.replace(">339                    waiter.acquire()", ">339                    %s" % line)
    assert "waiter.acquire()" not in text.split(">339")[1].splitlines()[0]
    assert wait_of(text, db) == wait


def test_near_miss_an_extensions_frame_over_the_futex_keeps_the_native_answer(db):
    text = real("gevent/gevent-2010-1.txt").replace(
        "from /lib64/libpthread.so.0\n",
        "from /lib64/libpthread.so.0\n#1  0x00007f3b5e41aaaa in mylib_wait_for_slot () from /opt/app/libslots.so\n", 1)
    assert "mylib_wait_for_slot" in text
    assert wait_of(text, db) == "lock"


def test_near_miss_a_listed_frame_over_the_lock_tells_the_wait_by_its_list():
    futex = Frame(function="futex_wait", library="libc.so.6")
    wait = Frame(kind="python", function="wait", file="/usr/lib/python3.11/threading.py", line=320,
                 source="waiter.acquire()")
    get = Frame(kind="python", function="get", file="/usr/lib/python3.11/queue.py", line=171,
                source="self.not_empty.wait()")
    assert source_wait([futex, wait, get], through_lock=True) is None  # threading.py's frame list speaks
    t = Thread(tid=1, frames=[futex, wait, get])
    assert triage.classify(Process(source="text", threads=[t]), t).category.id == "queue"
    # the program's own line over the lock, no frame list's frame: the line names the wait
    own = Frame(kind="python", function="drain", file="/srv/app/jobs.py", line=12, source="done.wait()")
    assert source_wait([futex, own], through_lock=True) == ("condition", 1, "done.wait()")
    assert source_wait([futex, own]) is None  # without through_lock: a native frame innermost speaks
    own.source = "with self._lock:"  # the lock itself: the native frames say so already
    assert source_wait([futex, own], through_lock=True) is None


# --- a semaphore inside the GPU driver ------------------------------------------------------------


def test_a_semaphore_in_the_cuda_drivers_own_frames_is_no_lock(db):
    _snap, tri = analyzed(real("horovod/horovod-pr26-1.txt"), db)
    assert tri[0].triage.wait == "collective", tri[0].summary
    rows = {r.tid: r.wait for r in tri[0].triage.threads}
    assert rows == {69796: "collective", 80993: "runs"}


def _driver_stack(caller: str) -> str:
    return ("Thread 18 (Thread 0x7f69daf6c700 (LWP 80993)):\n"
            "#0  sem_wait () at ../nptl/sysdeps/unix/sysv/linux/x86_64/sem_wait.S:85\n"
            "#1  0x00007f6a4d474f07 in ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
            "#2  0x00007f6a4d3917e7 in ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1\n" + caller)


@pytest.mark.parametrize("caller, wait", [
    # the program called the driver through the runtime: a GPU wait
    ("#3  0x00007f6a4e000000 in cudaStreamSynchronize () from /usr/local/cuda/lib64/libcudart.so.8.0\n"
     "#4  0x0000000000401000 in step () at train.cc:40\n", "gpu"),
    # a semaphore a program's library waits on: a lock wait as before
    ("", None),
])
def test_near_miss_a_caller_outside_the_driver_or_a_programs_semaphore(db, caller, wait):
    text = _driver_stack(caller)
    if wait is None:
        text = text.replace("libcuda.so.1", "libworkq.so.1")
        wait = "lock"
    assert wait_of(text, db) == wait


def test_near_miss_a_mutex_inside_the_driver_is_still_a_lock(db):
    text = _driver_stack("").replace("sem_wait ()", "__lll_lock_wait ()").replace("sem_wait.S", "lowlevellock.S")
    assert wait_of(text, db) == "lock"


# --- a worker's loop between tasks ---------------------------------------------------------------


def test_vllms_worker_loop_reading_its_next_call_is_idle(db):
    assert wait_of(real("vllm/vllm-pr41834-1.txt"), db) == "idle"


def test_near_miss_the_executor_reading_its_workers_replies_is_a_queue(db):
    assert wait_of(real("vllm/vllm-50835-1.txt"), db) == "queue"


def test_near_miss_a_worker_whose_task_waits_in_the_programs_code_is_not_idle(db):
    text = real("vllm/vllm-pr41834-1.txt").replace(
        "    worker_busy_loop (",
        "    fetch_batch (myplugin/loader.py:55)\n    run_task (myplugin/tasks.py:12)\n    worker_busy_loop (")
    assert "fetch_batch" in text
    assert wait_of(text, db) == "queue"


# --- a paste without the main thread --------------------------------------------------------------


def test_a_process_without_its_main_thread_proves_no_rank_elsewhere(db):
    snap, tri = analyzed(real("sglang/sglang-17941-1.txt"), db)
    sigs = [f.signature for f in snap.findings]
    assert "collective-straggler" not in sigs, sigs
    assert main_missing(snap.processes[0]) and not main_missing(snap.processes[1])
    state = {s.process: s for s in snap.job.states}
    assert state[0].evidence == "unknown" and "main thread is not in the input" in state[0].evidence_reason
    assert state[1].evidence == "waiting"
    assert tri[0].triage.wait == "collective" and tri[0].process == 1, [t.summary for t in tri]


def test_near_miss_the_same_paste_with_its_main_thread_named_blames_it(db):
    text = real("sglang/sglang-17941-1.txt")
    text = 'Thread 90521 (idle): "MainThread"\n' + text
    snap, tri = analyzed(text, db)
    assert not main_missing(snap.processes[0])
    assert "collective-straggler" in [f.signature for f in snap.findings]
    assert {s.process: s for s in snap.job.states}[0].evidence == "elsewhere"
    assert tri[0].process == 0  # the processes' order again: both have their main thread


def test_near_miss_a_thread_list_without_threading_frames_still_stands_for_the_main_thread():
    native = Thread(frames=[Frame(function="epoll_wait", library="libc.so.6")])
    assert not main_missing(Process(source="text", threads=[native]))
    boot = Frame(kind="python", function="_bootstrap", file="/usr/lib/python3.12/threading.py")
    started = Thread(frames=[Frame(kind="python", function="run", file="tqdm/_monitor.py"), boot])
    assert main_missing(Process(source="text", threads=[started]))
    assert not main_missing(Process(source="text", pid=7, threads=[started, Thread(tid=7)]))


def test_a_broken_driver_semaphore_entry_is_one_signature_error():
    import yaml

    from hanganalyze.analyze.triagetable import _table
    from hanganalyze.errors import SignatureError

    data = yaml.safe_load((REPO / "signatures" / "triage" / "waits.yaml").read_text())
    lock = next(c for c in data["categories"] if c["id"] == "lock")
    assert _table(data, "waits.yaml").categories  # the shipped file reads
    lock["driver_semaphore"] = {"native": ["^sem_wait$"]}  # no libraries
    with pytest.raises(SignatureError, match="driver_semaphore needs"):
        _table(data, "waits.yaml")
