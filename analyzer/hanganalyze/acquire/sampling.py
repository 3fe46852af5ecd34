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

Evidence that cannot alias with a periodic step (issue 31): the intervals are jittered (random
within +-40 % of ``--interval``, seeded per run; ``HANGANALYZE_SAMPLE_SEED`` fixes it), and each
thread's kernel counters are read just before and just after every read, so the wake-ups our own
ptrace stops cause are measured and taken off (``own_wakeups``): a thread caught in the same sleep
in every sample that woke, ran and slept again in between is a sleep in a loop, not a hang.  Before
a thread is called stuck although it woke in its wait (stuck or a slow loop?), sampling goes on
(``--max-window``, default 6 s in all) until it is seen to move or the bound is reached; a thread
that never woke and used no CPU is stuck at once.  ``ThreadProgress.evidence`` says what decided.

The ranks of a job are sampled in rounds (every process once per round, in a pool), so 3 samples
of 4 ranks take about the window plus three reads, not four windows.  Cores, texts and JSONs are one
sample and pass through untouched.  The analysis of these facts is ``analyze/progress.py``.
"""

from __future__ import annotations

import os
import random
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
#: ptrace interrupt stops a sleeping thread (one switch), which sleeps again once detached (one more;
#: measured: 2 per read for a thread in a sleep, a lock or a condition).  Where the counters around a
#: read show more, the measured count is taken off instead.
WAKEUPS_PER_SAMPLE = 2
#: Own wake-ups (beyond the reads') in one place from which a thread woke, ran and waited again.
WOKE_MIN = 2
#: Intervals are drawn within +-JITTER of ``--interval``: samples cannot lock onto a periodic step.
JITTER = 0.4
#: Default bound (seconds, whole window) of the adaptive window; ``--max-window 0``: no extension.
DEFAULT_MAX_WINDOW = 6.0
SEED_ENV = "HANGANALYZE_SAMPLE_SEED"
#: A rank that never woke while another rank moved: watched this many base windows at most.
CROSS_FACTOR = 3.0
#: Frames listed in ``progress.changed`` per thread.
MAX_CHANGED = 8

AcquireOne = Callable[[Input], Snapshot]


@dataclass
class Sample:
    """One read of one live process: when, the kernel's thread facts just before, the stacks."""

    at: float
    stats: Dict[int, ThreadStat]
    process: Process
    #: The counters just after the read: what the read itself cost each thread (None: not measured).
    after: Optional[Dict[int, ThreadStat]] = None

    @property
    def stopped_s(self) -> float:
        """How long the read held the process stopped (its threads could not run meanwhile)."""
        return self.process.stopped_s or 0.0


def check_options(samples: Optional[int], interval: Optional[float], max_window: Optional[float] = None) -> None:
    """One-line errors before any process is stopped."""
    if max_window is not None and not 0.0 <= max_window <= 600.0:
        raise InputError("--max-window must be between 0 and 600 seconds (got %s)" % max_window)
    if samples is not None and not 1 <= samples <= MAX_SAMPLES:
        raise InputError("--samples must be between 1 and %d (got %s)" % (MAX_SAMPLES, samples))
    if interval is not None and not 0.0 <= interval <= 600.0:
        raise InputError("--interval must be between 0 and 600 seconds (got %s)" % interval)


def read_live(reading: EngineRequest, pid: int) -> Snapshot:
    """Every sample after the first: ``engine.from_pid``, the one place a live pid is read."""
    return engine.from_pid(pid, reading)


def make_rng() -> Tuple[random.Random, int]:
    """The run's jitter generator and its seed (``HANGANALYZE_SAMPLE_SEED`` when set: a test fixes it)."""
    raw = os.environ.get(SEED_ENV, "").strip()
    seed = int(raw) if raw.lstrip("-").isdigit() else int.from_bytes(os.urandom(4), "little")
    return random.Random(seed), seed


def jittered(rng: random.Random, interval: float) -> float:
    """One interval within +-JITTER of ``interval``."""
    return interval * (1.0 + rng.uniform(-JITTER, JITTER))


def acquire_sampled(inputs: Sequence[Input], acquire_one: AcquireOne, reading: EngineRequest,
                    parallel: Optional[int] = None, progress: Optional[Callable[[str], None]] = None,
                    samples: int = DEFAULT_SAMPLES, interval: float = DEFAULT_INTERVAL,
                    max_window: float = DEFAULT_MAX_WINDOW) -> Snapshot:
    """``many.acquire_all``, with every live input read ``samples`` times (more while a thread
    that woke in its wait would be called stuck, up to ``max_window`` seconds) and merged (module doc)."""
    live = [i.pid for i in inputs if i.pid is not None]
    first: Dict[int, Tuple[float, Dict[int, ThreadStat]]] = {}
    after: Dict[int, Dict[int, ThreadStat]] = {}

    def first_read(inp: Input) -> Snapshot:
        if inp.pid is not None and samples > 1:
            first[inp.pid] = (time.monotonic(), thread_stats(inp.pid))
            try:
                return acquire_one(inp)
            finally:
                after[inp.pid] = thread_stats(inp.pid)
        return acquire_one(inp)

    snapshot = acquire_all(inputs, first_read, parallel, progress)
    if samples <= 1 or not live:
        return snapshot
    procs = {p.pid: p for p in snapshot.processes if p.source == "live" and p.pid in first and not p.error}
    history: Dict[int, List[Sample]] = {pid: [Sample(first[pid][0], first[pid][1], p, after.get(pid))]
                                        for pid, p in procs.items()}
    if progress:
        progress("sampling %d process(es) %d times, about %g s apart" % (len(procs), samples, interval))
    start = min((first[pid][0] for pid in procs), default=time.monotonic())
    rng, seed = make_rng()
    from concurrent.futures import ThreadPoolExecutor  # here: one sample needs no pool (start-up time, issue 21)

    pool = ThreadPoolExecutor(max_workers=parallel or default_parallel([Input(pid=p) for p in procs]),
                              thread_name_prefix="sample")
    extended: Optional[str] = None
    try:
        due = start
        k = 1
        while procs:
            if k >= samples:
                doubt = ambiguous(history)
                # a rank that never woke while another moved is watched CROSS_FACTOR windows at most
                # (a straggler looping outside the collective keeps the others waiting for ever)
                bound = max_window if any(p.own_wakeups for _pid, _t, p in doubt) \
                    else min(max_window, CROSS_FACTOR * (samples - 1) * interval)
                if not doubt or time.monotonic() - start + interval > bound:
                    break
                if k == samples:
                    extended = _doubt_text(doubt)
                    if progress:
                        progress("window extended: %s" % extended)
            due += jittered(rng, interval)
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            for pid, got in zip(list(procs), pool.map(lambda pid: _one_sample(reading, pid), list(procs))):
                if isinstance(got, Sample):
                    history[pid].append(got)
                else:
                    procs[pid].notes.append("sample %d failed (%s): %d sample(s) used"
                                            % (k + 1, got, len(history[pid])))
                    del procs[pid]  # gone or unreadable: what it showed so far stands
            k += 1
    finally:
        pool.shutdown(wait=True)
    if extended:
        window = max(h[-1].at - h[0].at for h in history.values())
        end = "still in doubt at the bound: called stuck" if ambiguous(history) else "then seen to move"
        extended = "sampling went on to %.1f s: %s; %s" % (window, extended, end)
    for hist in history.values():
        proc = merge_samples(hist, interval)
        if proc.samples is not None:
            proc.samples.seed, proc.samples.extended = seed, extended
            if extended and len(history) == 1:  # a job shows it once, in its job view
                proc.notes.append(extended)
    return snapshot


def ambiguous(history: Dict[int, List[Sample]]) -> List[Tuple[int, Thread, ThreadProgress]]:
    """(pid, thread, progress) of each thread that would be called stuck on doubtful evidence: the
    main thread or one with Python frames (where a rank or a program is), held in one place with a
    few own wake-ups but some; or a rank's main thread that never woke while the main thread of
    another rank progressed (a job that moves, whose step may be longer than the window; an idle
    helper process without a rank is not waited for).  Where nothing moved, a thread that never
    woke is not in doubt: stuck at once."""
    out = []
    mains: List[Tuple[int, Thread, ThreadProgress]] = []
    for pid, hist in history.items():
        if len(hist) < 2:
            continue
        by_tid = [{t.tid: t for t in s.process.threads} for s in hist]
        for t in hist[-1].process.threads:
            if t.tid != pid and not any(f.kind == "python" for f in t.all_frames()):
                continue
            prog = classify([(s, m[t.tid]) for s, m in zip(hist, by_tid) if t.tid in m])
            if t.tid == pid and hist[0].process.rank is not None:
                mains.append((pid, t, prog))
            if prog.state == "stuck" and prog.own_wakeups:
                out.append((pid, t, prog))
    if any(p.state == "progressing" for _pid, _t, p in mains):
        out.extend(m for m in mains if m[2].state == "stuck" and not m[2].own_wakeups)
    return out


def _doubt_text(doubt: List[Tuple[int, Thread, ThreadProgress]]) -> str:
    pid, t, prog = doubt[0]
    where = next((f.function for f in t.all_frames() if f.kind == "python" and f.function), None) \
        or next((f.function for f in t.all_frames() if f.function), None) or "one place"
    more = " (and %d more)" % (len(doubt) - 1) if len(doubt) > 1 else ""
    why = ("woke %d time%s of its own" % (prog.own_wakeups, "s" * (prog.own_wakeups != 1))) if prog.own_wakeups \
        else "never woke while another process moved"
    return "pid %d thread %s held its place in %s over %.1f s but %s%s: stuck, or a step longer than the window?" % (
        pid, t.tid, where, prog.window_s or 0.0, why, more)


def _one_sample(reading: EngineRequest, pid: int):
    """A Sample, or the one-line reason it could not be taken."""
    at, stats = time.monotonic(), thread_stats(pid)
    try:
        snap = read_live(reading, pid)
    except Exception as e:  # noqa: BLE001 - the process exited mid-window: keep the earlier samples
        return " ".join(str(e).split())[:200] or type(e).__name__
    if not snap.processes or not snap.processes[0].threads:
        return "no threads read"
    return Sample(at, stats, snap.processes[0], thread_stats(pid))


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
            prog.own_wakeups = max(0, prog.wakeups - _read_wakeups(seen))
        if stats[0].involuntary is not None and stats[-1].involuntary is not None:
            prog.involuntary = max(0, stats[-1].involuntary - stats[0].involuntary)
        prog.syscall = stats[-1].syscall
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
    prog.place_samples = sum(1 for _s, t in seen if _place(t) == _place(last))
    spinning = busy is not None and free_s > 0 and busy >= SPIN_SHARE * free_s
    woke = prog.own_wakeups is not None and prog.own_wakeups >= WOKE_MIN
    # A thread that never woke (beyond the reads' own interruptions) and used no CPU did not run, so
    # it cannot have moved: a stack that reads differently is the unwinder's, not the thread's.
    asleep = (prog.own_wakeups == 0 and busy is not None and busy < 0.02 * free_s + 0.01)
    if asleep:
        prog.state, prog.changed, prog.evidence = "stuck", [], "never-woke"
    elif ran_python:
        prog.state, prog.evidence = "progressing", "python-locals"
        where = next((f.function for f in last.all_frames() if f.kind == "python"), None) or "its Python frames"
        prog.changed = (["Python locals changed in %s" % where] + prog.changed)[:MAX_CHANGED]  # the evidence first
    elif same or noise or (same_place and spinning):
        if spinning:
            prog.state, prog.evidence = "spinning", "cpu"
        elif woke:
            prog.state, prog.evidence = "progressing", "woke"  # a loop through the same wait
            prog.changed = (["woke %d times in the same place" % prog.own_wakeups] + prog.changed)[:MAX_CHANGED]
        else:
            prog.state, prog.evidence = "stuck", "same-place"
    else:
        prog.state, prog.evidence = "progressing", "frames"
    return prog


def _read_wakeups(seen: List[Tuple[Sample, Thread]]) -> int:
    """Wake-ups the reads between the thread's first and last counters caused: per read, what the
    counters around it measured, at least WAKEUPS_PER_SAMPLE (the sleep it goes back to once
    detached may come after the counters are read again)."""
    total = 0
    for s, t in seen[:-1]:
        before = s.stats.get(t.tid) if t.tid is not None else None
        after = s.after.get(t.tid) if s.after is not None and t.tid is not None else None
        cost = WAKEUPS_PER_SAMPLE
        if before is not None and after is not None and before.switches is not None and after.switches is not None:
            cost = max(cost, after.switches - before.switches)
        total += cost
    return total


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
