"""``hanganalyze watch``: when a watched job has stopped making progress, from cheap counters.

The watcher reads, every poll, what the kernel counts for each rank without stopping it
(``acquire/procfs.thread_stats``): CPU seconds of all its threads, and the voluntary context
switches of its main thread (each one a sleep and a wake-up: a training loop's main thread waits
for every collective, every batch, every ``time.sleep``, so it switches at least once per step).
This module decides from a series of such readings; it reads nothing itself, so it is tested on
recorded series.

Over the last ``stall`` seconds (the window), per rank present at both ends:

* a rank whose main thread switched more than ``min_switches`` times moved: **progress**.  A slow
  rank (a data loader that sleeps 0.4 s a step) moves too: it never counts as stuck.
* otherwise, when every rank used less than ``cpu_share`` of the window in CPU time: **quiet**, a
  hang candidate (a blocked collective, a deadlock, a straggler asleep);
* otherwise **busy**: the main threads did not sleep but something burns CPU: a busy-wait in a
  hung NCCL/CUDA call looks like this, and so does a compute-bound step that never sleeps.

Neither quiet nor busy is a verdict: the watcher then takes a few stack samples (the capture
itself, ``acquire/sampling.py``) and calls it a hang only when no thread of any rank progressed
over them; otherwise it keeps watching and asks again no sooner than one window later (``backoff``).
A rank set that changed within the window (a worker started, restarted or exited) is progress:
the window starts again.  Fewer than ``stall`` seconds of readings: **warming**.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

#: Main-thread voluntary switches over the window that still count as not moving: a wait that
#: times out and waits again (every few minutes) must not hide a hang.
MIN_SWITCHES = 2
#: Share of the window a rank may use in CPU time and still be quiet (a watchdog thread that
#: polls, the interpreter's periodic work).
CPU_SHARE = 0.05


@dataclass(frozen=True)
class RankCounters:
    """One rank at one reading: CPU seconds of all its threads, its main thread's voluntary switches."""

    cpu_s: float
    main_switches: Optional[int]


@dataclass
class Decision:
    state: str  # "warming" | "progress" | "quiet" | "busy"
    reason: str
    #: Per rank pid: (CPU seconds, main-thread switches) over the window; empty while warming.
    deltas: Dict[int, Tuple[float, Optional[int]]] = field(default_factory=dict)

    @property
    def candidate(self) -> bool:
        """Worth a few stack samples: nothing says the job moved."""
        return self.state in ("quiet", "busy")


class StallDetector:
    """Readings in, a ``Decision`` out (see the module doc).  ``backoff`` marks a candidate that
    the samples showed moving: no new candidate until a whole window of readings has passed."""

    def __init__(self, stall: float, min_switches: int = MIN_SWITCHES, cpu_share: float = CPU_SHARE) -> None:
        if stall <= 0:
            raise ValueError("stall must be positive")
        self.stall = stall
        self.min_switches = min_switches
        self.cpu_share = cpu_share
        self._history: List[Tuple[float, Dict[int, RankCounters]]] = []
        self._not_before = float("-inf")

    def observe(self, at: float, ranks: Dict[int, RankCounters]) -> None:
        """A reading at monotonic time ``at``: each live rank's counters by pid."""
        self._history.append((at, dict(ranks)))
        # keep one reading at or before the window's start, and everything after it
        while len(self._history) > 2 and self._history[1][0] <= at - self.stall:
            self._history.pop(0)

    def backoff(self, at: float) -> None:
        self._not_before = at + self.stall

    def decide(self) -> Decision:
        if not self._history:
            return Decision("warming", "no reading yet")
        now, last = self._history[-1]
        start_at, first = self._history[0]
        if now - start_at < self.stall:
            return Decision("warming", "watched %.1f s of %.1f s" % (now - start_at, self.stall))
        if not last:
            return Decision("warming", "no rank is running")
        if set(first) != set(last) or any(set(r) != set(last) for _t, r in self._history):
            return Decision("progress", "the ranks changed within the window")
        window = now - start_at
        deltas: Dict[int, Tuple[float, Optional[int]]] = {}
        moved: List[int] = []
        busy: List[int] = []
        for pid, c in last.items():
            c0 = first[pid]
            cpu = max(0.0, c.cpu_s - c0.cpu_s)
            sw = (None if c.main_switches is None or c0.main_switches is None
                  else max(0, c.main_switches - c0.main_switches))
            deltas[pid] = (round(cpu, 3), sw)
            if sw is not None and sw > self.min_switches:
                moved.append(pid)
            elif cpu >= self.cpu_share * window:
                busy.append(pid)
        if moved:
            return Decision("progress", "the main thread of pid %s woke %d+ times in %.0f s"
                            % (moved[0], deltas[moved[0]][1] or 0, window), deltas)
        if now < self._not_before:
            return Decision("progress", "samples showed progress %.0f s ago" % (self._not_before - now), deltas)
        if busy:
            return Decision("busy", "no main thread woke in %.0f s but pid %s used %.1f s of CPU"
                            % (window, busy[0], deltas[busy[0]][0]), deltas)
        return Decision("quiet", "no rank woke or used CPU for %.0f s" % window, deltas)
