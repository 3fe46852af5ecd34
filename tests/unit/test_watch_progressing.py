"""What the watcher counts as the job moving when it checks a hang candidate (watch.progressing):
the program's own threads and NCCL RAS counts, never a runtime's helper threads.  On a real GPU job
(scripts/gpu_watch.sh, one H200) the stopped rank's peer spun in the device sync while NCCL's
watchdog thread was caught at different frames in most captures: counted as progress, the watcher
dismissed the hang again and again and captured it 84 s after it began instead of ~13 s."""

from __future__ import annotations

from hanganalyze.watch import progressing
from hanganalyze_gdbext.model import Finding, Frame, Process, Snapshot, Thread, ThreadProgress


def _thread(tid: int, name: str, frames, state: str, changed=()) -> Thread:
    return Thread(tid=tid, name=name, frames=frames,
                  progress=ThreadProgress(state=state, samples=3, window_s=1.0, changed=list(changed)))


def _rank(pid: int, main_state: str, watchdog_state: str = "progressing") -> Process:
    main = _thread(pid, "MainThread", [Frame(kind="native", function="cudaStreamSynchronize", library="libcudart.so"),
                                       Frame(kind="python", function="train_step", file="/srv/train.py", line=9)],
                   main_state, ["train_step (/srv/train.py:9)"] if main_state == "progressing" else ())
    watchdog = _thread(pid + 1, "pt_nccl_watchdg",
                       [Frame(kind="native", function="std::this_thread::sleep_for", library="libtorch_cuda.so"),
                        Frame(kind="native", function="c10d::ProcessGroupNCCL::Watchdog::runLoop()",
                              library="libtorch_cuda.so")],
                       watchdog_state, ["c10d::ProcessGroupNCCL::Watchdog::runLoop (libtorch_cuda.so)"])
    return Process(source="live", pid=pid, threads=[main, watchdog])


def test_a_helper_thread_moving_is_not_the_job_moving():
    snap = Snapshot(processes=[_rank(100, "spinning"), _rank(200, "stuck")])
    assert progressing(snap) == []


def test_the_main_thread_moving_is():
    snap = Snapshot(processes=[_rank(100, "progressing"), _rank(200, "stuck")])
    assert progressing(snap) == [100]


def test_a_thread_no_list_names_moving_is():
    snap = Snapshot(processes=[_rank(100, "spinning"), _rank(200, "stuck")])
    snap.processes[0].threads.append(_thread(150, "worker", [Frame(kind="python", function="fetch", file="/srv/io.py",
                                                                    line=3)], "progressing", ["fetch (/srv/io.py:3)"]))
    assert progressing(snap) == [100]


def test_nccl_ras_counts_moving_are_the_job_moving():
    snap = Snapshot(processes=[_rank(100, "spinning"), _rank(200, "stuck")],
                    findings=[Finding(signature="nccl-ras-progressing", title="t", severity="info", process=0,
                                             summary="moves")])
    assert progressing(snap) == [100, 200]
