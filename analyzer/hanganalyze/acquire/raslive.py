"""NCCL RAS queried live while the stacks of ``--job`` / ``--pid`` are sampled: the job's own counts.

Stack samples over a second cannot tell a stopped rank from a slow one; NCCL's RAS thread counts
every rank's collectives (``ncclras.py``).  So for live inputs whose processes have NCCL loaded,
the RAS port (``NCCL_RAS_ADDR`` of the rank's environment, else localhost:28028) is queried in a
background thread once per sample round (``sampling.py``'s rounds: the first at once, then every
``interval``) for as long as the sampling goes on (its window may grow), at most ``MAX_QUERIES``.
When the queries accuse a rank of being stuck over less than ``STUCK_WINDOW_S``, one more is taken
at the end of that window: a step longer than the sampling must not read as a stopped rank.  Not
when the stack samples already settled it (``settled_by_stacks``: no count moved, no thread in doubt,
and the rank behind never woke in any sample): then the run ends with the sampling (on 2 GPU ranks
a stopped rank's ``--job`` took 2.3-2.7 s, one of them this wait), the queries so far are kept, and
over that shorter window ``analyze/rasprogress.py`` calls no rank stuck (one note says why).

What the user is told, once: nothing when no process has NCCL loaded (a CPU or gloo-only job);
one note when NCCL is loaded but RAS is off (``NCCL_RAS_ENABLE=0``), nothing listens, or it does
not answer.  Every query has its own deadline (``ncclras.query_ras``), and ``finish`` waits for the
thread at most that long: never a hang, whatever the port does.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from hanganalyze.acquire.many import Input
from hanganalyze.acquire.procfs import read_proc
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.ncclras import RasQuery

#: A library mapped in a process that means NCCL (a RAS thread once a communicator exists).
NCCL_LIBRARY = re.compile(rb"/lib(?:nccl|torch_cuda)[^/\n]*\.so")
#: Ranks whose maps are read for NCCL: none of the first 16 has it, none of the job has.
MAX_CHECKED = 16
#: At most this many queries per run (the sampling window may grow).
MAX_QUERIES = 12
#: A rank accused of being stuck over less than this window gets more queries (bounded by it).
STUCK_WINDOW_S = 2.0
#: Seconds for one query in all (connect, the RAS network's own collection, the answer).
QUERY_TIMEOUT_S = 2.0
CONNECT_TIMEOUT_S = 0.3
#: Answers of another job (the port shared) asked again per round, at most.
RETRIES = 3
#: Spacing of queries at least (a RAS query is a collective of the RAS network: not too often).
MIN_SPACING_S = 0.25


def _environ(pid: int) -> Dict[str, str]:
    raw = read_proc(pid, "environ", 1 << 20) or b""
    env: Dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key.startswith(b"NCCL_RAS"):
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def nccl_process(pids: Sequence[int]) -> Optional[int]:
    """The first of ``pids`` with NCCL mapped (``/proc/PID/maps``), or None; the first
    ``MAX_CHECKED`` only (the ranks of one job load the same libraries)."""
    for pid in pids[:MAX_CHECKED]:
        maps = read_proc(pid, "maps", 64 << 20)
        if maps and NCCL_LIBRARY.search(maps):
            return pid
    return None


def _counts(q: RasQuery) -> Dict[tuple, int]:
    """(communicator, rank, op) -> count of one query."""
    return {(c.hash, r.rank, op): n for c in q.communicators for r in c.ranks for op, n in r.counts.items()}


def behind_ranks(first: RasQuery, last: RasQuery) -> List[Tuple[Optional[str], Optional[int]]]:
    """(communicator, rank) of each rank behind another of its communicator in ``last`` whose count
    is what it was in ``first`` (the same query twice: any rank behind)."""
    before, now = _counts(first), _counts(last)
    top: Dict[tuple, int] = {}
    for (comm, _rank, op), n in now.items():
        top[(comm, op)] = max(n, top.get((comm, op), n))
    return list(dict.fromkeys((comm, rank) for (comm, rank, op), n in now.items()
                              if n < top[(comm, op)] and before.get((comm, rank, op)) == n))


def stuck_candidate(first: RasQuery, last: RasQuery) -> bool:
    """Whether a rank is behind and did not move (``behind_ranks``).  Only to decide whether to
    query longer: the verdict is ``analyze/rasprogress.py``'s."""
    return bool(behind_ranks(first, last))


def counts_moved(queries: Sequence[RasQuery]) -> bool:
    """Whether any rank's count of any collective changed between the queries: the job moves."""
    seen: Dict[tuple, int] = {}
    for q in queries:
        for key, n in _counts(q).items():
            if seen.setdefault(key, n) != n:
                return True
    return False


def settled_by_stacks(snapshot: Snapshot, queries: Sequence[RasQuery]) -> List[int]:
    """The pids of the ranks RAS has behind and not moving, when the stack samples already say,
    unambiguously, that each of them stopped; else []: no count moved in any query, no process's
    sampling was extended (no thread in doubt anywhere), and each rank behind is a sampled process
    of this run whose main thread and every thread with Python frames never woke (no wake-up of its
    own, no CPU: ``sampling.classify``'s "never-woke").  Then the run is not held open for RAS's
    ``STUCK_WINDOW_S``: a step longer than the sampling would have shown a thread that woke, ran or
    moved, and the stack findings decide (RAS under that window calls no rank stuck)."""
    if len(queries) < 2 or counts_moved(queries):
        return []
    behind = behind_ranks(queries[0], queries[-1])
    pid_of = {(c.hash, r.rank): r.pid for c in queries[-1].communicators for r in c.ranks}
    pids = list(dict.fromkeys(pid_of.get(key) for key in behind))
    procs = {p.pid: p for p in snapshot.processes if p.pid is not None and p.source == "live"}
    if not pids or None in pids or any(p.samples is not None and p.samples.extended for p in procs.values()):
        return []
    for pid in pids:
        proc = procs.get(pid)
        if proc is None or proc.samples is None or proc.samples.count < 2:
            return []
        watched = [t for t in proc.threads if t.tid == pid or any(f.kind == "python" for f in t.all_frames())]
        if not any(t.tid == pid for t in watched) or not all(
                t.progress is not None and t.progress.state == "stuck" and t.progress.evidence == "never-woke"
                for t in watched):
            return []
    return [p for p in pids if p is not None]


class RasSampler:
    """The queries of one run, taken in a thread (module doc)."""

    def __init__(self, env: Dict[str, str], samples: int, interval: float, pids: Sequence[int] = ()) -> None:
        self.env = env
        self.pids = set(pids)  # the job's processes: an answer about none of them is another job's
        self.foreign: List[int] = []  # pids of the other jobs whose answers were left out
        self.samples = max(1, samples)
        self.interval = max(MIN_SPACING_S, interval)
        self.queries: List[RasQuery] = []
        self.notes: List[str] = []
        self.addr: Optional[str] = None
        self.failed = 0
        self.asked = 0
        self.settled: Optional[str] = None  # why the window was not held (``_extend``), for the notes
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @classmethod
    def for_inputs(cls, inputs: Sequence[Input], samples: int, interval: float) -> Optional[RasSampler]:
        """A sampler when a live rank has NCCL loaded; None otherwise (no note: no NCCL, no RAS)."""
        pids = [i.pid for i in inputs if i.pid is not None and i.parent_pid is None]
        pid = nccl_process(pids) if pids else None
        if pid is None:
            return None
        return cls(_environ(pid), samples, interval, [i.pid for i in inputs if i.pid is not None])

    def start(self) -> None:
        if self.env.get("NCCL_RAS_ENABLE", "").strip() == "0":
            self.notes.append("NCCL RAS is off in this job (NCCL_RAS_ENABLE=0): no NCCL counts; without it "
                              "stuck and slow are told from the stacks alone")
            return
        self._thread = threading.Thread(target=self._run, name="nccl-ras", daemon=True)
        self._thread.start()

    def _query(self) -> bool:
        """One answer about this job: another job's (several jobs' RAS threads on one host share the
        port, each answering for its own job) is asked again, ``RETRIES`` times at most."""
        from hanganalyze.acquire.ncclras import query_ras  # here: only a job with NCCL (start-up time: 20 ms)

        for _ in range(RETRIES + 1):
            if self.asked >= MAX_QUERIES:
                return False
            self.asked += 1
            answer = query_ras(connect_timeout=CONNECT_TIMEOUT_S, timeout=QUERY_TIMEOUT_S, env=self.env)
            self.addr = answer.addr
            if answer.query is None:
                break
            pids = {r.pid for c in answer.query.communicators for r in c.ranks if r.pid is not None}
            if not self.pids or not pids or pids & self.pids:
                self.queries.append(answer.query)
                return True
            self.foreign.extend(p for p in sorted(pids) if p not in self.foreign)
        else:
            return False
        self.failed += 1
        if answer.note and answer.note not in self.notes:
            self.notes.append(answer.note)
        return False

    def _run(self) -> None:
        t0 = time.monotonic()
        for k in range(MAX_QUERIES):
            if self.asked >= MAX_QUERIES:
                return
            # the round's time, but never a burst after a query that took long (a rank held by a read)
            due = max(t0 + k * self.interval, time.monotonic() + MIN_SPACING_S)
            if k and self._stop.wait(due - time.monotonic()):
                return  # the sampling ended: so does the querying (``finish`` may add one)
            if not self._query() and not self.queries and self.failed:
                return  # RAS off or unreachable: one note, no retries

    def _extend(self, snapshot: Snapshot) -> None:
        """More queries while a stuck verdict rests on a window shorter than ``STUCK_WINDOW_S``,
        unless the stacks already settled it (``settled_by_stacks``: one note says so)."""
        stopped = settled_by_stacks(snapshot, self.queries)
        if stopped:
            qs = self.queries
            window = (qs[-1].time_s or 0.0) - (qs[0].time_s or 0.0)
            if window < STUCK_WINDOW_S:
                self.settled = ("RAS queried over the stack samples' window only (%.1f s): pid%s %s never woke in "
                                "any sample, so the run was not held to RAS's %g s window"
                                % (window, "s" * (len(stopped) > 1), ", ".join(str(p) for p in stopped),
                                   STUCK_WINDOW_S))
            return
        while self.asked < MAX_QUERIES:
            qs = self.queries
            window = (qs[-1].time_s or 0.0) - (qs[0].time_s or 0.0)
            if window >= STUCK_WINDOW_S or not stuck_candidate(qs[0], qs[-1]):
                return
            time.sleep(STUCK_WINDOW_S - window + 0.01)  # one more query, at the end of the window
            if not self._query():
                return

    def stop(self) -> None:
        """No further query (the run ends without a snapshot)."""
        self._stop.set()

    def finish(self, snapshot: Snapshot) -> None:
        """Stop querying (bounded wait), then put the series, or the note, on ``snapshot.nccl_ras``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(QUERY_TIMEOUT_S + 0.5)
            if self._thread.is_alive():  # cannot happen with query_ras's deadline; never wait longer
                self.notes.append("NCCL RAS: a query was still running after %g s: left out" % QUERY_TIMEOUT_S)
            elif self.queries and self.samples > 1:  # one sample is one instant: no time verdict to back
                self._extend(snapshot)
        from hanganalyze.acquire.ncclras import series  # here: only a job with NCCL (start-up time)

        got = series(list(self.queries))
        notes = self.notes
        if self.queries and notes:  # some answered: the others' failures in one line
            notes = ["%d of %d RAS queries got no answer (%s)" % (self.failed, self.failed + len(self.queries),
                                                                  notes[0])]
        if self.foreign:
            notes.append("%d RAS answer%s of another job on this host left out (pids %s): NCCL_RAS_ADDR=host:port "
                          "per job keeps them apart" % (self.asked - len(self.queries) - self.failed,
                                                        "s were" if self.asked - len(self.queries) - self.failed != 1
                                                        else " was", ", ".join(str(p) for p in self.foreign[:8])))
        got.notes = notes + got.notes + ([self.settled] if self.settled else [])
        got.live = self.addr or "localhost:28028"
        if snapshot.nccl_ras is not None:  # saved RAS output was given too: its queries are the evidence
            snapshot.nccl_ras.notes.append("%d live RAS quer%s of %s left out: saved RAS output was given"
                                           % (len(got.queries), "y" if len(got.queries) == 1 else "ies", got.live))
            return
        if got.queries or got.notes:
            snapshot.nccl_ras = got


def sampler(inputs: Sequence[Input], samples: int, interval: float) -> Optional[RasSampler]:
    """A started sampler for these inputs, or None (no live NCCL process): the hook ``request.py`` calls."""
    s = RasSampler.for_inputs(inputs, samples, interval)
    if s is not None:
        s.start()
    return s
