"""Open round 11's wait misses, each fixed for its mechanism, with a near miss where the rule must
not fire: a C++ lock class's acquire method with no libc wait below it (duckdb's StorageLock), a
macOS sample copy that lost its tree's indentation (kitty), a debugger's lone stack stopped in the
program's own code (an NCCL collective's enqueue, torch.dll's static initializer), a C
multiprocessing Connection's read (billiard), Ray's worker main loop, a gRPC stream iterator on its
call state's condition, gdb's ``info threads`` rows whose ids count up."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.triagetable import table


def _lock_native(name: str) -> bool:
    lock = next(c for c in table().categories if c.id == "lock")
    return bool(lock.native.search(name))


# --- C++ lock classes --------------------------------------------------------------------------


def test_duckdb_storage_lock_acquire_is_a_lock_wait(db):
    _snap, wait = text_verdict(real_text("duckdb/duckdb-14303-1.txt"), db)
    assert wait == "lock"


@pytest.mark.parametrize("name", ["duckdb::StorageLock::GetExclusiveLock", "QMutex::lock",
                                  "boost::shared_mutex::lock_shared", "tbb::spin_mutex::scoped_lock::acquire",
                                  "base::Lock::Acquire",
                                  "QReadWriteLock::lockForWrite", "parking_lot::raw_mutex::RawMutex::lock_slow",
                                  "std::lock_guard::lock_guard", "QMutexLocker::QMutexLocker"])
def test_lock_class_acquire_spellings(name):
    assert _lock_native(name)


@pytest.mark.parametrize("name", ["QMutex::unlock", "QMutex::tryLock", "std::weak_ptr::lock", "RWLock::ReadUnlock",
                                  "duckdb::DataTable::GetCheckpointLock", "Block::lock", "QMutexLocker::~QMutexLocker",
                                  "Mutex::is_locked", "remoteprocess::linux::Thread::lock"])
def test_near_miss_unlocks_tries_and_non_lock_classes_are_no_lock(name):
    assert not _lock_native(name)


# --- macOS sample without its indentation ----------------------------------------------------------


def test_kitty_sample_chain_at_one_depth_is_one_stack(db):
    snap, wait = text_verdict(real_text("kitty/kitty-1779-1.txt"), db)
    assert wait == "lock"
    cut = next(t for t in snap.processes[0].threads if t.tid is None)
    assert [f.function for f in cut.frames] == ["__psynch_mutexwait", "_pthread_mutex_firstfit_lock_wait",
                                                "_pthread_mutex_firstfit_lock_slow"]


def test_near_miss_real_siblings_stay_siblings():
    # 2 + 1 samples under a 3-sample parent: siblings, the heavier one is the path
    text = ("    3 Thread_1\n"
            "    + 3 start  (in libdyld.dylib) + 1  [0x1]\n"
            "    +   2 __psynch_cvwait  (in libsystem_kernel.dylib) + 10  [0x2]\n"
            "    +   1 __gettimeofday  (in libsystem_kernel.dylib) + 17  [0x3]\n")
    t = parse_text(text).processes[0].threads[0]
    assert [f.function for f in t.frames] == ["__psynch_cvwait", "start"]


# --- a debugger's lone stack stopped in the program's code ------------------------------------


def test_nccl_lone_bt_in_the_enqueue_is_a_crash_not_the_collective(db):
    snap, wait = text_verdict(real_text("nccl/nccl-1605-1.txt"), db)
    assert wait == "crashed"
    # the reading rests on where a debugger stops, not on a signal: the report says so, and names
    # the busy loop a still-running process would show the same way
    assert any("busy loop" in n and "no signal named" in n for n in snap.processes[0].notes)


def test_visual_studio_stack_in_a_static_initializer_is_a_crash(db):
    _snap, wait = text_verdict(real_text("pytorch/pytorch-17239-1.txt"), db)
    assert wait == "crashed"


def test_near_miss_a_lone_bt_cut_at_its_top_is_no_crash(db):
    text = "\n".join(real_text("nccl/nccl-1605-1.txt").splitlines()[1:]).replace("#0 ", "#3 ").replace("#1 ", "#4 ")
    snap, wait = text_verdict(text, db)
    assert wait == "collective"
    assert any("starts at frame #3" in n for n in snap.processes[0].threads[0].notes)
    assert not any("busy loop" in n for n in snap.processes[0].notes)


def test_near_miss_a_lone_bt_standing_in_a_wait_or_the_c_library_is_no_crash(db):
    for top in ("#0  0x00007f in __lll_lock_wait () from /lib64/libpthread.so.0",
                "#0  __syscall_cancel_arch () at ../sysdeps/unix/sysv/linux/x86_64/syscall_cancel.S:56",
                "#0  0x00007f in duckdb::StorageLock::GetExclusiveLock() () from /x/duckdb.so"):
        text = "(gdb) bt\n%s\n#1  0x00007f in taskAppend (info=0x1, comm=0x2) at enqueue.cc:2152\n" % top
        assert text_verdict(text, db)[1] != "crashed", top


def test_near_miss_a_user_interrupt_names_its_signal(db):
    text = "Program received signal SIGINT, Interrupt.\n" + real_text("nccl/nccl-1605-1.txt")
    assert text_verdict(text, db)[1] == "collective"


def test_near_miss_a_visual_studio_stack_in_a_wait_is_no_crash(db):
    text = ("> \tntdll.dll!NtWaitForSingleObject()\tUnknown\n"
            " \tKERNELBASE.dll!WaitForSingleObjectEx()\tUnknown\n"
            " \tcaffe2.dll!at::globalContext() Line 48\tC++\n")
    assert text_verdict(text, db)[1] != "crashed"


# --- queues, idle loops, conditions ----------------------------------------------------------------


def test_billiard_c_connection_read_is_the_queue(db):
    assert text_verdict(real_text("celery/celery-2606-1.txt"), db)[1] == "queue"


def test_near_miss_a_plain_read_stays_io(db):
    text = ("(gdb) bt\n#0  0x00007f in __read_nocancel () from /lib64/libpthread.so.0\n"
            "#1  0x00007f in my_reader () from /x/app.so\n")
    assert text_verdict(text, db)[1] == "io"


def test_ray_main_loop_is_an_idle_worker_and_a_get_inside_it_the_future(db):
    idle = ('Thread 1 (idle): "MainThread"\n    main_loop (ray/_private/worker.py:1066)\n'
            '    <module> (ray/_private/workers/default_worker.py:323)\n')
    assert text_verdict(idle, db)[1] == "idle"
    busy = ('Thread 1 (idle): "MainThread"\n    get_objects (ray/_private/worker.py:800)\n'
            '    get (ray/_private/worker.py:2500)\n'
            '    step (app/actor.py:10)\n    main_loop (ray/_private/worker.py:1066)\n')
    assert text_verdict(busy, db)[1] == "future"


def test_grpc_stream_iterator_on_its_condition_is_the_condition(db):
    snap, wait = text_verdict(real_text("grpc/grpc-20026-1.txt"), db)
    assert wait == "condition"
    assert len(snap.processes[0].threads) == 3  # '# Thread: N  File ...' headers with their first frame


def test_near_miss_a_blocking_grpc_call_on_the_completion_queue_stays_network(db):
    assert text_verdict(real_text("grpc/grpc-26616-1.txt"), db)[1] == "network"


# --- gdb info threads rows -----------------------------------------------------------------------


def test_info_threads_ids_that_count_up_are_no_editor_line_numbers():
    threads = parse_text(real_text("torch_xla/xla-6610-1.txt")).processes[0].threads
    assert [t.tid for t in threads] == [80098, 80100, 80102, 80108, 80116]
    assert all(t.frames[0].function == "__futex_abstimed_wait_common64" for t in threads)


def test_near_miss_numbered_editor_lines_are_still_stripped():
    text = ("1  #0  0x00007f in __lll_lock_wait () from /lib64/libpthread.so.0\n"
            "2  #1  0x00007f in f () from /x/a.so\n3  #2  0x00007f in main ()\n")
    t = parse_text(text).processes[0].threads[0]
    assert [f.function for f in t.frames] == ["__lll_lock_wait", "f", "main"]


def test_a_ray_worker_idle_in_its_loop_is_idle_over_its_background_threads(db):
    """verl#7180: the actor's main thread waits for its next task in Ray's main_loop; its other
    threads are Ray's GC thread on its event, an inductor reader, an event loop's thread: the
    process waits for work (py-spy's bare threading.py is the standard library's, not the program)."""
    snap, wait = text_verdict(real_text("verl/verl-7180-1.txt"), db)
    assert wait == "idle"
    tri = next(f for f in snap.findings if f.signature == "triage")
    assert "MainThread" in tri.summary


def test_near_miss_a_background_thread_on_a_lock_or_the_main_thread_in_the_program_keeps_its_wait(db):
    text = real_text("verl/verl-7180-1.txt")
    # a background thread that waits for a lock is a wait of its own, idle main thread or not
    locked = text.replace("    wait (threading.py:355)\n    wait (threading.py:655)\n",
                          "    acquire (threading.py:355)\n    __enter__ (threading.py:655)\n")
    assert text_verdict(locked, db)[1] == "lock"
    # the main thread in the program's own code is no idle worker: the condition is the headline
    busy = text.replace("    main_loop (ray/_private/worker.py:1066)\n", "    train (train.py:12)\n")
    assert text_verdict(busy, db)[1] == "condition"
