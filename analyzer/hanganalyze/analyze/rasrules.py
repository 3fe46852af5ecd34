"""The NCCL RAS job rules: ``rasprogress``'s verdicts on the job's RAS queries made findings.

RAS numbers ranks per communicator, so a verdict names a process by the pid RAS reports, never by
the rank number: a communicator of a tensor-parallel group has ranks 0..3 on every node.  Queries
whose pids are none of the job's processes (another job's RAS thread answered on the same port)
make no finding.  Where no process of the input has a pid (saved RAS output alone, or beside
stack texts without pids), the communicator's own ranks are named, and a process only where the
communicator spans every process and the process's rank is that communicator rank.

* ``nccl-ras-stuck``: a rank behind whose counts did not move over the queries, 2 s or more (hang);
  over a shorter window (``rasprogress.BEHIND``: a live run the stacks settled) no RAS finding:
  the stack findings decide, and no slow or progressing finding of RAS supersedes them;
* ``nccl-ras-slow-rank``: counts move, one rank behind in every query (info, never hang): the
  stack-only straggler and peer-wait findings on that communicator's processes are superseded;
* ``nccl-ras-progressing``: every rank moves in some communicator, none stuck or slow: the
  stack-only hang findings on those processes are superseded;
* ``nccl-ras-error``: asynchronous / initialisation errors, abort flags, missing ranks.

One query gives no time verdict at all (``rasprogress.ONE_QUERY``): counts at one instant cannot
tell stuck from slow.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.crossrank import JobContext
from hanganalyze.analyze.findings import from_rule
from hanganalyze.analyze.rasprogress import (
    BEHIND,
    NO_VERDICT,
    PROGRESSING,
    SLOW,
    STUCK,
    CommProgress,
    RankLag,
    RankProblem,
    RasProgress,
    ras_progress,
)
from hanganalyze.analyze.ruledecl import rule
from hanganalyze.analyze.rules import load_rules
from hanganalyze_gdbext.model import Evidence, Finding, Snapshot

STUCK_ID = "nccl-ras-stuck"
SLOW_ID = "nccl-ras-slow-rank"
PROGRESSING_ID = "nccl-ras-progressing"
ERROR_ID = "nccl-ras-error"
RAS_IDS = frozenset((STUCK_ID, SLOW_ID, PROGRESSING_ID, ERROR_ID))
RULE = "nccl-ras"


class _Join:
    """Communicator ranks -> the job's processes (by pid; by rank only where nothing has a pid)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.procs = snapshot.processes
        self.by_pid: Dict[int, int] = {p.pid: i for i, p in enumerate(self.procs) if p.pid is not None}

    def process(self, pid: Optional[int], rank: Optional[int], comm_size: Optional[int]) -> Optional[int]:
        if self.by_pid:
            return self.by_pid.get(pid) if pid is not None else None
        if rank is None or comm_size != len(self.procs):
            return None
        return next((i for i, p in enumerate(self.procs) if p.rank == rank), None)

    def rank(self, pid: Optional[int], rank: Optional[int], comm_size: Optional[int]) -> Optional[int]:
        """The job's rank of that process where known, else the communicator's."""
        i = self.process(pid, rank, comm_size)
        if i is not None and self.procs[i].rank is not None:
            return self.procs[i].rank
        return rank

    def ours(self, pids: Sequence[int]) -> bool:
        """Whether a communicator is of this job: one of its pids is a process of the input."""
        return not self.by_pid or any(p in self.by_pid for p in pids)


def _pids(series_comms: Dict[str, List[int]], key: str) -> List[int]:
    return series_comms.get(key, [])


def _comm_pids(snapshot: Snapshot) -> Dict[str, List[int]]:
    """Every pid each communicator (by hash) reported, over all queries."""
    out: Dict[str, List[int]] = {}
    for q in snapshot.nccl_ras.queries if snapshot.nccl_ras is not None else []:
        for c in q.communicators:
            pids = out.setdefault(c.hash or "?", [])
            for r in list(c.ranks) + list(c.missing_ranks):
                if r.pid is not None and r.pid >= 0 and r.pid not in pids:
                    pids.append(r.pid)
    return out


def _sizes(snapshot: Snapshot) -> Dict[str, Optional[int]]:
    out: Dict[str, Optional[int]] = {}
    for q in snapshot.nccl_ras.queries if snapshot.nccl_ras is not None else []:
        for c in q.communicators:
            out[c.hash or "?"] = c.size if c.size is not None else len(c.ranks) + len(c.missing_ranks)
    return out


def progress_of(snapshot: Snapshot) -> Optional[RasProgress]:
    """The verdict of the snapshot's RAS queries (None without any)."""
    if snapshot.nccl_ras is None or not snapshot.nccl_ras.queries:
        return None
    return ras_progress(snapshot.nccl_ras)


def _lag_text(lag: RankLag) -> str:
    behind = "/".join(str(b) for b in lag.behind)
    return "%s: %d behind per query (%s), %s" % (lag.op, max(lag.behind), behind,
                                                   "moving" if lag.moving else "not moving")


def _finding(rule_id: str, comms: Sequence[CommProgress], named: List[Tuple[Optional[int], Optional[int], str]],
             involved: List[int], confidence: float, title_many: bool = False) -> Finding:
    """One finding over ``comms``: ``named`` = (process, job rank, evidence text) of the ranks at fault."""
    rule = load_rules().by_id(rule_id)
    procs = list(dict.fromkeys([i for i, _r, _t in named if i is not None] + involved))
    ranks = sorted({r for _i, r, _t in named if r is not None})
    summary = comms[0].sentence
    if len(comms) > 1:
        summary += " (and %d more communicator%s)" % (len(comms) - 1, "s" * (len(comms) > 2))
    evidence = [Evidence(rank=r, process=i, rule=RULE, text=t) for i, r, t in named[:64]]
    title = rule.texts.get("title_many") if title_many and len(ranks) > 1 else None
    return from_rule(rule, procs[0] if procs else 0, summary, evidence, confidence, ranks=ranks,
                     processes=procs, title=title)


@rule("nccl-ras-stuck", "nccl-ras-slow-rank", "nccl-ras-progressing", "nccl-ras-error", stage="job",
      reads="Snapshot.nccl_ras: NCCL RAS queries over time, joined to processes by pid")
def nccl_ras_findings(ctx: JobContext) -> List[Finding]:
    """The four RAS rules (module doc), on the job's queries (``Snapshot.nccl_ras``)."""
    snapshot = ctx.snapshot
    prog = progress_of(snapshot)
    if prog is None:
        return []
    join = _Join(snapshot)
    pids, sizes = _comm_pids(snapshot), _sizes(snapshot)
    comms = [c for c in prog.communicators if join.ours(_pids(pids, c.comm))]
    if not comms:
        note = ("NCCL RAS: the queried communicators (pids %s) are none of this job's processes: not used"
                % ", ".join(str(p) for v in pids.values() for p in v[:8]))
        if prog.communicators and note not in snapshot.warnings:  # a report read back is analyzed again
            snapshot.warnings.append(note)
        return []

    def members(c: CommProgress) -> List[int]:
        return [i for i in (join.process(p, None, sizes.get(c.comm)) for p in _pids(pids, c.comm)) if i is not None]

    def lags(c: CommProgress, of: Sequence[RankLag]) -> List[Tuple[Optional[int], Optional[int], str]]:
        size = sizes.get(c.comm)
        return [(join.process(lag.pid, lag.rank, size), join.rank(lag.pid, lag.rank, size),
                 "communicator %s rank %d%s: %s" % (c.comm, lag.rank, " (pid %d)" % lag.pid if lag.pid else "",
                                                    _lag_text(lag))) for lag in of]

    out: List[Finding] = []
    stuck = [c for c in comms if c.state == STUCK]
    if stuck:
        named = [x for c in stuck for x in lags(c, c.stuck)]
        # every member is involved: the stuck rank launched fewer collectives, of no other kind, so the
        # stack-only readings of the others' waits (a mismatch of callers, a peer wait) are superseded
        out.append(_finding(STUCK_ID, stuck, named, [i for c in stuck for i in members(c)], 0.9, title_many=True))
    held = [c for c in comms if c.state == BEHIND]  # maybe stuck: nothing of RAS clears the stacks' reading
    slow = [c for c in comms if c.state == SLOW]
    if slow and not stuck and not held:
        named = [x for c in slow for x in lags(c, c.slow)]
        out.append(_finding(SLOW_ID, slow, named, [i for c in slow for i in members(c)], 0.8))
    moving = [c for c in comms if c.state == PROGRESSING]
    if moving and not stuck and not held and not slow and not any(c.state == NO_VERDICT for c in comms):
        seen = {p for c in comms for p in _pids(pids, c.comm)}
        moved = {p for c in moving for p in _pids(pids, c.comm)}
        if seen <= moved and (seen or len(moving) == len(comms)):
            out.append(_finding(PROGRESSING_ID, moving, [], [i for c in moving for i in members(c)], 0.8))
    bad = [c for c in comms if c.problems]
    if bad:
        named = [(join.process(p.pid, p.rank, sizes.get(c.comm)), join.rank(p.pid, p.rank, sizes.get(c.comm)),
                  "communicator %s: %s" % (c.comm, _problem(p))) for c in bad for p in c.problems]
        f = _finding(ERROR_ID, bad, named, [], 0.85)
        f.summary = "; ".join(t for _i, _r, t in named[:8]) + (" and %d more" % (len(named) - 8)
                                                               if len(named) > 8 else "")
        out.append(f)
    return out


def _problem(p: RankProblem) -> str:
    who = "rank %s" % p.rank if p.rank is not None else "a rank"
    if p.pid is not None:
        who += " (pid %d)" % p.pid
    return "%s %s" % (who, "is " + p.what if p.what in ("missing", "unresponsive", "dead") else p.what)
