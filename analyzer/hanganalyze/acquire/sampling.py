"""Repeated samples of live processes: stuck or slow.

One snapshot cannot tell a hung process from a busy one: a healthy training loop caught while
every rank is inside ``all_reduce`` looks exactly like a collective that never finishes.  So each
live process is read several times (``--samples N``, default 3, ``--interval S`` apart), together
with what the kernel says about each thread (``procfs.thread_stats``: CPU time, state, wait
channel, wake-ups), and the samples are merged into one snapshot: the last sample's stacks, plus
per thread a ``progress`` (``model.ThreadProgress``) that says

* **stuck**: the same stack and wait in every sample, no CPU burnt (or: it never woke and used no
  CPU, so it cannot have moved, whatever a stripped frame's unwind said);
* **progressing**: its frames or lines changed (or it woke many times in one wait: a loop
  through the same call);
* **spinning**: burning CPU (most of the window) in the same place: the NCCL/CUDA busy-wait, a
  C-level spin loop, a tight Python loop on one line;
* **unknown**: seen in one sample only (a thread that started or ended within the window).

The ranks of a job are sampled in rounds (every process once per round, in a pool), so 3 samples
of 4 ranks take about the window plus three reads, not four windows.  Cores, texts and JSONs are one
sample and pass through untouched.  The analysis of these facts is ``analyze/progress.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from hanganalyze.acquire import engine
from hanganalyze.acquire.engine import EngineRequest
from hanganalyze.acquire.many import Input, acquire_all, default_parallel
from hanganalyze.acquire.procfs import ThreadStat, thread_stats
from hanganalyze.errors import InputError
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Process, Samples, Snapshot, Thread, ThreadProgress

DEFAULT_SAMPLES = 3
DEFAULT_INTERVAL = 0.5
MAX_SAMPLES = 100
#: Share of the window a thread that holds its place was runnable (on a CPU or waiting for one;
#: CPU time alone where ``schedstat`` is missing) from which it spins: on a loaded machine a
#: spinning thread gets a small share of a CPU but is runnable throughout, except while it is read.
SPIN_SHARE = 0.5
#: Wake-ups (voluntary context switches) that reading the thread itself causes, per sample: the
#: ptrace interrupt wakes a sleeping thread, which sleeps again.  More than this is the thread's own.
WAKEUPS_PER_SAMPLE = 4
#: Frames listed in ``progress.changed`` per thread.
MAX_CHANGED = 8

AcquireOne = Callable[[Input], Snapshot]


@dataclass
class Sample:
    """One read of one live process: when, the kernel's thread facts just before, the stacks."""

    at: float
    stats: Dict[int, ThreadStat]
    process: Process

    @property
    def stopped_s(self) -> float:
        """How long the read held the process stopped (its threads could not run meanwhile)."""
        return self.process.stopped_s or 0.0


def check_options(samples: Optional[int], interval: Optional[float]) -> None:
    """One-line errors before any process is stopped."""
    if samples is not None and not 1 <= samples <= MAX_SAMPLES:
        raise InputError("--samples must be between 1 and %d (got %s)" % (MAX_SAMPLES, samples))
    if interval is not None and not 0.0 <= interval <= 600.0:
        raise InputError("--interval must be between 0 and 600 seconds (got %s)" % interval)


def read_live(reading: EngineRequest, pid: int) -> Snapshot:
    """Every sample after the first: ``engine.from_pid``, the one place a live pid is read."""
    return engine.from_pid(pid, reading)


def acquire_sampled(inputs: Sequence[Input], acquire_one: AcquireOne, reading: EngineRequest,
                    parallel: Optional[int] = None, progress: Optional[Callable[[str], None]] = None,
                    samples: int = DEFAULT_SAMPLES, interval: float = DEFAULT_INTERVAL) -> Snapshot:
    """``many.acquire_all``, with every live input read ``samples`` times and merged (module doc)."""
    live = [i.pid for i in inputs if i.pid is not None]
    first: Dict[int, Tuple[float, Dict[int, ThreadStat]]] = {}

    def first_read(inp: Input) -> Snapshot:
        if inp.pid is not None and samples > 1:
            first[inp.pid] = (time.monotonic(), thread_stats(inp.pid))
        return acquire_one(inp)

    snapshot = acquire_all(inputs, first_read, parallel, progress)
    if samples <= 1 or not live:
        return snapshot
    procs = {p.pid: p for p in snapshot.processes if p.source == "live" and p.pid in first and not p.error}
    history: Dict[int, List[Sample]] = {pid: [Sample(first[pid][0], first[pid][1], p)] for pid, p in procs.items()}
    if progress:
        progress("sampling %d process(es) %d times, %g s apart" % (len(procs), samples, interval))
    start = min((first[pid][0] for pid in procs), default=time.monotonic())
    from concurrent.futures import ThreadPoolExecutor  # here: one sample needs no pool (start-up time, issue 21)

    pool = ThreadPoolExecutor(max_workers=parallel or default_parallel([Input(pid=p) for p in procs]),
                              thread_name_prefix="sample")
    try:
        for k in range(1, samples):
            pause = start + k * interval - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            for pid, got in zip(list(procs), pool.map(lambda pid: _one_sample(reading, pid), list(procs))):
                if isinstance(got, Sample):
                    history[pid].append(got)
                else:
                    procs[pid].notes.append("sample %d of %d failed (%s): %d sample(s) used"
                                            % (k + 1, samples, got, len(history[pid])))
                    del procs[pid]  # gone or unreadable: what it showed so far stands
    finally:
        pool.shutdown(wait=True)
    for hist in history.values():
        merge_samples(hist, interval)
    return snapshot


def _one_sample(reading: EngineRequest, pid: int):
    """A Sample, or the one-line reason it could not be taken."""
    at, stats = time.monotonic(), thread_stats(pid)
    try:
        snap = read_live(reading, pid)
    except Exception as e:  # noqa: BLE001 - the process exited mid-window: keep the earlier samples
        return " ".join(str(e).split())[:200] or type(e).__name__
    if not snap.processes or not snap.processes[0].threads:
        return "no threads read"
    return Sample(at, stats, snap.processes[0])


def _keys(t: Thread) -> List[str]:
    return [frame_text(f, FrameStyle.SAMPLE) for f in t.all_frames()]


def _place(t: Thread) -> List[str]:
    """Where a thread is, coarsely: its Python frames when it has some (the eval loop's native
    frames under a busy Python line differ in every sample), else its native frames."""
    py = [frame_text(f, FrameStyle.SAMPLE) for f in t.all_frames() if f.kind == "python"]
    return py or _keys(t)


def _wait_key(t: Thread) -> Tuple[Optional[str], Optional[str]]:
    return (t.waits.kind, t.waits.resource) if t.waits is not None else (None, None)


def _held(stacks: List[List[str]]) -> int:
    """Outermost frames identical in every sample."""
    n = 0
    while all(len(s) > n for s in stacks) and len({s[len(s) - 1 - n] for s in stacks}) == 1:
        n += 1
    return n


def classify(seen: List[Tuple[Sample, Thread]]) -> ThreadProgress:
    """One thread's progress over the samples it was seen in (module doc: stuck, progressing,
    spinning, unknown)."""
    last_sample, last = seen[-1]
    stats = [s.stats.get(t.tid) for s, t in seen if t.tid is not None]
    stats = [st for st in stats if st is not None]
    prog = ThreadProgress(samples=len(seen))
    if stats:
        prog.os_state, prog.wchan = stats[-1].state, stats[-1].wchan
    if len(seen) < 2:
        return prog
    prog.window_s = round(last_sample.at - seen[0][0].at, 3)
    if len(stats) >= 2:
        prog.cpu_s = round(max(0.0, stats[-1].cpu_s - stats[0].cpu_s), 3)
        if stats[0].switches is not None and stats[-1].switches is not None:
            prog.wakeups = max(0, stats[-1].switches - stats[0].switches)
    stacks = [_keys(t) for _s, t in seen]
    busy = prog.cpu_s
    if len(stats) >= 2 and stats[0].runnable_s is not None and stats[-1].runnable_s is not None:
        busy = max(0.0, stats[-1].runnable_s - stats[0].runnable_s)
    # The time the thread could run: the window less the reads that held it stopped (a cold read of
    # a GPU rank holds it for seconds, and a spinning thread then looks idle; 4-GPU runs, issue 21).
    free_s = max(0.0, prog.window_s - sum(s.stopped_s for s, _t in seen[:-1]))
    prog.held = _held(stacks)
    last_keys = set(stacks[-1])
    changed: List[str] = []
    for st in stacks[:-1]:
        for k in st:
            if k not in last_keys and k not in changed:
                changed.append(k)
    prog.changed = changed[:MAX_CHANGED]
    same_wait = len({_wait_key(t) for _s, t in seen}) == 1
    same = all(s == stacks[-1] for s in stacks) and same_wait
    # Python locals that changed between samples: the thread ran Python code, wherever it was caught
    fingerprints = [t.py_activity for _s, t in seen]
    ran_python = None not in fingerprints and len(set(fingerprints)) > 1
    same_place = all(_place(t) == _place(last) for _s, t in seen)
    # Only unnamed frames differ under Python frames that held: the unwinder's guesses through a
    # stripped driver (a busy-wait's pc moves between samples), not the thread's progress.
    differing = set().union(*stacks) - set.intersection(*(set(s) for s in stacks))
    noise = same_place and same_wait and bool(differing) and all(k.startswith("?? (") for k in differing)
    spinning = busy is not None and free_s > 0 and busy >= SPIN_SHARE * free_s
    woke = prog.wakeups is not None and prog.wakeups > WAKEUPS_PER_SAMPLE * len(seen) + 4
    # A thread that never woke (beyond the reads' own interruptions) and used no CPU did not run, so
    # it cannot have moved: a stack that reads differently is the unwinder's, not the thread's.
    asleep = (prog.wakeups is not None and not woke and busy is not None
              and busy < 0.02 * free_s + 0.01)
    if asleep:
        prog.state, prog.changed = "stuck", []
    elif ran_python:
        prog.state = "progressing"
        where = next((f.function for f in last.all_frames() if f.kind == "python"), None) or "its Python frames"
        prog.changed = (prog.changed + ["Python locals changed in %s" % where])[:MAX_CHANGED]
    elif same or noise or (same_place and spinning):
        if spinning:
            prog.state = "spinning"
        elif woke:
            prog.state = "progressing"  # a loop through the same wait: every sample caught it there
            prog.changed = (prog.changed + ["woke %d times in the same place" % prog.wakeups])[:MAX_CHANGED]
        else:
            prog.state = "stuck"
    else:
        prog.state = "progressing"
    return prog


def merge_samples(history: List[Sample], interval: float) -> Process:
    """The first sample's process (its identity and facts), with the last sample's threads, each
    with its ``progress``; the process gets ``samples``."""
    base, last = history[0].process, history[-1].process
    by_tid: List[Dict[Optional[int], Thread]] = [{t.tid: t for t in s.process.threads} for s in history]
    threads = []
    for t in last.threads:
        seen = [(s, m[t.tid]) for s, m in zip(history, by_tid) if t.tid in m]
        t.progress = classify(seen)
        threads.append(t)
    base.threads = threads
    base.samples = Samples(count=len(history), window_s=round(history[-1].at - history[0].at, 3),
                           interval_s=interval)
    return base
