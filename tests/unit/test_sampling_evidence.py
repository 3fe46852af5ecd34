"""Progress evidence that cannot alias with a periodic step (issue 31), on recorded counters:
own wake-ups net of the reads' ptrace stops, jittered intervals, the adaptive window.  The real
processes are in tests/integration/test_progress_samples.py (module-level loop jobs)."""

from __future__ import annotations

from typing import Dict, List, Optional

import pytest

from hanganalyze.acquire import sampling
from hanganalyze.acquire.many import Input
from hanganalyze.acquire.procfs import ThreadStat, _switches, _syscall
from hanganalyze.acquire.sampling import Sample, acquire_sampled, ambiguous, classify, jittered, make_rng
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread


def _thread(tid: int, func: str = "augment_batch") -> Thread:
    return Thread(tid=tid, frames=[Frame(kind="native", function="clock_nanosleep", library="/lib/libc.so.6"),
                                   Frame(kind="python", function=func, file="train.py", line=38),
                                   Frame(kind="python", function="<module>", file="train.py", line=51)])


def _st(tid: int, switches: int, cpu: float = 0.0) -> ThreadStat:
    return ThreadStat(tid=tid, state="S", cpu_s=cpu, switches=switches, runnable_s=cpu, involuntary=0, syscall=230)


def _seen(before: List[int], during: List[int], tid: int = 7, dt: float = 0.5, rank: Optional[int] = None):
    """Samples of one thread held in one sleep: its switch counter before each read, and what each
    read itself added (measured just after it)."""
    out = []
    for k, (b, d) in enumerate(zip(before, during)):
        t = _thread(tid)
        proc = Process(source="live", pid=tid, threads=[t], rank=rank)
        out.append((Sample(at=k * dt, stats={tid: _st(tid, b)}, process=proc, after={tid: _st(tid, b + d)}), t))
    return out


def test_a_sleep_for_ever_never_woke_beyond_the_reads():
    """Measured on a live thread in time.sleep: 2 switches per read (the stop and the sleep it goes
    back to), none between; once the re-sleep fell after the counters were read again."""
    p = classify(_seen([0, 2, 4], [2, 2, 2]))
    assert (p.state, p.evidence, p.wakeups, p.own_wakeups) == ("stuck", "never-woke", 4, 0)
    p = classify(_seen([0, 2, 4], [1, 2, 2]))  # the re-sleep landed after the counters: still the read's
    assert p.own_wakeups == 0 and p.state == "stuck"


def test_a_sleep_in_a_module_level_loop_woke_of_its_own():
    """The slow rank: caught in the same sleep, same line, no fast locals of its own (module-level
    loop) in every sample, but it woke, ran and slept again between the samples."""
    p = classify(_seen([0, 4, 8], [2, 2, 2]))
    assert (p.state, p.evidence, p.own_wakeups) == ("progressing", "woke", 4)
    assert p.place_samples == 3 and "woke 4 times in the same place" in p.changed
    assert p.syscall == 230 and p.involuntary == 0


def test_a_read_that_cost_more_is_taken_off():
    p = classify(_seen([0, 5, 10], [5, 5, 5]))  # each read measured 5 switches: all of them ours
    assert p.own_wakeups == 0 and p.state == "stuck"


def test_one_own_wake_up_is_in_doubt():
    hist = [s for s, _t in _seen([0, 3, 5], [2, 2, 2])]
    p = classify([(s, s.process.threads[0]) for s in hist])
    assert (p.state, p.evidence, p.own_wakeups) == ("stuck", "same-place", 1)
    doubt = ambiguous({7: hist})
    assert [(pid, t.tid) for pid, t, _p in doubt] == [(7, 7)]
    assert ambiguous({7: [s for s, _t in _seen([0, 2, 4], [2, 2, 2])]}) == []  # never woke: no doubt


def test_a_main_thread_that_never_woke_is_in_doubt_only_while_another_process_moved():
    quiet = [s for s, _t in _seen([0, 2, 4], [2, 2, 2], tid=7, rank=0)]
    moving = [s for s, _t in _seen([0, 6, 12], [2, 2, 2], tid=9, rank=1)]
    assert [pid for pid, _t, _p in ambiguous({7: quiet, 9: moving})] == [7]
    assert ambiguous({7: quiet, 9: [s for s, _t in _seen([0, 2, 4], [2, 2, 2], tid=9, rank=1)]}) == []
    helper = [s for s, _t in _seen([0, 2, 4], [2, 2, 2], tid=7)]  # no rank: an idle helper process
    assert ambiguous({7: helper, 9: moving}) == []


def test_jitter_is_bounded_and_seeded(monkeypatch):
    monkeypatch.setenv(sampling.SEED_ENV, "1234")
    a, seed = make_rng()
    b, _ = make_rng()
    assert seed == 1234
    xs = [jittered(a, 0.5) for _ in range(200)]
    assert xs == [jittered(b, 0.5) for _ in range(200)]
    assert all(0.3 - 1e-9 <= x <= 0.7 + 1e-9 for x in xs) and len({round(x, 6) for x in xs}) > 150
    monkeypatch.delenv(sampling.SEED_ENV)
    assert {make_rng()[1] for _ in range(5)} != {1234}


def test_proc_counters_are_parsed():
    status = b"Name:\tpython\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n"
    assert _switches(status) == {b"voluntary_ctxt_switches": 17, b"nonvoluntary_ctxt_switches": 3}
    assert _syscall(b"230 0x1 0x0 0x7ffc 0x0 0x0 0x0 0x7ffc 0x7f00\n") == 230
    assert _syscall(b"running\n") is None and _syscall(b"-1 0x7ffc 0x7f00\n") is None and _syscall(None) is None


def test_max_window_is_checked():
    sampling.check_options(3, 0.5, 0.0)
    with pytest.raises(InputError, match="--max-window"):
        sampling.check_options(3, 0.5, -1.0)


class _FakeJob:
    """Live processes read by fake reads: the main thread of ``pid`` has woke ``own[pid][k]`` times
    of its own before read k, and every read costs it 2 switches (the stop and the sleep after)."""

    def __init__(self, own: Dict[int, List[int]], ranked: bool = False) -> None:
        self.own, self.ranked = own, ranked
        self.done: Dict[int, int] = {pid: 0 for pid in own}
        self.just_read: Dict[int, bool] = {pid: False for pid in own}

    def stats(self, pid: int) -> Dict[int, ThreadStat]:
        k = self.done[pid] - 1 if self.just_read[pid] else self.done[pid]
        own = self.own[pid][min(k, len(self.own[pid]) - 1)]
        return {pid: _st(pid, 2 * self.done[pid] + own)}

    def read(self, pid: int) -> Process:
        self.done[pid] += 1
        self.just_read[pid] = True
        return Process(source="live", pid=pid, threads=[_thread(pid)], rank=pid if self.ranked else None)


def _run(monkeypatch, job: _FakeJob, max_window: float) -> Snapshot:
    def one_sample(reading, pid: int) -> Sample:
        job.just_read[pid] = False
        at, before = sampling.time.monotonic(), job.stats(pid)
        proc = job.read(pid)
        return Sample(at, before, proc, job.stats(pid))

    monkeypatch.setattr(sampling, "thread_stats", job.stats)
    monkeypatch.setattr(sampling, "_one_sample", one_sample)
    monkeypatch.setenv(sampling.SEED_ENV, "7")
    return acquire_sampled([Input(pid=pid) for pid in job.own], lambda inp: Snapshot(processes=[job.read(inp.pid)]),
                           None, parallel=2, samples=3, interval=0.03, max_window=max_window)


def test_the_window_goes_on_while_a_rank_woke_once_and_stops_when_it_moves(monkeypatch):
    # pid 7 woke once in the first window (doubt), then again: progress seen at the 5th read
    job = _FakeJob({7: [0, 0, 1, 1, 2, 3, 4, 5, 6, 7], 9: [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]}, ranked=True)
    snap = _run(monkeypatch, job, max_window=5.0)
    by_pid = {p.pid: p for p in snap.processes}
    assert by_pid[7].samples.count == 5 and by_pid[7].samples.seed == 7
    assert by_pid[7].threads[0].progress.state == "progressing"
    assert by_pid[9].threads[0].progress.evidence == "woke"
    text = by_pid[7].samples.extended
    assert text == by_pid[9].samples.extended and by_pid[7].notes == []  # a job shows it once, in its view
    assert text.startswith("sampling went on to ") and "pid 7 thread 7 held its place in augment_batch" in text
    assert "woke 1 time of its own" in text and text.endswith("then seen to move"), text


def test_the_window_is_bounded(monkeypatch):
    job = _FakeJob({7: [0, 0] + [1] * 40})
    snap = _run(monkeypatch, job, max_window=0.2)
    proc = snap.processes[0]
    assert 3 < proc.samples.count < 12 and proc.samples.window_s <= 0.2 + 0.05
    assert "still in doubt at the bound: called stuck" in proc.samples.extended
    assert proc.threads[0].progress.state == "stuck" and proc.samples.extended in proc.notes
    job0 = _FakeJob({7: [0, 0, 1, 1, 1]})
    snap0 = _run(monkeypatch, job0, max_window=0.0)  # --max-window 0: never past --samples
    assert snap0.processes[0].samples.count == 3 and snap0.processes[0].samples.extended is None


def test_a_rank_that_never_woke_while_another_moved_is_watched_longer(monkeypatch):
    own = {7: [0] * 400, 9: [3 * k for k in range(400)]}
    snap = _run(monkeypatch, _FakeJob(own, ranked=True), max_window=5.0)
    quiet = next(p for p in snap.processes if p.pid == 7)
    assert quiet.samples.count > 3 and "never woke while another process moved" in quiet.samples.extended
    assert quiet.samples.window_s <= sampling.CROSS_FACTOR * 2 * 0.03 + 0.1  # 3 base windows, not --max-window
    assert quiet.threads[0].progress.state == "stuck"
    snap = _run(monkeypatch, _FakeJob(own, ranked=False), max_window=5.0)  # an idle helper: no rank, not waited for
    assert all(p.samples.count == 3 for p in snap.processes)


def test_a_thread_that_never_woke_is_stuck_at_once(monkeypatch):
    job = _FakeJob({7: [0] * 10, 9: [0] * 10}, ranked=True)
    snap = _run(monkeypatch, job, max_window=5.0)
    assert all(p.samples.count == 3 and p.samples.extended is None for p in snap.processes)
    assert all(p.threads[0].progress.evidence == "never-woke" for p in snap.processes)
