"""The stuck-or-slow rules on constructed snapshots (analyze/progress.py, acquire/sampling.classify):
the real processes are in tests/integration/test_progress_samples.py."""

from __future__ import annotations

from hanganalyze.acquire.procfs import ThreadStat
from hanganalyze.acquire.sampling import Sample, classify
from hanganalyze.analyze.progress import ONE_SAMPLE_NOTE, gate_findings, window_factor
from hanganalyze_gdbext.model import Evidence, Finding, Frame, Process, Samples, Snapshot, Thread, ThreadProgress


def _thread(tid: int, line: int, func: str = "fetch") -> Thread:
    return Thread(tid=tid, frames=[Frame(kind="native", function="futex_wait", library="/lib/libc.so.6"),
                                   Frame(kind="python", function=func, file="train.py", line=line)])


def _sample(at: float, t: Thread, cpu: float, runnable: float, switches: int) -> Sample:
    st = ThreadStat(tid=t.tid, state="S", cpu_s=cpu, switches=switches, runnable_s=runnable)
    return Sample(at=at, stats={t.tid: st}, process=Process(source="live", pid=1, threads=[t]))


def test_classify_states():
    same = [(_sample(k * 0.5, _thread(7, 10), 0.0, 0.0, k), _thread(7, 10)) for k in range(3)]
    assert classify(same).state == "stuck"
    moved = [(_sample(k * 0.5, _thread(7, 10 + k), 0.0, 0.0, 100 * k), _thread(7, 10 + k)) for k in range(3)]
    p = classify(moved)
    assert p.state == "progressing" and "fetch (train.py:10)" in p.changed
    # never woke, no CPU: it did not run, so a stack that reads differently is the unwinder's noise
    noise = [(_sample(k * 0.5, _thread(7, 10 + k), 0.0, 0.0, k), _thread(7, 10 + k)) for k in range(3)]
    assert classify(noise).state == "stuck"
    spin = [(_sample(k * 0.5, _thread(7, 10), 0.1 * k, 0.45 * k, 0), _thread(7, 10)) for k in range(3)]
    assert classify(spin).state == "spinning"
    woke = [(_sample(k * 0.5, _thread(7, 10), 0.0, 0.01, 200 * k), _thread(7, 10)) for k in range(3)]
    assert classify(woke).state == "progressing"
    assert classify(same[:1]).state == "unknown"


def _hang_snapshot(state: str, source: str = "live", severity: str = "hang", sig: str = "gloo-recv-timeout"
                   ) -> Snapshot:
    t = _thread(7, 10)
    if source == "live":
        t.progress = ThreadProgress(state=state, samples=3, window_s=1.0, cpu_s=0.0)
    proc = Process(source=source, pid=1, threads=[t], samples=Samples(count=3, window_s=1.0) if source == "live"
                   else None)
    f = Finding(signature=sig, title="t", severity=severity, process=0, threads=[7],
                summary="waits in gloo", evidence=[Evidence(thread=7, frame=0, rule="r", text="x")], confidence=1.0)
    return Snapshot(processes=[proc], findings=[f])


def test_gate_drops_a_wait_whose_thread_moved():
    snap = _hang_snapshot("progressing")
    gate_findings(snap)
    assert snap.findings == []
    assert any("gloo-recv-timeout not reported" in n for n in snap.processes[0].notes)


def test_gate_keeps_a_wait_that_held_and_says_for_how_long():
    snap = _hang_snapshot("stuck")
    gate_findings(snap)
    assert [f.signature for f in snap.findings] == ["gloo-recv-timeout"]
    assert "held for 1.0 s over 3 samples" in snap.findings[0].summary
    assert snap.findings[0].confidence == window_factor(1.0) < window_factor(5.0) == 1.0


def test_a_core_is_one_sample():
    snap = _hang_snapshot("stuck", source="core")
    gate_findings(snap)
    assert [f.confidence for f in snap.findings] == [1.0]
    assert ONE_SAMPLE_NOTE in snap.processes[0].notes


def test_an_instant_info_finding_holds_only_where_its_thread_held():
    """A healthy NCCL loop passes through a busy-waiting device sync every step: the info finding of
    that instant goes with a thread that moved, stays with one that spun in place; a crash stays."""
    moved = _hang_snapshot("progressing", severity="info", sig="cuda-sync-busy-spin")
    gate_findings(moved)
    assert moved.findings == []
    spun = _hang_snapshot("spinning", severity="info", sig="cuda-sync-busy-spin")
    gate_findings(spun)
    assert [f.signature for f in spun.findings] == ["cuda-sync-busy-spin"]
    crash = _hang_snapshot("progressing", severity="crash", sig="sigsegv")
    gate_findings(crash)
    assert [f.signature for f in crash.findings] == ["sigsegv"]


def _gpu_wait(tid: int, noise: str) -> Thread:
    """A thread busy-waiting in a device sync under one Python line; ``noise`` names the unnamed
    frame the unwinder guessed this time through the stripped driver."""
    cuda = "/usr/lib/libcuda.so.1"
    return Thread(tid=tid, frames=[Frame(kind="native", function=None, library=cuda),
                                   Frame(kind="native", function=None, library=noise),
                                   Frame(kind="native", function="cuStreamSynchronize", library=cuda),
                                   Frame(kind="python", function="train_step", file="train.py", line=12)])


def test_a_read_that_held_the_process_stopped_is_not_time_the_thread_could_run():
    """4x H100, a cold first run: the reads held each rank ~2 s of a 3.1 s window, so a thread that
    spun in the driver whenever it could run used only 0.9 s of CPU: spinning, not progressing."""
    seen = []
    for k, noise in enumerate(["/usr/lib/libcuda.so.1", "/x/libtorch_cuda.so", "/x/libtorch_cpu.so"]):
        t = _gpu_wait(7, noise)
        s = _sample(k * 1.55, t, 0.45 * k, 0.45 * k, 1)
        s.process.stopped_s = 1.0
        seen.append((s, t))
    p = classify(seen)
    assert p.state == "spinning", p
    for s, _t in seen:  # the same reads, had they not stopped it: 0.9 s of 3.1 s is no spin
        s.process.stopped_s = 0.0
    assert classify(seen).state != "spinning"


def test_only_unnamed_frames_differing_under_the_same_python_line_is_the_unwinders_noise():
    seen = [(_sample(k * 0.5, _gpu_wait(7, lib), 0.02 * k, 0.02 * k, 1), _gpu_wait(7, lib))
            for k, lib in enumerate(["/x/libtorch_cuda.so", "/x/libtorch_cpu.so", "/x/libtorch_cuda.so"])]
    assert classify(seen).state == "stuck"
    moved = [(_sample(k * 0.5, _thread(7, 10, func), 0.02 * k, 0.02 * k, 1), _thread(7, 10, func))
             for k, func in enumerate(["fetch", "parse", "fetch"])]  # a named frame moved: progress
    assert classify(moved).state == "progressing"
