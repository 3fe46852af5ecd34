"""The job view: many ranks in, one diagnosis out.

When one rank of a distributed job stops, every other rank stops too, each in a collective; one
process at a time, every rank looks guilty or none does.  Compared side by side they say who is
at fault.  Pure functions of a Snapshot whose processes are the ranks (per-process matching has
already run; see ``pipeline.analyze``):

1. flight-recorder dumps are joined to the stacks of the same rank (``join_flight_recorder``);
2. each process gets a state (``rankstate.rank_state``);
3. the cross-rank findings, each with ``ranks`` naming the ranks at fault:

   * ``rank-missing``: fewer ranks than WORLD_SIZE came in (a rank exited or crashed);
   * ``collective-straggler``: ranks wait in a collective (or in the device sync after one)
     while one or a few are elsewhere: those are named, with their innermost frame;
   * ``collective-mismatch``: the waiting ranks wait in different collectives, at different call
     sites, or (flight recorder) at different sequence numbers;
   * ``collective-hang``: every rank waits in the same collective and none is missing or elsewhere:
     the collective itself does not finish (network, NCCL, a rank of another node not captured);
   * ``collective-peer-wait`` (per rank): a rank blocked in a device sync right after a
     collective waits for its peers: a hang, not the CUDA busy-spin the single process shows;

4. per-process findings that hold on several ranks become one finding naming its ranks;
5. ``Snapshot.job``: world size, missing ranks, rank classes (equivalence classes of stacks) and
   the merged call tree (``calltree.py``).

The rules of step 3 are code; their ids, titles, causes, fixes and what they supersede are data:
their entries in ``signatures/rules/rules.yaml`` (``analyze/rules.py``), run in that order.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.calltree import build_call_tree
from hanganalyze.analyze.progress import job_findings, rank_facts
from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.rankstate import RankState, judge_against_waiters, rank_state
from hanganalyze.analyze.rules import RuleSet, load_rules
from hanganalyze_gdbext.model import DistIdentity, Evidence, Finding, Process, Snapshot
from hanganalyze_gdbext.model.job import JobFailure, JobRankClass, JobRankState, JobSummary

#: Ranks named in a summary before "and N more".
MAX_NAMED = 8


def _key_label(ranks: List[int], label: str = "rank") -> str:
    text = compress_ranks(ranks)
    plural = len(ranks) > 1
    return "%s%s %s" % (label, "s" if plural else "", text)


def _who(states: Sequence[RankState]) -> str:
    ranks = [s.rank for s in states if s.rank is not None]
    if len(ranks) == len(states):
        return _key_label(ranks)
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


def _classes_of(states: Sequence[RankState], key) -> OrderedDict[Any, List[RankState]]:
    groups: OrderedDict[Any, List[RankState]] = OrderedDict()
    for s in states:
        groups.setdefault(key(s), []).append(s)
    return groups


def _elsewhere_text(states: Sequence[RankState]) -> str:
    classes = list(_classes_of(states, lambda s: s.where).items())
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
        text = s.where or ""
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
    rule = load_rules().by_id(sig)
    procs = [s.process for s in at_fault]
    return Finding(
        signature=sig, title=rule.title, severity=rule.severity, process=procs[0] if procs else 0,
        threads=[s.thread for s in at_fault[:1] if s.thread is not None], summary=summary, fix=list(rule.fix),
        references=list(rule.references), evidence=evidence, confidence=confidence, cause=rule.cause,
        ranks=sorted(ranks if ranks is not None else [s.rank for s in at_fault if s.rank is not None]),
        processes=procs,
    )


def world_size(processes: Sequence[Process]) -> Optional[int]:
    """The largest WORLD_SIZE any rank reports (from its environment or flight-recorder group)."""
    sizes = []
    for p in processes:
        ws = p.dist.world_size if p.dist is not None else None
        if ws is not None and 0 < ws < (1 << 24):
            sizes.append(ws)
        for g in p.collectives.groups.values() if p.collectives is not None else ():
            if g.ranks:
                sizes.append(max(g.ranks) + 1)
    return max(sizes) if sizes else None


def _whole_host(processes: Sequence[Process]) -> bool:
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


def join_flight_recorder(snapshot: Snapshot) -> None:
    """A flight-recorder dump gives no stack; the stacks give no sequence numbers: one process per
    rank.  Every source of a rank (stacks, dumps, log lines) is joined (``rankjoin.join_sources``).

    Runs before matching (it changes process indices).  A dump whose rank has no stack in the input
    stays a process of its own (``no-stack``): it still says which collective that rank reached.
    """
    from hanganalyze.analyze.rankjoin import join_sources

    join_sources(snapshot)


def _job_context(snapshot: Snapshot) -> bool:
    return len(snapshot.processes) > 1 or any(
        p.rank is not None or p.collectives for p in snapshot.processes)


def _peer_wait(snapshot: Snapshot, states: List[RankState]) -> List[Finding]:
    syncs = [s for s in states if s.state == "device-sync"]
    if not syncs:
        return []
    parts = []
    for members in list(_classes_of(syncs, lambda s: (s.op, s.call_site, s.seq)).values())[:MAX_NAMED]:
        parts.append("%s %s blocked in %s" % (_who(members), "is" if len(members) == 1 else "are",
                                              _coll_text(members[0])))
    summary = "; ".join(parts) + ": waiting for the peers to complete the collective"
    return [_finding("collective-peer-wait", syncs, summary, _evidence(syncs, "device sync after a collective"),
                     0.8 if any(s.seq is not None for s in syncs) else 0.6)]


def cross_rank_findings(snapshot: Snapshot, states: List[RankState], world: Optional[int]) -> List[Finding]:
    out: List[Finding] = []
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
    if missing:
        tail = ""
        if waiting:
            tail = "; %s wait%s in %s" % (_who(waiting), "s" if len(waiting) == 1 else "", _coll_text(waiting[0]))
        if _whole_host(snapshot.processes):
            launcher = snapshot.processes[0].dist.launcher_pid  # type: ignore[union-attr]  # _whole_host
            summary = "%s of %d %s not among the processes of launcher %s on this host (it exited, crashed " \
                      "or was killed)%s" % (_key_label(missing), world, "is" if len(missing) == 1 else "are",
                                            launcher, tail)
        else:
            summary = "%s of %d %s not in the input: no process, core or dump (it exited or crashed)%s" % (
                _key_label(missing), world, "is" if len(missing) == 1 else "are", tail)
        out.append(_finding("rank-missing", waiting[:1] or list(states[:1]), summary,
                            _evidence(waiting, "waits for the missing rank"), 0.9, ranks=missing))

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
    penalty = 0.2 if unknown else 0.0
    ipc = [s for s in waiting if s.state == "ipc-wait"]
    waiting = [s for s in waiting if s.state != "ipc-wait"]
    if ipc and not waiting and elsewhere:
        summary = "%s wait%s for other processes (%s); %s never answer%s: %s" % (
            _who(ipc), "s" if len(ipc) == 1 else "", ", ".join(sorted({s.where or "" for s in ipc})[:3]),
            _who(elsewhere), "s" if len(elsewhere) == 1 else "", _elsewhere_text(elsewhere))
        out.append(_finding("worker-straggler", elsewhere, summary,
                            _evidence(elsewhere, "elsewhere") + _evidence(ipc, "waiting"),
                            0.8 if len(elsewhere) < len(ipc) else 0.6))
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
        conf = (0.9 if len(stragglers) <= len(waiting) else 0.7) - penalty
        out.append(_finding("collective-straggler", stragglers, summary + unknown_text,
                            _evidence(stragglers, "elsewhere") + _evidence(waiting, "waiting")
                            + _evidence(unknown, "unknown"), conf))
    elif behind and not waiting:
        ahead = [s for s in fr if s not in behind]
        summary = "%s enqueued collective #%s; %s stopped at #%s (%s)" % (
            _who(ahead), ahead[0].last_enqueued if ahead else "?", _who(behind),
            compress_ranks(sorted({s.last_enqueued for s in behind if s.last_enqueued is not None})),
            _source_name(behind))
        out.append(_finding("collective-straggler", behind, summary + unknown_text, _evidence(behind, "behind"),
                            0.7 - penalty))

    # different collectives among the waiting ranks
    groups = collective_groups(waiting)
    if len(groups) > 1:
        ordered = sorted(groups, key=lambda g: (-len(g), min(s.process for s in g)))
        major, minors = ordered[0], [s for g in ordered[1:] for s in g]
        parts = ["%s wait%s in %s" % (_who(g), "s" if len(g) == 1 else "", _coll_text(g[0]))
                 for g in ordered[:MAX_NAMED]]
        summary = "; ".join(parts) + ": the calls do not match"
        known = all(s.op is not None for s in waiting)
        if len(ordered[0]) == len(ordered[1]):
            # no majority: nothing says which side took the wrong path, so every side is named
            summary += " (no majority: the stacks cannot tell which side took the wrong path)"
            out.append(_finding("collective-mismatch", list(waiting), summary + unknown_text,
                                _evidence(list(waiting), "different collective"),
                                (0.7 if known else 0.5) - penalty))
        else:
            out.append(_finding("collective-mismatch", minors, summary + unknown_text,
                                _evidence(minors, "different collective") + _evidence(major, "majority"),
                                (0.85 if known else 0.6) - penalty))
    if waiting and not stragglers and not missing and len(groups) <= 1 and len(states) > 1 \
            and all((s.waiting or (s in unknown and s.state == "elsewhere")) and s.state != "ipc-wait"
                    for s in states):
        # a rank read but not placed keeps the verdict at low confidence; a failed input gives none
        if unknown:
            summary = "%s wait%s in %s; no rank is proven elsewhere%s" % (
                _who(waiting), "s" if len(waiting) == 1 else "", _coll_text(waiting[0]), unknown_text)
        else:
            summary = "all %d ranks wait in %s; none is missing or elsewhere" % (
                len(waiting), _coll_text(waiting[0]))
        out.append(_finding("collective-hang", waiting, summary,
                            _evidence(waiting, "waiting") + _evidence(unknown, "unknown"), 0.6 - penalty))
    return out


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


def _rank_suffix(ranks: List[int], procs: List[int]) -> str:
    if ranks and len(ranks) == len(procs):
        return " (on %s)" % _key_label(ranks)
    return " (in %d processes)" % len(procs)


def group_findings(snapshot: Snapshot) -> List[Finding]:
    """One finding per signature across processes, naming the ranks it holds for."""
    groups: OrderedDict[Tuple[str, str], List[Finding]] = OrderedDict()
    for f in snapshot.findings:
        groups.setdefault((f.signature, f.severity), []).append(f)
    out = []
    for members in groups.values():
        first = members[0]
        procs = sorted({m.process for m in members})
        if len(procs) > 1:
            ranks = sorted({snapshot.processes[i].rank for i in procs if 0 <= i < len(snapshot.processes)
                            and snapshot.processes[i].rank is not None})
            first.processes = procs
            first.ranks = ranks
            first.summary = (first.summary or first.title) + _rank_suffix(ranks, procs)
            first.evidence = [replace(e, process=m.process) for m in members for e in m.evidence][:256]
        elif first.process < len(snapshot.processes) and snapshot.processes[first.process].rank is not None:
            first.ranks = [snapshot.processes[first.process].rank]  # type: ignore[list-item]
            first.processes = procs
        out.append(first)
    return out


def state_classes(states: Sequence[RankState], keys: Sequence[int]) -> List[JobRankClass]:
    """Ranks grouped by where they are (state, collective, call site, innermost frame), largest first.

    Not by their whole stacks: two ranks in the same ``all_reduce`` whose gloo helper threads sit
    in different places are the same for the diagnosis, and would split a 4,096-rank job into
    hundreds of classes.  The call tree keeps every thread's differences.
    """
    groups = _classes_of(states, lambda s: (s.state, s.op, s.call_site, s.where, s.seq))
    out = []
    for members in groups.values():
        ks = [keys[s.process] for s in members]
        out.append(JobRankClass(ranks=compress_ranks(ks), keys=ks[:4096], processes=[s.process for s in members],
                                size=len(members), state=members[0].state, where=members[0].where))
    out.sort(key=lambda c: (-c.size, c.processes[0]))
    return out


def keys_for(processes: Sequence[Process]) -> Tuple[List[int], str]:
    """Ranks when every process has a distinct one; process indices otherwise."""
    ranks = [p.rank for p in processes]
    if ranks and all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
        return [int(r) for r in ranks if r is not None], "rank"
    return list(range(len(processes))), "process"


def _cross_rank_step(snapshot: Snapshot, states: List[RankState], world: Optional[int]) -> List[Finding]:
    """The findings that compare ranks; one process compares with nothing."""
    return cross_rank_findings(snapshot, states, world) if len(snapshot.processes) > 1 or world is not None else []


def _peer_wait_step(snapshot: Snapshot, states: List[RankState], world: Optional[int]) -> List[Finding]:
    """A peer wait needs peers: several processes, or one that knows it is a rank."""
    if len(states) > 1 or any(s.rank is not None for s in states):
        return _peer_wait(snapshot, states)
    return []


#: The code of the job rules, by the ``step`` their entries of ``signatures/rules/rules.yaml`` name.
JOB_STEPS: Dict[str, Callable[[Snapshot, List[RankState], Optional[int]], List[Finding]]] = {
    "cross_rank": _cross_rank_step,
    "peer_wait": _peer_wait_step,
}


def analyze_job(snapshot: Snapshot, rules: Optional[RuleSet] = None) -> Snapshot:
    """Cross-rank findings, grouped per-rank findings and ``Snapshot.job`` (see the module doc).

    The job rules run in the order of the rule list; a finding they make drops the per-process
    findings its rule ``supersedes`` on the processes it names."""
    if not _job_context(snapshot):
        return snapshot
    rules = rules if rules is not None else load_rules()
    procs = snapshot.processes
    memo: Dict[tuple, tuple] = {}
    states = [rank_state(i, p, memo) for i, p in enumerate(procs)]
    world = world_size(procs) if len(procs) > 1 or _whole_host(procs) else None
    dup = [r for r, n in Counter(p.rank for p in procs if p.rank is not None).items() if n > 1]
    if dup:
        snapshot.warnings.append("%s came in more than once: the job view keys processes by index"
                                 % _key_label(sorted(dup)))
    found: List[Finding] = []
    for step in rules.steps("job"):
        found.extend(JOB_STEPS[step](snapshot, states, world))
    found = job_findings(snapshot, states, found)  # stuck or slow over the samples (progress.py)
    snapshot.findings = rules.superseded(found, snapshot.findings)
    if len(procs) == 1 and world is None:  # one rank, not a whole host: what it shows (a peer wait), no job view
        snapshot.findings = found + snapshot.findings
        for f in snapshot.findings:
            if procs[0].rank is not None and not f.ranks:
                f.ranks = [procs[0].rank]
        return snapshot
    snapshot.findings = found + group_findings(snapshot)
    keys, key_kind = keys_for(procs)
    live = [i for i, p in enumerate(procs) if p.threads]
    classes = state_classes(states, keys)
    tree = build_call_tree([procs[i] for i in live], [keys[i] for i in live]) if live else None
    seen = sorted(p.rank for p in procs if p.rank is not None)
    seen_set = set(seen)  # once: not per rank (131,072 ranks)
    missing = [r for r in range(world) if r not in seen_set] if world is not None and seen else []
    snapshot.job = JobSummary(
        processes=len(procs),
        key=key_kind,
        world_size=world,
        ranks=compress_ranks(seen),
        missing=compress_ranks(missing),
        failed=[JobFailure(process=i, rank=p.rank, error=p.error) for i, p in enumerate(procs) if p.error],
        states=[JobRankState(process=s.process, rank=s.rank, state=s.state, op=s.op, call_site=s.call_site,
                             where=s.where, seq=s.seq, evidence=s.evidence,
                             evidence_reason=s.evidence_reason, sources=list(s.sources or [])) for s in states],
        classes=classes,
        tree=tree,
        progress=rank_facts(snapshot, states),  # live ranks sampled more than once: how each moved
    )
    return snapshot
