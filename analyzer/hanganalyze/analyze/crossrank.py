"""The job rules: the cross-rank findings, one function per rule, over facts computed once.

When one rank of a distributed job stops, every other rank stops too; compared side by side the
ranks say who is at fault.  ``cross_rank_findings`` did all five comparisons in one 107-line
function, so a rule could not be read, tested or fail alone.  Now ``Comparison`` holds what they
share (the waiting ranks, the ranks proven elsewhere, the missing ranks, the flight recorder's
stragglers, the ranks of unknown state), computed once per job by ``JobContext.comparison``, and
each rule is one function of a ``JobContext``, declared by ``@rule`` above it (``ruledecl.py``):

* ``rank_missing``: fewer ranks than WORLD_SIZE came in (a rank exited or crashed);
* ``worker_straggler``: processes wait for other processes (multiprocessing) that are elsewhere;
* ``collective_straggler``: ranks wait in a collective (or in the device sync after one)
  while one or a few are elsewhere: those are named, with their innermost frame;
* ``collective_mismatch``: the waiting ranks wait in different collectives, at different call
  sites, or (flight recorder) at different sequence numbers;
* ``collective_hang``: every rank waits in the same collective and none is missing or elsewhere;
* ``peer_wait`` (per rank): a rank blocked in a device sync right after a collective waits for
  its peers: a hang, not the CUDA busy-spin the single process shows;
* ``rank_slow``: repeated samples saw the waiting ranks move and one rank, outside the collective
  in every sample, wake and wait again in one place: slow, not stuck (a warning, never a hang).

Their ids, titles, causes, fixes and what they supersede are data: their entries in
``signatures/rules/rules.yaml``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

from hanganalyze.analyze.findings import from_rule
from hanganalyze.analyze.progress import rank_progress
from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.rankstate import RankState, judge_against_waiters
from hanganalyze.analyze.ruledecl import rule
from hanganalyze.analyze.rules import load_rules
from hanganalyze_gdbext.model import DistIdentity, Evidence, Finding, Process, Snapshot

#: Ranks named in a summary before "and N more".
MAX_NAMED = 8


def key_label(ranks: List[int], label: str = "rank") -> str:
    """``rank 3`` / ``ranks 0-3,7``: a set of ranks as one short range text (131,072 ranks stay one line)."""
    text = compress_ranks(ranks)
    plural = len(ranks) > 1
    return "%s%s %s" % (label, "s" if plural else "", text)


def _who(states: Sequence[RankState]) -> str:
    ranks = [s.rank for s in states if s.rank is not None]
    if len(ranks) == len(states):
        return key_label(ranks)
    pids = [s.pid for s in states if s.pid is not None]
    if len(pids) == len(states) and len(pids) <= MAX_NAMED:
        return "pid%s %s" % ("s" if len(pids) > 1 else "", ", ".join(str(p) for p in pids))
    return "process%s %s" % ("es" if len(states) > 1 else "", compress_ranks([s.process for s in states]))


def _coll_text(s: RankState) -> str:
    what = s.op or ("the device sync after a collective" if s.state == "device-sync" else "a collective")
    if s.state == "device-sync" and s.op:
        what = "the device sync after %s" % s.op
    if s.state == "rendezvous":
        what = s.op or "the rendezvous"
    if s.state == "ipc-wait":
        what = "a %s wait" % (s.op or "multiprocessing")
    bits = [what]
    if s.seq is not None:
        bits.append("(collective #%d)" % s.seq)
    if s.call_site:
        bits.append("called from %s" % s.call_site)
    elif s.where:
        bits.append("at %s" % s.where)
    return " ".join(bits)


def classes_of(states: Sequence[RankState], key) -> OrderedDict[Any, List[RankState]]:
    groups: OrderedDict[Any, List[RankState]] = OrderedDict()
    for s in states:
        groups.setdefault(key(s), []).append(s)
    return groups


def place(s: RankState) -> Optional[str]:
    """Where a rank is, with what it waits for among its own children (a DataLoader worker's frame)."""
    if s.waits_for:
        return "%s, waiting for %s" % (s.where or "an unknown place", s.waits_for)
    return s.where


def _elsewhere_text(states: Sequence[RankState]) -> str:
    classes = list(classes_of(states, place).items())
    if len(classes) == 1:
        where, members = classes[0]
        return "%s in %s" % ("it is" if len(members) == 1 else "they are", where or "an unknown place")
    parts = []
    for where, members in classes[:MAX_NAMED]:
        parts.append("%s %s in %s" % (_who(members), "is" if len(members) == 1 else "are", where or "an unknown place"))
    return "; ".join(parts)


def _source_name(states: Sequence[RankState]) -> str:
    """Where sequence numbers came from, as a user would name it."""
    sources = {s.fr_source for s in states}
    return "PyTorch watchdog log" if sources == {"watchdog-log"} else "flight recorder"


def _evidence(states: Sequence[RankState], rule: str) -> List[Evidence]:
    out = []
    for s in states[:64]:
        text = place(s) or ""
        if s.waiting:
            text = _coll_text(s)
        elif rule == "unknown":
            text = "state unknown: %s" % (s.evidence_reason or "no evidence")
        elif s.state == "no-stack":
            text = "no stack (flight recorder only): last enqueued #%s, last completed #%s" % (
                s.last_enqueued, s.last_completed)
        out.append(Evidence(rank=s.rank, process=s.process, thread=s.thread, frame=s.frame, rule=rule, text=text))
    return out


def _finding(sig: str, at_fault: Sequence[RankState], summary: str, evidence: List[Evidence],
             confidence: float, ranks: Optional[List[int]] = None) -> Finding:
    """A job rule's finding: the ranks at fault, the first of them leading (texts: ``findings.from_rule``)."""
    procs = [s.process for s in at_fault]
    return from_rule(load_rules().by_id(sig), procs[0] if procs else 0, summary, evidence, confidence,
                     threads=[s.thread for s in at_fault[:1] if s.thread is not None],
                     ranks=sorted(ranks if ranks is not None else [s.rank for s in at_fault if s.rank is not None]),
                     processes=procs)


def whole_host(processes: Sequence[Process]) -> bool:
    """Every process came from one ``--job`` launcher: its descendants are all the job has on this
    host, so a local rank that is not among them has exited (positive evidence, unlike a rank that
    simply was not given as an input)."""
    launchers = {p.dist.launcher_pid if p.dist is not None else None for p in processes}
    return len(launchers) == 1 and None not in launchers


def missing_ranks(processes: Sequence[Process], states: Sequence[RankState],
                  world: Optional[int]) -> Tuple[List[int], Optional[str]]:
    """(the ranks proven missing, a note on ranks that were merely not captured).

    Without local-rank facts every rank below WORLD_SIZE that no input has is missing (the inputs
    are taken as the whole job, as before).  When every rank reports the same node (``group_rank``)
    and LOCAL_WORLD_SIZE < WORLD_SIZE, only this node's local ranks can be judged: the ranks of the
    other nodes were not captured, which is no evidence that they exited."""
    ranked = [s for s in states if s.rank is not None]
    if world is None or not ranked:
        return [], None
    seen = {s.rank for s in ranked}
    unknown = DistIdentity()
    dists = [processes[s.process].dist or unknown for s in ranked]
    nodes = {d.group_rank for d in dists}
    local_sizes = {d.local_world_size for d in dists}
    bases = {s.rank - d.local_rank for s, d in zip(ranked, dists) if d.local_rank is not None}
    if len(nodes) == 1 and None not in nodes and len(local_sizes) == 1 and len(bases) == 1 \
            and None not in local_sizes and next(iter(local_sizes)) < world:
        size, base = next(iter(local_sizes)), next(iter(bases))
        missing = [base + lr for lr in range(size) if base + lr not in seen]
        note = "ranks of the other nodes (%d of %d) were not captured: capture every node to judge them" % (
            world - size, world)
        return missing, note
    return [r for r in range(world) if r not in seen][:1 << 16], None


def _peer_wait(snapshot: Snapshot, states: List[RankState]) -> List[Finding]:
    syncs = [s for s in states if s.state == "device-sync"]
    if not syncs:
        return []
    parts = []
    for members in list(classes_of(syncs, lambda s: (s.op, s.call_site, s.seq)).values())[:MAX_NAMED]:
        parts.append("%s %s blocked in %s" % (_who(members), "is" if len(members) == 1 else "are",
                                              _coll_text(members[0])))
    summary = "; ".join(parts) + ": waiting for the peers to complete the collective"
    return [_finding("collective-peer-wait", syncs, summary, _evidence(syncs, "device sync after a collective"),
                     0.8 if any(s.seq is not None for s in syncs) else 0.6)]


def _compatible(a: RankState, b: RankState) -> bool:
    """Could these two ranks be in the same collective?  An unknown op (an NCCL device sync with no
    flight recorder) or an unknown call site (a dump with no user frame) matches any, but known call
    sites and known sequence numbers must agree: an unknown is no evidence of a mismatch."""
    if a.call_site is not None and b.call_site is not None and a.call_site != b.call_site:
        return False
    if a.op is not None and b.op is not None and a.op != b.op:
        return False
    return a.seq is None or b.seq is None or a.seq == b.seq


def collective_groups(waiting: Sequence[RankState]) -> List[List[RankState]]:
    """Waiting ranks grouped by the collective they are in; more than one group is a mismatch.

    Each group is checked against its first member and its first members with a known op and a known
    call site (so a 4,096-rank job costs a few comparisons per rank, not one per pair)."""
    groups: List[List[RankState]] = []
    reps: List[List[RankState]] = []
    for s in waiting:
        for g, rep in zip(groups, reps):
            if all(_compatible(s, r) for r in rep):
                g.append(s)
                if (s.op is not None and all(r.op is None for r in rep)) or \
                        (s.call_site is not None and all(r.call_site is None for r in rep)):
                    rep.append(s)
                break
        else:
            groups.append([s])
            reps.append([s])
    return groups


@dataclass
class Comparison:
    """What the cross-rank rules share: the ranks sorted by what they do (``compare``)."""

    states: List[RankState]  # the ranks (a process without a rank is context when ranks are known)
    waiting_any: List[RankState]  # in a collective, a device sync after one, a rendezvous or an IPC wait
    waiting: List[RankState]  # waiting_any but the IPC waits
    ipc: List[RankState]  # waiting for other processes (multiprocessing queues, pipes)
    elsewhere: List[RankState]  # positive evidence of being elsewhere
    missing: List[int]  # ranks below WORLD_SIZE that no input has
    fr: List[RankState]  # ranks with a flight-recorder (or watchdog) sequence number
    behind: List[RankState]  # ranks that never enqueued the collective the others are in
    stragglers: List[RankState]  # elsewhere, or behind and not waiting
    unknown: List[RankState]  # no proof either way: listed, never blamed
    unknown_text: str
    penalty: float  # confidence taken off when some ranks are of unknown state
    groups: List[List[RankState]]  # the waiting ranks by the collective they are in


def compare(snapshot: Snapshot, states: List[RankState], world: Optional[int]) -> Comparison:
    """The facts of ``Comparison``; judges the ranks against the waiters (``rankstate``) and notes
    ranks of other nodes that were not captured in ``snapshot.warnings``."""
    if any(s.rank is not None for s in states):
        # ranks are known: a process without one (the launcher's own log lines, a helper) is context,
        # never a rank at fault
        states = [s for s in states if s.rank is not None]
    judge_against_waiters(states)
    waiting = [s for s in states if s.waiting]
    # named at fault only with positive evidence of being elsewhere (rankstate's module doc)
    elsewhere = [s for s in states if s.state == "elsewhere" and s.evidence == "elsewhere"]
    missing, not_captured = missing_ranks(snapshot.processes, states, world)
    if not_captured and not_captured not in snapshot.warnings:
        snapshot.warnings.append(not_captured)
    # flight recorder: ranks that never enqueued the collective the others are in
    fr = [s for s in states if s.last_enqueued is not None]
    behind: List[RankState] = []
    if len(fr) >= 2:
        top = max(s.last_enqueued for s in fr if s.last_enqueued is not None)
        behind = [s for s in fr if s.last_enqueued is not None and s.last_enqueued < top
                  and (s.state in ("elsewhere", "no-stack") or s.fr_completed)]
    stragglers = elsewhere + [s for s in behind if s not in elsewhere and not s.waiting]
    # no proof either way (lost native stack, a failed input, at the waiters' own line): listed, never blamed
    unknown = [s for s in states if s.evidence == "unknown" and not s.waiting and s not in stragglers]
    unknown_text = ""
    if unknown:
        unknown_text = "; %s: state unknown (%s)" % (
            _who(unknown), "; ".join(sorted({s.evidence_reason or "no evidence" for s in unknown})[:3]))
    ipc = [s for s in waiting if s.state == "ipc-wait"]
    coll = [s for s in waiting if s.state != "ipc-wait"]
    return Comparison(states=states, waiting_any=waiting, waiting=coll, ipc=ipc, elsewhere=elsewhere,
                      missing=missing, fr=fr, behind=behind, stragglers=stragglers, unknown=unknown,
                      unknown_text=unknown_text, penalty=0.2 if unknown else 0.0, groups=collective_groups(coll))


@dataclass
class JobContext:
    """What a job rule reads: the job's snapshot, each process's rank state (``rankstate``) and
    WORLD_SIZE; the cross-rank facts are computed at the first rule that asks (``comparison``)."""

    snapshot: Snapshot
    states: List[RankState]
    world: Optional[int]
    _comparison: Optional[Comparison] = field(default=None, repr=False)

    @property
    def compares(self) -> bool:
        """The findings that compare ranks need ranks to compare: several processes, or one that
        knows its job's WORLD_SIZE."""
        return len(self.snapshot.processes) > 1 or self.world is not None

    def comparison(self) -> Comparison:
        if self._comparison is None:
            self._comparison = compare(self.snapshot, self.states, self.world)
        return self._comparison


# --------------------------------------------------------------------------------------------
# The rules (run in the order of signatures/rules/rules.yaml)
# --------------------------------------------------------------------------------------------


@rule("rank-missing", stage="job", reads="ranks, WORLD_SIZE, local ranks, the launcher")
def rank_missing(ctx: JobContext) -> List[Finding]:
    """``rank-missing``: ranks below WORLD_SIZE that no input has."""
    if not ctx.compares:
        return []
    c = ctx.comparison()
    if not c.missing:
        return []
    snapshot, waiting, missing = ctx.snapshot, c.waiting_any, c.missing
    tail = ""
    if waiting:
        tail = "; %s wait%s in %s" % (_who(waiting), "s" if len(waiting) == 1 else "", _coll_text(waiting[0]))
    if whole_host(snapshot.processes):
        launcher = snapshot.processes[0].dist.launcher_pid  # type: ignore[union-attr]  # whole_host
        summary = "%s of %d %s not among the processes of launcher %s on this host (it exited, crashed " \
                  "or was killed)%s" % (key_label(missing), ctx.world, "is" if len(missing) == 1 else "are",
                                        launcher, tail)
    else:
        summary = "%s of %d %s not in the input: no process, core or dump (it exited or crashed)%s" % (
            key_label(missing), ctx.world, "is" if len(missing) == 1 else "are", tail)
    return [_finding("rank-missing", waiting[:1] or list(c.states[:1]), summary,
                     _evidence(waiting, "waits for the missing rank"), 0.9, ranks=missing)]


@rule("worker-straggler", stage="job", reads="rank states: IPC waits and ranks elsewhere")
def worker_straggler(ctx: JobContext) -> List[Finding]:
    """``worker-straggler``: processes wait for other processes, and only ranks elsewhere remain."""
    if not ctx.compares:
        return []
    c = ctx.comparison()
    ipc, elsewhere = c.ipc, c.elsewhere
    if not (ipc and not c.waiting and elsewhere):
        return []
    summary = "%s wait%s for other processes (%s); %s never answer%s: %s" % (
        _who(ipc), "s" if len(ipc) == 1 else "", ", ".join(sorted({s.where or "" for s in ipc})[:3]),
        _who(elsewhere), "s" if len(elsewhere) == 1 else "", _elsewhere_text(elsewhere))
    return [_finding("worker-straggler", elsewhere, summary,
                     _evidence(elsewhere, "elsewhere") + _evidence(ipc, "waiting"),
                     0.8 if len(elsewhere) < len(ipc) else 0.6)]


@rule("collective-straggler", stage="job", reads="rank states, flight-recorder sequence numbers")
def collective_straggler(ctx: JobContext) -> List[Finding]:
    """``collective-straggler``: ranks wait in a collective that the named ranks never reached
    (their stacks say they are elsewhere, or the flight recorder says they stopped before it)."""
    if not ctx.compares:
        return []
    c = ctx.comparison()
    waiting, stragglers, behind, unknown_text = c.waiting, c.stragglers, c.behind, c.unknown_text
    if waiting and stragglers:
        first = waiting[0]
        summary = "%s wait%s in %s; %s never reached it: %s" % (
            _who(waiting), "s" if len(waiting) == 1 else "", _coll_text(first), _who(stragglers),
            _elsewhere_text([s for s in stragglers if s.state == "elsewhere"]) or "no stack in the input")
        fr_note = [s for s in stragglers if s.last_enqueued is not None]
        if fr_note and first.seq is not None:
            lasts = sorted({s.last_enqueued for s in fr_note if s.last_enqueued is not None})
            summary += " (%s: %s last enqueued #%s, the others #%d)" % (
                _source_name(fr_note), _who(fr_note), compress_ranks(lasts), first.seq)
        conf = (0.9 if len(stragglers) <= len(waiting) else 0.7) - c.penalty
        return [_finding("collective-straggler", stragglers, summary + unknown_text,
                         _evidence(stragglers, "elsewhere") + _evidence(waiting, "waiting")
                         + _evidence(c.unknown, "unknown"), conf)]
    if behind and not waiting:
        ahead = [s for s in c.fr if s not in behind]
        summary = "%s enqueued collective #%s; %s stopped at #%s (%s)" % (
            _who(ahead), ahead[0].last_enqueued if ahead else "?", _who(behind),
            compress_ranks(sorted({s.last_enqueued for s in behind if s.last_enqueued is not None})),
            _source_name(behind))
        return [_finding("collective-straggler", behind, summary + unknown_text, _evidence(behind, "behind"),
                         0.7 - c.penalty)]
    return []


@rule("collective-mismatch", stage="job",
      reads="the waiting ranks' collective, call site and sequence number")
def collective_mismatch(ctx: JobContext) -> List[Finding]:
    """``collective-mismatch``: the waiting ranks are in different collectives; the minority is
    named, or every side when there is no majority."""
    if not ctx.compares:
        return []
    c = ctx.comparison()
    waiting, groups, unknown_text, penalty = c.waiting, c.groups, c.unknown_text, c.penalty
    if len(groups) <= 1:
        return []
    ordered = sorted(groups, key=lambda g: (-len(g), min(s.process for s in g)))
    major, minors = ordered[0], [s for g in ordered[1:] for s in g]
    parts = ["%s wait%s in %s" % (_who(g), "s" if len(g) == 1 else "", _coll_text(g[0]))
             for g in ordered[:MAX_NAMED]]
    summary = "; ".join(parts) + ": the calls do not match"
    known = all(s.op is not None for s in waiting)
    if len(ordered[0]) == len(ordered[1]):
        # no majority: nothing says which side took the wrong path, so every side is named
        summary += " (no majority: the stacks cannot tell which side took the wrong path)"
        return [_finding("collective-mismatch", list(waiting), summary + unknown_text,
                         _evidence(list(waiting), "different collective"), (0.7 if known else 0.5) - penalty)]
    return [_finding("collective-mismatch", minors, summary + unknown_text,
                     _evidence(minors, "different collective") + _evidence(major, "majority"),
                     (0.85 if known else 0.6) - penalty)]


@rule("collective-hang", stage="job", reads="rank states (all waiting, none missing or elsewhere)")
def collective_hang(ctx: JobContext) -> List[Finding]:
    """``collective-hang``: every rank waits in the same collective, none missing or elsewhere."""
    if not ctx.compares:
        return []
    c = ctx.comparison()
    waiting, unknown, states = c.waiting, c.unknown, c.states
    if not (waiting and not c.stragglers and not c.missing and len(c.groups) <= 1 and len(states) > 1
            and all((s.waiting or (s in unknown and s.state == "elsewhere")) and s.state != "ipc-wait"
                    for s in states)):
        return []
    # a rank read but not placed keeps the verdict at low confidence; a failed input gives none
    if unknown:
        summary = "%s wait%s in %s; no rank is proven elsewhere%s" % (
            _who(waiting), "s" if len(waiting) == 1 else "", _coll_text(waiting[0]), c.unknown_text)
    else:
        summary = "all %d ranks wait in %s; none is missing or elsewhere" % (
            len(waiting), _coll_text(waiting[0]))
    return [_finding("collective-hang", waiting, summary,
                     _evidence(waiting, "waiting") + _evidence(unknown, "unknown"), 0.6 - c.penalty)]


@rule("collective-peer-wait", stage="job", reads="ranks blocked in the device sync after a collective")
def peer_wait(ctx: JobContext) -> List[Finding]:
    """``collective-peer-wait``: a peer wait needs peers: several processes, or one that knows it is a rank."""
    states = ctx.states
    if len(states) > 1 or any(s.rank is not None for s in states):
        return _peer_wait(ctx.snapshot, states)
    return []


@rule("rank-slow", stage="job",
      reads="rank states and each rank's progress over the samples (own wake-ups, frames)")
def rank_slow(ctx: JobContext) -> List[Finding]:
    """``rank-slow``: the job progresses and a rank holds it back.  Only on positive evidence from
    repeated samples (3 or more): every rank waiting in the collective made progress (its waits
    completed: woke, frames or locals moved), and each named rank was outside the collective, at
    the same place, in every sample but one at most, and made progress there (woke and waited again).  A rank that never
    woke is stuck and a busy one spins: neither is named here, and no claim is made when any of
    the waiting ranks did not move (ambiguous: a wrong accusation costs more than no answer)."""
    if not ctx.compares:
        return []
    c = ctx.comparison()
    progs = {s.process: rank_progress(ctx.snapshot, s) for s in c.states}
    waiting = [s for s in c.waiting if s.state in ("collective", "device-sync")]
    if not waiting or not c.elsewhere or c.missing:
        return []
    if not all(progs.get(s.process) is not None and progs[s.process].state == "progressing"
               and (progs[s.process].place_samples or 0) >= progs[s.process].samples - 1 for s in waiting):
        return []
    # at its place in every sample but one at most (a step's own compute may catch it once), of 3 or more
    slow = [s for s in c.elsewhere if progs.get(s.process) is not None
            and progs[s.process].state == "progressing" and progs[s.process].samples >= 3
            and (progs[s.process].place_samples or 0) >= progs[s.process].samples - 1]
    if not slow or len(slow) > len(waiting):
        return []
    parts = []
    for s in slow[:MAX_NAMED]:
        p = progs[s.process]
        how = ("woke %d times there" % p.own_wakeups) if p.evidence == "woke" and p.own_wakeups else \
            (p.changed[0] if p.changed else "moved")
        parts.append("%s was outside the collective, in %s, in %d%% of the samples (%d of %d over %.1f s; %s)"
                     % (_who([s]), place(s) or "an unknown place", round(100.0 * (p.place_samples or 0) / p.samples),
                        p.place_samples or 0, p.samples, p.window_s or 0.0, how))
    woke = [progs[s.process].own_wakeups for s in waiting if progs[s.process].own_wakeups is not None]
    window = max(progs[s.process].window_s or 0.0 for s in waiting) or 1.0
    pace = (", about %.1f wake-ups/s each (their collective completes)" % (min(woke) / window)) if woke else ""
    summary = "the job progresses: %s in %s made progress over %.1f s%s; %s, and they wait for it: slow, not stuck" % (
        _who(waiting), _coll_text(waiting[0]), window, pace, "; ".join(parts))
    return [_finding("rank-slow", slow + waiting, summary, _evidence(slow, "elsewhere") + _evidence(waiting, "waiting"),
                     0.7 if len(slow) == 1 else 0.6, ranks=[s.rank for s in slow if s.rank is not None])]
