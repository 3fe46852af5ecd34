"""Stuck or slow from NCCL RAS: what the change of the collective counts between queries proves.

One RAS query says how many collectives of each kind every rank has launched.  A rank one behind
is what a stopped rank shows, and also what a rank that is merely slower shows at the instant of
the query: NCCL's own text calls both "MISMATCH".  Only the change over time tells them apart:

* **stuck**: a rank is behind the others (in every query, or in the last ones over 2 s or more)
  and its counts did not move over a window of 2 s or more (whether or not the others moved: they
  can only launch ahead into collectives that cannot complete without it).  Behind in the last query only
  is not enough: on a 2x H200 slow job, a rank level at the first query read 15 -> 15 while its
  peer read 14 -> 16 (the rank was held stopped by the tool's own cold first read), and was
  wrongly called stuck;
* **behind**: the same over a window shorter than 2 s (a live run that did not wait for RAS's
  window because the stacks already settled it, ``acquire/raslive.py``): a step longer than the
  window looks the same, so RAS alone cannot tell stuck from slow and calls no rank stuck; the
  stacks decide;
* **slow**: counts move, and a rank is behind in every query while its own counts move too: it
  holds the job back but is not hung (never "stuck");
* **progressing**: counts move and no rank is behind in every query;
* **unchanged**: nothing moved and the ranks agree: an idle communicator, or every rank inside
  the same collective -- RAS cannot tell which (the stacks can);
* **one-query**: one query is a picture, no evidence over time;
* **no-verdict**: a count went down or a rank's pid changed (the communicator was re-created, or
  the queries are not in time order).

Missing / unresponsive / dead ranks, asynchronous and initialisation errors and abort flags are
reported as they are, beside the verdict.  Pure: records in (``model/ncclras.py``), typed results
with one sentence each out; no finding is made here (the rule list does that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

from hanganalyze_gdbext.model.ncclras import NCCL_OK_RESULTS, NCCL_RESULTS, RasCommunicator, RasQuery, RasSeries

STUCK = "stuck"
BEHIND = "behind"
SLOW = "slow"
PROGRESSING = "progressing"
UNCHANGED = "unchanged"
ONE_QUERY = "one-query"
NO_VERDICT = "no-verdict"

#: More ranks than this: counts are shown as "min-max" instead of one per rank.
_MAX_SHOWN_RANKS = 8


@dataclass(frozen=True)
class RankLag:
    """A rank behind the others in one op's counts."""

    rank: int
    op: str
    behind: Tuple[int, ...]  # how many collectives behind the most advanced rank, per query
    moving: bool  # its own count changed over the window
    pid: Optional[int] = None
    host: Optional[str] = None


@dataclass(frozen=True)
class RankProblem:
    """What RAS reports wrong with a rank: "missing", "unresponsive", "dead", an error, "aborted"."""

    rank: Optional[int]
    what: str
    pid: Optional[int] = None


@dataclass(frozen=True)
class CommProgress:
    """The verdict on one communicator over the queries that show it."""

    comm: str
    state: str  # STUCK | BEHIND | SLOW | PROGRESSING | UNCHANGED | ONE_QUERY | NO_VERDICT
    queries: int
    window_s: Optional[float]
    rate: Optional[float]  # collectives per second (the most advanced rank's, every op together)
    op: Optional[str]  # the op the sentence shows
    stuck: Tuple[RankLag, ...]
    slow: Tuple[RankLag, ...]
    problems: Tuple[RankProblem, ...]
    sentence: str
    #: Ranks behind and not moving over a window too short to call them stuck (state BEHIND).
    held: Tuple[RankLag, ...] = ()


@dataclass(frozen=True)
class RasProgress:
    """Every communicator's verdict, and one sentence for the job."""

    communicators: Tuple[CommProgress, ...]
    queries: int
    window_s: Optional[float]
    notes: Tuple[str, ...]
    sentence: str

    def in_state(self, state: str) -> Tuple[CommProgress, ...]:
        return tuple(c for c in self.communicators if c.state == state)


def ras_progress(queries: Union[RasSeries, Sequence[RasQuery]], interval_s: Optional[float] = None) -> RasProgress:
    """The verdict of queries in time order (``RasSeries`` or a list).  ``interval_s``: their
    spacing when they carry no time (text form); a series' own ``interval_s`` otherwise."""
    notes: List[str] = []
    if isinstance(queries, RasSeries):
        interval_s = interval_s if interval_s is not None else queries.interval_s
        notes.extend(queries.notes)
        queries = queries.queries
    qs = list(queries)
    order: List[str] = []
    seen: Dict[str, List[Tuple[int, RasCommunicator]]] = {}
    for i, q in enumerate(qs):
        for c in q.communicators:
            key = c.hash or "?"
            if key not in seen:
                order.append(key)
                seen[key] = []
            seen[key].append((i, c))
    comms = tuple(_comm(key, seen[key], qs, interval_s) for key in order)
    window = _window(qs, 0, len(qs) - 1, interval_s) if len(qs) > 1 else None
    if not comms and any(q.groups for q in qs):
        notes.append("the text form shows counts only where the ranks of a communicator differ: the ranks agreed "
                     "in every query, so progress cannot be measured (query the JSON form, NCCL >= 2.28.7)")
    return RasProgress(comms, len(qs), window, tuple(notes), _job_sentence(comms, len(qs), window, notes))


def _window(qs: Sequence[RasQuery], first: int, last: int, interval_s: Optional[float]) -> Optional[float]:
    t0, t1 = qs[first].time_s, qs[last].time_s
    if t0 is not None and t1 is not None:
        return t1 - t0
    if interval_s is not None:
        return interval_s * (last - first)
    return None


def _comm(key: str, present: List[Tuple[int, RasCommunicator]], qs: Sequence[RasQuery],
          interval_s: Optional[float]) -> CommProgress:
    n = len(present)
    comms = [c for _, c in present]
    window = _window(qs, present[0][0], present[-1][0], interval_s) if n > 1 else None
    ranks = sorted({r.rank for c in comms for r in c.ranks if r.rank is not None})
    ops: List[str] = []
    for c in comms:
        for r in c.ranks:
            ops.extend(op for op in r.counts if op not in ops)
    # counts[op][rank] = the rank's count in each query (None where that query does not show it)
    counts: Dict[str, Dict[int, List[Optional[int]]]] = {op: {k: [] for k in ranks} for op in ops}
    pids: Dict[int, Set[int]] = {k: set() for k in ranks}
    for c in comms:
        by_rank = {r.rank: r for r in c.ranks if r.rank is not None}
        for k in ranks:
            r = by_rank.get(k)
            if r is not None and r.pid is not None and r.pid >= 0:
                pids[k].add(r.pid)
            for op in ops:
                counts[op][k].append(r.counts.get(op) if r is not None else None)
    last_pid = {k: _last_pid(comms, k) for k in ranks}
    problems = _problems(comms)
    op = _shown_op(counts, ops)
    shown = _counts_text(counts.get(op, {}), n) if op else "no counts"
    span = "over %d queries (%s)" % (n, "%.1f s" % window if window is not None else "time not recorded")

    reset = _reset(counts, pids)
    if reset:
        return _result(key, NO_VERDICT, n, window, None, op, (), (), problems,
                       "%s counts %s %s: %s: no verdict" % (op, shown, span, reset))
    if n == 1:
        return _result(key, ONE_QUERY, n, None, None, op, (), (), problems,
                       "%s counts %s (one query: no evidence over time)" % (op, shown) if op
                       else "no counts (one query: no evidence over time)")
    stuck: List[RankLag] = []
    held: List[RankLag] = []
    slow: List[RankLag] = []
    moved = False
    short = window is not None and window < STUCK_MIN_SPAN_S
    for o in ops:
        per_query_max = [max((v[i] for v in counts[o].values() if v[i] is not None), default=None) for i in range(n)]
        for k, vals in counts[o].items():
            known = [v for v in vals if v is not None]
            moving = len(set(known)) > 1
            moved = moved or moving
            behind = tuple(m - v for m, v in zip(per_query_max, vals) if m is not None and v is not None)
            if not behind or len(known) < 2:
                continue
            lag = RankLag(rank=k, op=o, behind=behind, moving=moving, pid=last_pid[k], host=_host(comms, k))
            if not moving and vals[-1] is not None and len(behind) == n and _stopped_behind(
                    behind, qs, [i for i, _c in present], interval_s) and not _ahead_elsewhere(counts, o, k):
                (held if short else stuck).append(lag)
            elif moving and len(behind) == n and all(b > 0 for b in behind):
                slow.append(lag)
    slow = [s for s in slow if s.rank not in {x.rank for x in stuck + held} and _lag_matters(s, counts, n, window)]
    rate = _rate(counts, n, window) if moved else None
    if rate is not None:
        span += ", %s collectives/s" % _num(rate)
    lead = "%s counts %s %s" % (op, shown, span) if op else "no counts %s" % span
    if stuck:
        state = STUCK
        what = "%s behind and not moving (stuck)" % _who(stuck, "is", "are")
    elif held:
        state = BEHIND
        what = ("%s behind and not moving over %.1f s, under the %g s RAS needs to tell stuck from slow: no verdict "
                "from RAS alone" % (_who(held, "is", "are"), window or 0.0, STUCK_MIN_SPAN_S))
    elif slow:
        state = SLOW
        what = "%s %s in every query and moving (slow, not stuck)" % (_who(slow, "is", "are"), _behind_text(slow))
    elif moved:
        state, what = PROGRESSING, "progressing, no rank behind"
    else:
        state, what = UNCHANGED, ("no rank behind: idle, or every rank waits in the same collective "
                                  "(RAS cannot tell which)") if op else "no counts to compare"
    return _result(key, state, n, window, rate, op, tuple(stuck), tuple(slow), problems, "%s: %s" % (lead, what),
                   tuple(held))


def _ahead_elsewhere(counts: Dict[str, Dict[int, List[Optional[int]]]], op: str, rank: int) -> bool:
    """Whether the rank, behind in ``op``, launched more of another kind of collective than a peer in
    the last query: it did not stop, it called a different collective (a mismatch, which the
    stacks name), so RAS calls it neither stuck nor the others' wait explained."""
    for o, per_rank in counts.items():
        if o == op:
            continue
        mine = per_rank.get(rank, [None])[-1]
        others = [v[-1] for k, v in per_rank.items() if k != rank and v and v[-1] is not None]
        if mine is not None and others and mine > min(others):
            return True
    return False


#: Seconds behind the others, at the communicator's own rate, from which a rank behind in every
#: query is slow: RAS reads each rank's counts at a slightly different moment, and on a healthy job
#: running 5,000 collectives/s a rank read 1 behind in each of 3 queries (0.2 ms: 1 of 5 runs on
#: 2x H200) is the reading's skew, not a slow rank (the slow job: 1 behind at 2 collectives/s).
SLOW_LAG_S = 0.1


def _lag_matters(lag: RankLag, counts: Dict[str, Dict[int, List[Optional[int]]]], n: int,
                 window: Optional[float]) -> bool:
    """Whether the rank's smallest lag is SLOW_LAG_S or more at the rate its op moves (True where the
    rate is unknown: no times, or nothing moved)."""
    per_rank = counts.get(lag.op, {})
    firsts = [v[0] for v in per_rank.values() if v and v[0] is not None]
    lasts = [v[-1] for v in per_rank.values() if v and v[-1] is not None]
    if not window or window <= 0 or not firsts or not lasts or n < 2:
        return True
    rate = (max(lasts) - max(firsts)) / window
    return rate <= 0 or min(lag.behind) / rate >= SLOW_LAG_S


#: Seconds a rank must be seen behind and not moving to be called stuck (the whole window; when it
#: was level with the others at the first query, the queries it was behind in): longer than one of
#: the tool's own reads holds a rank stopped (a cold first read of a 1 GB libtorch process: up to
#: ~2 s), and than a step that merely looks stopped at that scale.
STUCK_MIN_SPAN_S = 2.0


def _stopped_behind(behind: Sequence[int], qs: Sequence[RasQuery], at: Sequence[int],
                    interval_s: Optional[float]) -> bool:
    """Whether a rank whose counts did not move was behind long enough to be called stuck: behind in
    every query, or in the last two or more spanning STUCK_MIN_SPAN_S.  Behind in the last query
    only is no evidence: on a 2x H200 slow job a rank level at the first query read 15 -> 15 while
    its peer read 14 -> 16 over 3.1 s -- the rank was held stopped by the tool's own first read."""
    if all(b > 0 for b in behind):
        return True
    tail = 0
    for b in reversed(behind):
        if b <= 0:
            break
        tail += 1
    if tail < 2:
        return False
    span = _window(qs, at[len(at) - tail], at[-1], interval_s)
    return span is not None and span >= STUCK_MIN_SPAN_S


def _result(key: str, state: str, n: int, window: Optional[float], rate: Optional[float], op: Optional[str],
            stuck: Tuple[RankLag, ...], slow: Tuple[RankLag, ...], problems: Tuple[RankProblem, ...],
            text: str, held: Tuple[RankLag, ...] = ()) -> CommProgress:
    if problems:
        text += "; " + "; ".join(_problem_text(p) for p in problems)
    return CommProgress(key, state, n, window, rate, op, stuck, slow, problems, "communicator %s: %s" % (key, text),
                        held)


def _last_pid(comms: Sequence[RasCommunicator], k: int) -> Optional[int]:
    for c in reversed(comms):
        for r in c.ranks:
            if r.rank == k and r.pid is not None and r.pid >= 0:
                return r.pid
    return None


def _host(comms: Sequence[RasCommunicator], k: int) -> Optional[str]:
    for c in reversed(comms):
        for r in c.ranks:
            if r.rank == k and r.host:
                return r.host
    return None


def _reset(counts: Dict[str, Dict[int, List[Optional[int]]]], pids: Dict[int, Set[int]]) -> Optional[str]:
    """Why the queries cannot be compared: a count went down, a rank changed process."""
    for k, ps in pids.items():
        if len(ps) > 1:
            return "rank %d changed process (pids %s)" % (k, ", ".join(str(p) for p in sorted(ps)))
    for op, per_rank in counts.items():
        for k, vals in per_rank.items():
            known = [v for v in vals if v is not None]
            for a, b in zip(known, known[1:]):
                if b < a:
                    return ("rank %d's %s count went down (%d -> %d): the communicator was re-created or the "
                            "queries are not in time order" % (k, op, a, b))
    return None


def _shown_op(counts: Dict[str, Dict[int, List[Optional[int]]]], ops: Sequence[str]) -> Optional[str]:
    """The op the sentence shows: one the ranks disagree on, else the one that moved most, else the
    largest count."""
    def spread(op: str) -> int:
        return max((max(v) - min(v) for v in zip(*counts[op].values()) if None not in v), default=0)

    def moved(op: str) -> int:
        return max((max(x for x in v if x is not None) - min(x for x in v if x is not None)
                    for v in counts[op].values() if any(x is not None for x in v)), default=0)

    def top(op: str) -> int:
        return max((x for v in counts[op].values() for x in v if x is not None), default=-1)

    if not ops:
        return None
    return max(ops, key=lambda op: (spread(op) > 0, moved(op), top(op)))


def _counts_text(per_rank: Dict[int, List[Optional[int]]], n: int) -> str:
    """"17/16 -> 22/21 -> 27/26" (one count per rank, per query); "4/3 unchanged"; "3-4" for many ranks."""
    def one(i: int) -> str:
        vals = [per_rank[k][i] for k in sorted(per_rank)]
        if len(vals) > _MAX_SHOWN_RANKS:
            known = [v for v in vals if v is not None]
            lo, hi = (min(known), max(known)) if known else (None, None)
            return "?" if lo is None else ("%d" % lo if lo == hi else "%d-%d" % (lo, hi))
        return "/".join("?" if v is None else str(v) for v in vals)

    shown = [one(i) for i in range(n)]
    if n > 1 and len(set(shown)) == 1:
        return "%s unchanged" % shown[0]
    if n > 4:
        shown = [shown[0], "...", shown[-1]]
    return " -> ".join(shown)


def _rate(counts: Dict[str, Dict[int, List[Optional[int]]]], n: int, window: Optional[float]) -> Optional[float]:
    """Collectives per second of the most advanced rank, every op together."""
    if window is None or window <= 0:
        return None
    total = 0
    for per_rank in counts.values():
        first = max((v[0] for v in per_rank.values() if v[0] is not None), default=None)
        last = max((v[n - 1] for v in per_rank.values() if v[n - 1] is not None), default=None)
        if first is not None and last is not None:
            total += last - first
    return total / window


def _num(x: float) -> str:
    return "%.1f" % x if x < 1000 else f"{x:,.0f}"


def _who(lags: Sequence[RankLag], one: str, many: str) -> str:
    ranks = sorted({lag.rank for lag in lags})
    if len(ranks) == 1:
        pid = next((lag.pid for lag in lags if lag.pid is not None), None)
        return "rank %d%s %s" % (ranks[0], " (pid %d)" % pid if pid is not None else "", one)
    shown = ", ".join(str(k) for k in ranks[:10]) + (" and %d more" % (len(ranks) - 10) if len(ranks) > 10 else "")
    return "ranks %s %s" % (shown, many)


def _behind_text(lags: Sequence[RankLag]) -> str:
    gaps = sorted({b for lag in lags for b in lag.behind})
    if len(gaps) == 1:
        return "%d behind" % gaps[0]
    return "%d-%d behind" % (gaps[0], gaps[-1])


def _problems(comms: Sequence[RasCommunicator]) -> Tuple[RankProblem, ...]:
    """Missing ranks, errors and aborts any query reported, once each, in the order first seen."""
    out: List[RankProblem] = []

    def add(rank: Optional[int], what: str, pid: Optional[int]) -> None:
        p = RankProblem(rank, what, pid if pid is not None and pid >= 0 else None)
        if all((x.rank, x.what) != (p.rank, p.what) for x in out):
            out.append(p)

    for c in comms:
        for m in c.missing_ranks:
            what = "dead" if m.considered_dead else "unresponsive" if m.unresponsive else "missing"
            add(m.rank, what, m.pid)
        for r in c.ranks:
            if r.async_error is not None and r.async_error not in NCCL_OK_RESULTS:
                add(r.rank, "async error %d (%s)" % (r.async_error, NCCL_RESULTS.get(r.async_error, "unknown")),
                    r.pid)
            if r.async_error_text:
                add(r.rank, "async error (%s)" % r.async_error_text, r.pid)
            if r.init_state is not None and r.init_state not in NCCL_OK_RESULTS:
                add(r.rank, "init error %d (%s)" % (r.init_state, NCCL_RESULTS.get(r.init_state, "unknown")), r.pid)
            if r.init_error:
                add(r.rank, "init error (%s)" % r.init_error, r.pid)
            if r.abort_flag or r.status == "ABORT":
                add(r.rank, "aborted", r.pid)
    return tuple(out)


def _problem_text(p: RankProblem) -> str:
    who = "rank %s" % p.rank if p.rank is not None else "a rank"
    if p.pid is not None:
        who += " (pid %d)" % p.pid
    if p.what in ("missing", "unresponsive", "dead"):
        return "%s is %s" % (who, p.what if p.what != "missing" else "missing from it")
    return "%s: %s" % (who, p.what)


def _job_sentence(comms: Sequence[CommProgress], n: int, window: Optional[float], notes: Sequence[str]) -> str:
    if n == 0:
        return "no NCCL RAS query"
    head = "%d NCCL RAS quer%s" % (n, "y" if n == 1 else "ies")
    if window is not None:
        head += " over %.1f s" % window
    if n == 1:
        return head + ": one query: no evidence over time"
    if not comms:
        return head + ": no communicator counts" + (" (%s)" % notes[-1] if notes else "")
    parts = []
    for state in (STUCK, BEHIND, SLOW, NO_VERDICT, PROGRESSING, UNCHANGED, ONE_QUERY):
        of = [c for c in comms if c.state == state]
        if of:
            shown = ", ".join(c.comm for c in of[:3]) + (" ..." if len(of) > 3 else "")
            parts.append("%d %s (%s)" % (len(of), state, shown))
    return "%s: communicators %s" % (head, "; ".join(parts))
