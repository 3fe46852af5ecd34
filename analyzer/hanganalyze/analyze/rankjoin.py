"""One rank, one process: every source of a rank joined before the job view compares ranks.

A rank can come in several times: its stacks (live, a core, a py-spy / pystack text, a snapshot
JSON), its flight-recorder dump, its segment of the torchrun log (the watchdog's ``[Rank 3]``
lines), and a second text of the same stacks.  Compared as separate processes, one rank looked
like several (``ranks=[2, 2]``), a rank's dump against its own log lines looked like a
collective mismatch between ranks, and a rank with a dump looked missing from its log.  So the
inputs are joined here, keyed by rank (and host and launcher run where both sides know them),
and the joined process says which sources it came from (``Process.sources``) and, in its notes,
where those sources disagree: a disagreement between sources of one rank is the same rank seen
at two moments or by two tools, never a mismatch between ranks.

Which source gives what:

* threads: the richest stack source (native and Python frames, then most frames); the other
  stacks of the rank are named in ``sources`` and compared, not kept;
* collective facts: a flight-recorder dump before watchdog log lines (a dump has the entries and
  call sites, the log only the sequence numbers);
* log lines (``messages``) and notes of every source, so per-rank signatures still see them;
* the identity (``dist``): the stack source's, completed by the others.

Runs before matching: it changes process indices.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

from hanganalyze.analyze.rankstate import rank_state
from hanganalyze_gdbext.model import DistIdentity, Process, Snapshot
from hanganalyze_gdbext.model.collectives import FLIGHT_RECORDER, Collectives

#: Identity keys that, when two sources both know them and differ, mean two processes, not one.
_DISTINCT = ("host", "run_id", "master_addr", "master_port")


def source_kind(p: Process) -> str:
    """What kind of evidence a process is: ``stacks``, ``debug-server stacks``, ``flight-recorder``, ``log`` or
    ``failed``."""
    if p.error:
        return "failed"
    if p.source == "flight-recorder":
        return "flight-recorder"
    if p.source == "torch-debug-server" and p.threads:
        return "debug-server stacks"  # acquire/torch_debug.py: a rank's section of the server's dump
    if p.threads:
        return "stacks"
    return "log"


def _richness(p: Process) -> Tuple[int, int, int]:
    """Which stack source of a rank is kept: one that read, with native frames, with most frames."""
    frames = [f for t in p.threads for f in t.all_frames() if not f.marker]
    native = sum(1 for f in frames if f.kind != "python")
    python = len(frames) - native
    return (0 if p.error else 1, 1 if native and python else 0, native + python)


def _conflicts(a: Process, b: Process) -> bool:
    if _two_dumps(a, b):
        return True
    if a.dist is None or b.dist is None:
        return False
    return any(getattr(a.dist, k) is not None and getattr(b.dist, k) is not None
               and getattr(a.dist, k) != getattr(b.dist, k) for k in _DISTINCT)


def _two_dumps(a: Process, b: Process) -> bool:
    """Two stacks of one input under two pids (``ray stack``'s or py-spy's ``Process N:`` sections
    that a launcher's ``[rank0]:`` tag put under one rank): two processes whose output went through
    that rank, never one rank seen twice (a second text of a rank's stacks is another input)."""
    return (bool(a.threads) and bool(b.threads) and a.input_file is not None and a.input_file == b.input_file
            and a.pid is not None and b.pid is not None and a.pid != b.pid)


def _coll_rank(p: Process) -> int:
    """Flight recorder before watchdog log before nothing."""
    c = p.collectives
    if c is None:
        return 0
    return 2 if c.source == FLIGHT_RECORDER else 1


def _last(c: Optional[Collectives]) -> Optional[Tuple[Any, Any]]:
    """(last enqueued, last completed) of the default group of a rank's collectives."""
    key = c.main_group() if c is not None else None
    if key is None:
        return None
    g = c.groups[key]
    return (g.last_enqueued, g.last_completed)


def _describe(p: Process) -> str:
    name = p.label
    if not name and p.collectives is not None:
        name = p.collectives.file
    return "%s (%s)" % (name or "pid %s" % p.pid, source_kind(p))


def _state_text(p: Process) -> str:
    s = rank_state(0, p)
    what = s.state + (" in %s" % s.op if s.op else "")
    site = s.call_site or s.where
    return what + (" at %s" % site if site else "")


def _merge(members: List[Process]) -> Process:
    """The members of one rank as one process (see the module doc for what comes from where)."""
    primary = max(members, key=_richness)
    others = [m for m in members if m is not primary]
    kinds: List[str] = []
    for m in [primary] + others:
        k = source_kind(m)
        if k not in kinds:
            kinds.append(k)
    primary.sources = kinds
    best_coll = max(members, key=_coll_rank)
    coll_from_other = best_coll is not primary and _coll_rank(best_coll) > _coll_rank(primary)
    first_state = _state_text(primary) if primary.threads else None
    for m in others:
        if m.dist is not None:
            primary.dist = (primary.dist or DistIdentity()).filled_from(m.dist)
        primary.messages.extend(m.messages)
        primary.notes.extend(m.notes)
        if primary.pid is None and m.pid is not None:
            primary.pid = m.pid
        if m.error and not primary.error:
            primary.notes.append("source %s failed: %s" % (_describe(m), m.error))
        if m.threads and first_state is not None:
            other_state = _state_text(m)
            if other_state != first_state:
                primary.notes.append("sources disagree: %s says %s, %s says %s (the rank at two moments or "
                                     "read by two tools; the first is used)"
                                     % (_describe(primary), first_state, _describe(m), other_state))
        a, b = _last(primary.collectives), _last(m.collectives)
        if a is not None and b is not None and a != b:
            primary.notes.append("sources disagree: last enqueued/completed #%s/#%s in %s, #%s/#%s in %s" % (
                a[0], a[1], _describe(primary) if not coll_from_other else _describe(best_coll),
                b[0], b[1], _describe(m)))
        if m.source == "flight-recorder":
            dump = m.collectives.file if m.collectives is not None else None
            primary.notes.append("flight-recorder dump %s joined to this rank" % (dump or ""))
    if coll_from_other:
        primary.collectives = best_coll.collectives
    return primary


def join_sources(snapshot: Snapshot) -> None:
    """Every source of a rank joined into one process, in the order of each rank's first input.

    Processes without a rank (a launcher's own log lines, an unnamed text) stay as they are: with
    no identity there is no evidence that they are a rank's.
    """
    if len(snapshot.processes) < 2 or all(p.rank is None for p in snapshot.processes):
        return
    groups: OrderedDict[Any, List[Process]] = OrderedDict()
    by_rank: Dict[int, List[Any]] = {}
    for i, p in enumerate(snapshot.processes):
        if p.rank is None:
            groups[("unranked", i)] = [p]
            continue
        for key in by_rank.get(p.rank, []):
            if not any(_conflicts(p, m) for m in groups[key]):
                groups[key].append(p)
                break
        else:
            key = ("rank", p.rank, i)
            groups[key] = [p]
            by_rank.setdefault(p.rank, []).append(key)
    out: List[Process] = []
    for key, members in groups.items():
        if key[0] == "rank":
            out.append(_merge(members) if len(members) > 1 else _single(members[0]))
        else:
            out.append(members[0])
    snapshot.processes = out


def _single(p: Process) -> Process:
    p.sources = [source_kind(p)]
    return p
