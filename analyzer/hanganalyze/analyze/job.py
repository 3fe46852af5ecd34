"""The job view: many ranks in, one diagnosis out.

When one rank of a distributed job stops, every other rank stops too, each in a collective; one
process at a time, every rank looks guilty or none does.  Compared side by side they say who is
at fault.  Pure functions of a Snapshot whose processes are the ranks (per-process matching has
already run; see ``pipeline.analyze``):

1. flight-recorder dumps are joined to the stacks of the same rank (``join_flight_recorder``);
2. each process gets a state (``rankstate.rank_state``, or the one its input carries: a process read
   from node summaries has ``rank_state`` and no stacks, and the call tree comes from the summaries);
3. the job rules (``crossrank.py``, run by ``registry.run_job_rules``): the cross-rank findings,
   each with ``ranks`` naming the ranks at fault, and the peer waits;
4. per-process findings that hold on several ranks become one finding naming its ranks;
5. ``Snapshot.job``: world size, missing ranks, rank classes (equivalence classes of stacks) and
   the merged call tree (``calltree.py``).

The rules of step 3 are code; their ids, titles, causes, fixes and what they supersede are data:
their entries in ``signatures/rules/rules.yaml`` (``analyze/rules.py``), run in that order.

Merged node summaries (``acquire/nodesummary.py``) go through the same ``analyze_job``: there is no
second job pipeline.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.calltree import build_call_tree, tree_from_summary
from hanganalyze.analyze.crossrank import classes_of as _classes_of  # the names used when they lived here
from hanganalyze.analyze.crossrank import key_label as _key_label
from hanganalyze.analyze.crossrank import whole_host as _whole_host
from hanganalyze.analyze.progress import job_findings, rank_facts
from hanganalyze.analyze.rankjoin import join_sources
from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.rankstate import RankState, rank_state
from hanganalyze.analyze.rasrules import RAS_IDS
from hanganalyze.analyze.registry import run_job_rules
from hanganalyze.analyze.rules import RuleSet, load_rules
from hanganalyze_gdbext.model import Finding, Process, Snapshot
from hanganalyze_gdbext.model.job import JobFailure, JobRankClass, JobSummary


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


def join_flight_recorder(snapshot: Snapshot) -> None:
    """A flight-recorder dump gives no stack; the stacks give no sequence numbers: one process per
    rank.  Every source of a rank (stacks, dumps, log lines) is joined (``rankjoin.join_sources``).

    Runs before matching (it changes process indices).  A dump whose rank has no stack in the input
    stays a process of its own (``no-stack``): it still says which collective that rank reached.
    """
    join_sources(snapshot)


def _job_context(snapshot: Snapshot) -> bool:
    return len(snapshot.processes) > 1 or bool(snapshot.nccl_ras and snapshot.nccl_ras.queries) or any(
        p.rank is not None or p.collectives for p in snapshot.processes)


def _rank_suffix(ranks: List[int], procs: List[int]) -> str:
    if ranks and len(ranks) == len(procs):
        return " (on %s)" % _key_label(ranks)
    return " (in %d processes)" % len(procs)


def group_findings(snapshot: Snapshot) -> List[Finding]:
    """One finding per signature across processes, naming the ranks it holds for.

    A finding that already holds for several processes (``processes``: a node summary's group, read
    with its members) joins as all of them; its evidence stands for each member's."""
    groups: OrderedDict[Tuple[str, str], List[Finding]] = OrderedDict()
    for f in snapshot.findings:
        groups.setdefault((f.signature, f.severity), []).append(f)
    out = []
    for members in groups.values():
        first = members[0]
        procs = sorted({i for m in members for i in (m.processes or [m.process])})
        if len(procs) > 1:
            ranks = sorted({snapshot.processes[i].rank for i in procs if 0 <= i < len(snapshot.processes)
                            and snapshot.processes[i].rank is not None})
            first.processes = procs
            first.ranks = ranks
            first.summary = (first.summary or first.title) + _rank_suffix(ranks, procs)
            first.evidence = [replace(e, process=i) for m in members for i in (m.processes or [m.process])
                              for e in m.evidence][:256]
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


def analyze_job(snapshot: Snapshot, rules: Optional[RuleSet] = None) -> Snapshot:
    """Cross-rank findings, grouped per-rank findings and ``Snapshot.job`` (see the module doc).

    The job rules run in the order of the rule list; a finding they make drops the per-process
    findings its rule ``supersedes`` on the processes it names."""
    if not _job_context(snapshot):
        return snapshot
    rules = rules if rules is not None else load_rules()
    procs = snapshot.processes
    memo: Dict[tuple, tuple] = {}
    # a process read from a node summary has its state and no stacks (a node's capture made them
    # already): its state is taken as it is, where it is still this process's
    states = [p.rank_state if p.rank_state is not None and p.rank_state.process == i else rank_state(i, p, memo)
              for i, p in enumerate(procs)]
    summary = snapshot.node_summary if snapshot.node_summary is not None and snapshot.node_summary.level else None
    if summary is not None:  # merged node summaries: the largest WORLD_SIZE their nodes saw
        world = summary.world_size
    else:
        world = world_size(procs) if len(procs) > 1 or _whole_host(procs) else None
    dup = [r for r, n in Counter(p.rank for p in procs if p.rank is not None).items() if n > 1]
    if dup:
        snapshot.warnings.append("%s came in more than once: the job view keys processes by index"
                                 % _key_label(sorted(dup)))
    found = run_job_rules(snapshot, states, world, rules)  # analyze/registry.py: each rule isolated
    ras = [f for f in found if f.signature in RAS_IDS]  # NCCL's own counts over time: not judged by the samples
    found = job_findings(snapshot, states, [f for f in found if f.signature not in RAS_IDS]) + ras
    found = rules.superseded(found, found)  # NCCL RAS's counts over time replace stack-only job findings
    snapshot.findings = rules.superseded(found, snapshot.findings)
    if len(procs) == 1 and world is None:  # one rank, not a whole host: what it shows (a peer wait), no job view
        snapshot.findings = found + snapshot.findings
        for f in snapshot.findings:
            if procs[0].rank is not None and not f.ranks:
                f.ranks = [procs[0].rank]
        return snapshot
    snapshot.findings = found + group_findings(snapshot)
    keys, key_kind = keys_for(procs)
    classes = state_classes(states, keys)
    if summary is not None:  # no stacks: the tree from the summaries' distinct stacks
        tree = tree_from_summary(summary, keys)
    else:
        live = [i for i, p in enumerate(procs) if p.threads]
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
        states=states,  # the one rank-state record: shown as the rules left it
        classes=classes,
        tree=tree,
        progress=rank_facts(snapshot, states),  # live ranks sampled more than once: how each moved
        nodes=summary.nodes if summary is not None else [],
    )
    return snapshot
