"""The triage on ML-framework hang pastes (tests/data/realworld, manifest-ml2.yaml): a CUDA
driver wait seen from gdb's lone ``bt`` or through the CUDA runtime, the collective watchdog's abort,
Lightning's rendezvous line, Horovod's stall lines and DeepSpeed ZeRO-3's parameter all-gather.
Each rule has its real paste and a near miss."""

from __future__ import annotations

from helpers import REPO

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Process, Snapshot

CORPUS = REPO / "tests" / "data" / "realworld"


def wait_of(text: str, db):
    try:
        snap = parse_text(text)
    except InputError:  # a log with no stack: its lines as one process's messages
        snap = Snapshot(processes=[Process(source="text", messages=[x for x in text.splitlines() if x.strip()])])
    tri = [f for f in pipeline.analyze(snap, db).findings if f.signature == "triage"]
    return tri[0].triage.wait if tri else None


def real(name: str) -> str:
    return (CORPUS / name).read_text()


def test_a_lone_bt_of_driver_frames_is_the_selected_host_thread_waiting_for_the_gpu(db):
    # gdb's "bt" (no thread list) of a hung trainer, cut inside libcuda / libcudart
    assert wait_of(real("returnn/returnn-1808-1.txt"), db) == "gpu"
    assert wait_of(real("returnn/returnn-1811-1.txt"), db) == "gpu"


DRIVER_ONLY = """Thread 2 (Thread 0x7f2 (LWP 202)):
#0  0x00007f1 in ?? () from /lib64/libcuda.so.1
#1  0x00007f2 in ?? () from /lib64/libcuda.so.1
#2  0x00007f3 in ?? () from /lib64/libcuda.so.1
Thread 1 (Thread 0x7f1 (LWP 201)):
#0  0x00007f in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f in event_loop () at loop.cc:5
"""


def test_near_miss_driver_frames_of_a_listed_thread_are_the_drivers_own(db):
    # the same frames under a thread header of "thread apply all bt": maybe a thread the driver started
    assert wait_of(DRIVER_ONLY, db) != "gpu"


def test_the_cuda_runtime_above_driver_frames_is_a_host_thread_entering_the_driver(db):
    text = DRIVER_ONLY.replace("#2  0x00007f3 in ?? () from /lib64/libcuda.so.1\n",
                               "#2  0x00007f3 in ?? () from /lib64/libcuda.so.1\n"
                               "#3  0x00007f4 in ?? () from /usr/local/cuda/lib64/libcudart.so.12\n")
    assert wait_of(text, db) == "gpu"


def test_the_collective_watchdogs_abort_is_the_collectives_wait(db):
    assert wait_of(real("sglang/sglang-1693-1.txt"), db) == "collective"
    assert wait_of(real("torchrec/torchrec-189-1.txt"), db) == "collective"


def test_near_miss_an_abort_for_another_reason_stays_a_crash(db):
    text = real("sglang/sglang-1693-1.txt").replace(
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, "
        "NumelOut=152064, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
        "CUDA error: an illegal memory access was encountered")
    assert "Watchdog caught" not in text
    assert wait_of(text, db) == "crashed"


def test_lightnings_rendezvous_line_is_a_collective_wait(db):
    assert wait_of(real("lightning/lightning-4389-1.txt"), db) == "collective"


def test_near_miss_lightnings_other_start_lines_name_no_wait(db):
    text = "".join(x + "\n" for x in real("lightning/lightning-4389-1.txt").splitlines() if "GLOBAL_RANK" not in x)
    assert wait_of(text, db) != "collective"


def test_horovods_stall_lines_are_a_collective_wait(db):
    assert wait_of(real("horovod/horovod-100-1.txt"), db) == "collective"
    text = "".join(x + "\n" for x in real("horovod/horovod-100-1.txt").splitlines() if "ranks" not in x)
    assert wait_of(text, db) != "collective"  # near miss: the op names alone


def test_zero3_parameter_all_gather_is_a_collective_wait(db):
    assert wait_of(real("accelerate/accelerate-3104-1.txt"), db) == "collective"


def test_near_miss_zero3_fetch_waiting_on_a_stream_is_a_gpu_wait(db):
    # fetch_sub_module itself is not a collective: here it waits for a CUDA stream (DeepSpeed #860)
    assert wait_of(real("deepspeed/deepspeed-860-1.txt"), db) == "gpu"
