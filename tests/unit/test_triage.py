"""The triage (analyze/triage.py): an answer for every input, from the frames or the log."""

from __future__ import annotations

import pytest
from helpers import REPO

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text


def triage_of(text: str, db):
    snap = pipeline.analyze(parse_text(text), db)
    return snap, [f for f in snap.findings if f.signature == "triage"]


GPU_WAIT = """Thread 1 (Thread 0x7f (LWP 100)):
#0  0x00007f1 in ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1
#1  0x00007f2 in ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1
#2  0x00007f3 in ?? () from /usr/lib/x86_64-linux-gnu/libcuda.so.1
#3  0x00007f4 in cudaMemcpyAsync () from /usr/local/cuda/lib64/libcudart.so.12
#4  0x00007f5 in at::native::copy_kernel_cuda(at::TensorIterator&, bool) () from /opt/torch/lib/libtorch_cuda.so
#5  0x00007f6 in my_train_step () from /opt/app/libapp.so
"""


def test_gpu_wait_over_unnamed_driver_frames(db):
    snap, tri = triage_of(GPU_WAIT, db)
    # the class's signature answers (a host thread waiting for the device), the triage says the same wait
    assert snap.findings[0].signature == "cuda-host-waits-for-device"
    assert tri[0].triage.wait == "gpu"
    assert tri[0].triage.blame == "at::native::copy_kernel_cuda (libtorch_cuda.so)"
    assert tri[0].fix and snap.bucket and snap.bucket.startswith("b2-")


def test_bucket_is_built_on_the_blame_frame(db):
    a, _ = triage_of(GPU_WAIT, db)
    b, _ = triage_of(GPU_WAIT.replace("0x00007f1", "0x00007aa"), db)
    c, _ = triage_of(GPU_WAIT.replace("copy_kernel_cuda", "fill_kernel_cuda"), db)
    assert a.bucket == b.bucket != c.bucket


def test_lock_wait_names_its_waiter_and_blame(db):
    text = """Thread 2 (Thread 0x7f (LWP 201)):
#0  __lll_lock_wait (futex=0x5) at lowlevellock.c:52
#1  0x00007f in __GI___pthread_mutex_lock (mutex=0x5) at pthread_mutex_lock.c:80
#2  0x00007f in Cache::insert (this=0x1) at cache.cc:40
#3  0x00007f in worker () at main.cc:10
Thread 1 (Thread 0x7f (LWP 200)):
#0  0x00007f in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f in event_loop () at loop.cc:5
"""
    _snap, tri = triage_of(text, db)
    assert tri[0].triage.wait == "lock"
    assert tri[0].triage.about == [201]
    assert "Cache::insert" in tri[0].triage.blame


def test_watchdog_stack_is_a_collective_without_a_log_line(db):
    text = """#0  0x00007f in raise () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f in abort () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f in c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<long>) () from /opt/t/libtorch_cuda.so
#3  0x00007f in c10d::ProcessGroupNCCL::watchdogHandler() () from /opt/torch/lib/libtorch_cuda.so
#4  0x00007f in c10d::ProcessGroupNCCL::ncclCommWatchdog() () from /opt/torch/lib/libtorch_cuda.so
"""
    _snap, tri = triage_of(text, db)
    assert tri[0].triage.wait == "collective"


def test_log_only_input_gets_a_triage_from_its_lines(db):
    text = "[2024-05-01 10:00:00] W horovod: One or more tensors were submitted to be reduced, gathered " \
           "or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds.\n"
    _snap, tri = triage_of(text, db)
    assert tri[0].triage.wait == "collective" and tri[0].triage.from_ == "log"


def test_an_idle_process_is_not_called_a_lock_wait(db):
    text = """Thread 1 (Thread 0x7f (LWP 300)):
#0  0x00007f in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f in event_loop () at loop.cc:5
"""
    _snap, tri = triage_of(text, db)
    assert tri[0].triage.wait == "idle"


# Real helper threads of a live 2-GPU NCCL rank (tests/data/gpu_verdicts, PyTorch 2.11, NCCL 2.28):
# they sleep in their loops in every healthy process, so they wait for no collective and no GPU work.
NCCL_HELPERS = """Thread 4 (Thread 0x7f2076 (LWP 2076)):
#0  0x00007f in __poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f in ?? () from /usr/local/nvidia/lib64/libcuda.so.580.159.04
#2  0x00007f in ?? () from /usr/local/nvidia/lib64/libcuda.so.580.159.04
#3  0x00007f in ?? () from /lib/x86_64-linux-gnu/libc.so.6
Thread 3 (Thread 0x7f752 (LWP 752)):
#0  0x00007f in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f in pthread_cond_timedwait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f in c10d::ProcessGroupNCCL::HeartbeatMonitor::runLoop() () from /opt/torch/lib/libtorch_cuda.so
#3  0x00007f in ?? () from /lib/x86_64-linux-gnu/libstdc++.so.6
Thread 2 (Thread 0x7f758 (LWP 758)):
#0  0x00007f in __poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f in ncclProxyService(void*) () from /opt/torch/lib/libnccl.so.2
#2  0x00007f in ?? () from /lib/x86_64-linux-gnu/libc.so.6
"""


def test_runtime_helper_threads_between_their_checks_wait_for_nothing(db):
    _snap, tri = triage_of(NCCL_HELPERS, db)
    rows = {r.tid: r.wait for r in tri[0].triage.threads}
    assert rows[752] == "helper" and rows[758] == "helper", rows
    assert rows[2076] != "gpu", rows  # the driver's own thread: nothing of the program called it
    assert tri[0].triage.wait not in ("collective", "gpu"), tri[0].summary


def test_a_host_thread_in_the_driver_under_the_program_is_a_gpu_wait(db):
    text = NCCL_HELPERS + """Thread 1 (Thread 0x7f731 (LWP 731)):
#0  0x00007f in ?? () from /usr/local/nvidia/lib64/libcuda.so.580.159.04
#1  0x00007f in ?? () from /usr/local/nvidia/lib64/libcuda.so.580.159.04
#2  0x00007f in ?? () from /usr/local/nvidia/lib64/libcuda.so.580.159.04
#3  0x00007f in ?? () from /usr/local/cuda/lib64/libcudart.so.13
#4  0x00007f in at::native::_local_scalar_dense_cuda(at::Tensor const&) () from /opt/torch/lib/libtorch_cuda.so
"""
    _snap, tri = triage_of(text, db)
    assert tri[0].triage.wait == "gpu" and tri[0].triage.about[0] == 731, tri[0].summary



# Pastes cut at the condition wait, before take_gil: gdb's arguments name the GIL's condition variable
# (3.7+: inside _PyRuntime, pytorch/pytorch#119262; 3.2-3.6: the static gil_cond, pytorch/pytorch#29065).
REALWORLD = REPO / "tests" / "data" / "realworld"


@pytest.mark.parametrize("name", ["pytorch/pytorch-119262-1.txt", "pytorch/pytorch-29065-1.txt"])
def test_a_wait_on_the_gils_condition_variable_is_a_gil_wait(db, name):
    snap, tri = triage_of((REALWORLD / name).read_text(), db)
    assert snap.processes[0].threads[0].waits.kind == "gil"
    assert tri[0].triage.wait == "gil"


def test_a_runtime_field_outside_a_wait_or_a_heap_condition_is_not_the_gil(db):
    # cpython#106883's shape: gilstate=<_PyRuntime+568> names the runtime, but the wait is a PyThread lock
    head_lock = (
        "#0  0x00007f8ce83afc6b in sem_wait@@GLIBC_2.2.5 () from /lib64/libpthread.so.0\n"
        "#1  0x00000000004ea969 in PyThread_acquire_lock_timed (intr_flag=0, microseconds=-1, lock=0x18bd040)"
        " at Python/thread_pthread.h:497\n"
        "#2  0x00000000005f7266 in tstate_delete_common (tstate=0x7f8cc417c250, gilstate=0x8791d8 <_PyRuntime+568>)"
        " at Python/pystate.c:1080\n")
    snap, tri = triage_of(head_lock, db)
    w = snap.processes[0].threads[0].waits  # the PyThread lock gdb printed (gdbwaits.py), never the GIL
    assert (w is None or (w.kind == "mutex" and w.resource == "0x18bd040")) and tri[0].triage.wait == "lock"
    # the same condition wait on a condition variable of the program's (no symbol): not the GIL
    text = (REALWORLD / "pytorch/pytorch-119262-1.txt").read_text()
    for sym in ("<_PyRuntime+384>", "<_PyRuntime+428>", "<_PyRuntime+432>"):
        text = text.replace(" " + sym, "")
    snap, tri = triage_of(text, db)
    assert snap.processes[0].threads[0].waits is None and tri[0].triage.wait != "gil"


def test_without_a_blame_frame_the_bucket_still_names_the_wait(db):
    """A log line with no stack and a stack of unnamed driver frames have no blame frame: their
    buckets differ by the wait (they once shared one), and stay stable across addresses."""
    from pathlib import Path

    from hanganalyze.acquire.text import parse_text

    corpus = REPO / "tests" / "data" / "realworld"
    log = pipeline.analyze(parse_text(Path(corpus / "jax" / "jax-22740-1.txt").read_text()), db)
    driver = (corpus / "returnn" / "returnn-1808-1.txt").read_text()  # gdb's bt of libcuda frames only
    a, tri = triage_of(driver, db)
    b, _ = triage_of(driver.replace("0x0000149a6d", "0x00007f00aa"), db)  # another run, other addresses
    assert tri and not tri[0].triage.blame, tri[0].triage
    assert tri[0].triage.wait == "gpu" and a.bucket == b.bucket != log.bucket, (a.bucket, log.bucket)
