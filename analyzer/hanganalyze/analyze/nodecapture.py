"""The node summary of an analyzed node (``--format node``): taken by ``pipeline.analyze`` once the
per-process findings are made, before the job rules group and supersede them.

Each process gets its ``rank_state`` (the job rules then take it as it is: computed once), and
``Snapshot.node_summary`` (``model/job.py``'s ``NodeSummary``) what a summary holds beyond the
processes: the merged call tree as its distinct stacks, the per-process findings grouped by
(signature, severity) with the rule step each came from, the triage groups (wait, blame frame).
``render/node.py`` writes it; ``acquire/nodesummary.py`` documents the format and reads it back.
"""

from __future__ import annotations

import copy
import os
from typing import Dict, List, Sequence, Tuple

from hanganalyze.analyze.job import world_size
from hanganalyze.analyze.logwait import paste_timeouts
from hanganalyze.analyze.rankjoin import source_kind
from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.rankstate import rank_state
from hanganalyze.analyze.stacks import Stacks, scan_threads
from hanganalyze.analyze.summaryfields import named_texts
from hanganalyze.analyze.triage import triage_process
from hanganalyze_gdbext.model import Finding, Snapshot
from hanganalyze_gdbext.model.job import NodeGroup, NodeSummary


def _groups(findings: Sequence[Finding], step_of: Dict[int, int], db) -> List[NodeGroup]:
    """Per-process findings by (signature, severity), in order: a copy of the first member's (the
    job rules change the finding itself afterwards) and every process it holds for."""
    groups: Dict[Tuple[str, str], NodeGroup] = {}
    cache: Dict[str, object] = {}
    for f in findings:
        g = groups.get((f.signature, f.severity))
        if g is None:
            groups[(f.signature, f.severity)] = NodeGroup(finding=copy.copy(f), members=[f.process],
                                                          step=step_of.get(id(f), 0),
                                                          by_id=named_texts(f.to_dict(), db, cache))
        elif f.process not in g.members:
            g.members.append(f.process)
    return list(groups.values())


def capture(snapshot: Snapshot, step_of: Dict[int, int], db=None) -> None:
    """``snapshot.node_summary`` from the snapshot's processes and per-process findings
    (``step_of``: id of a finding -> the index of the rule step that made it)."""
    procs = snapshot.processes
    if len(procs) == 1 and procs[0].rank is not None and not procs[0].sources:
        procs[0].sources = [source_kind(procs[0])]  # as joining it with other ranks would say
    stacks = Stacks()
    agg: Dict[int, list] = {}
    memo: Dict[tuple, tuple] = {}
    live: List[int] = []
    for i, p in enumerate(procs):
        p.rank_state = rank_state(i, p, memo)
        if p.threads:
            live.append(i)
            sel, _ = scan_threads(p, "all", stacks, False)
            for sid in sel:
                e = agg.get(sid)
                if e is None:
                    agg[sid] = [[i], 1]
                else:
                    if e[0][-1] != i:
                        e[0].append(i)
                    e[1] += 1
    triage: Dict[tuple, NodeGroup] = {}
    cache: Dict[str, object] = {}
    tmemo: Dict[tuple, tuple] = {}
    # as the flat path's triage decides them (``triage.triage_findings``): a process a crash finding
    # names, and whether the process is alone
    crashes = {j for f in snapshot.findings if f.severity == "crash"
               for j in (f.processes or ([f.process] if f.process is not None else []))}
    timeouts = paste_timeouts(procs)  # a timeout line of the paste (logwait.py)
    for i, p in enumerate(procs):
        f = triage_process(i, p, known_crash=i in crashes, memo=tmemo, alone=len(procs) <= 1,
                           paste=timeouts.get(id(p)))
        if f is None:
            continue
        key = (f.triage.wait, f.triage.blame)  # type: ignore[union-attr]
        if key in triage:
            triage[key].members.append(i)
        else:
            triage[key] = NodeGroup(finding=f, members=[i], by_id=named_texts(f.to_dict(), db, cache))
    hosts = sorted({str(p.dist.host) for p in procs if p.dist is not None and p.dist.host})
    snapshot.node_summary = NodeSummary(
        level=0,
        nodes=[{"name": ",".join(hosts) or os.uname().nodename, "rows": len(procs),
                "ranks": compress_ranks(sorted(p.rank for p in procs if p.rank is not None))}],
        world_size=world_size(procs), warnings=list(snapshot.warnings),
        labels=list(zip(stacks.labels, stacks.kinds)),
        stacks={tuple(stacks.seqs[sid]): e for sid, e in agg.items()}, live=live,
        files=[p.input_file for p in procs],
        groups=_groups(snapshot.findings, step_of, db), triage=list(triage.values()))
