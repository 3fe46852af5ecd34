"""``--format node``: a snapshot's node summary (``hanganalyze-node/1``), the compact document that
``acquire/nodesummary.py`` documents and reads back.

It writes ``Snapshot.node_summary`` with the snapshot's processes: captured from an analyzed node
(``analyze/nodecapture.py``: level 1), or read and merged from summaries (a summary of summaries:
one level more than the deepest it merged).  Each process's row is its ``rank_state``; the facts
many ranks share are written once (``facts``), positions as range text.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from hanganalyze.acquire.nodesummary import F_ONE_SAMPLE, F_THREADS, FACT, ROW_LATER, SCHEMA
from hanganalyze.analyze.progress import thread_progress
from hanganalyze.analyze.summaryfields import positions_text
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.job import ONE_SAMPLE_NOTE, NodeGroup


def _finding(g: NodeGroup) -> Dict[str, Any]:
    """The group's finding as written: without the texts its signature gives (named in ``by_id``),
    and without the processes and ranks it holds for (``members`` says it: read back, a finding
    holds for them)."""
    fd = g.finding.to_dict()
    fd.pop("processes", None)
    fd.pop("ranks", None)
    if g.by_id:
        fd = {k: v for k, v in fd.items() if k not in g.by_id}
        fd["by_id"] = list(g.by_id)
    return fd


def node_document(snapshot: Snapshot) -> Dict[str, Any]:
    """The node summary of ``snapshot`` as a JSON-ready dict."""
    ns = snapshot.node_summary
    if ns is None:
        raise ValueError("no node summary: the snapshot was not analyzed with node_summary=True")
    facts: Dict[tuple, int] = {}
    rows: List[list] = []
    progress: Dict[str, Any] = {}
    live = set(ns.live)
    relative = any(b for _, b in ns.bases)  # a merged row's file is made relative to the new summary's readers
    for i, p in enumerate(snapshot.processes):
        s = p.rank_state
        if s is None:
            raise ValueError("process %d has no rank state: not a captured or merged node" % i)
        fact = tuple(tuple(v) if isinstance(v, list) else v for v in (getattr(s, k) for k in FACT))
        fi = facts.setdefault(fact, len(facts))
        flags = (F_THREADS if i in live else 0) | (F_ONE_SAMPLE if ONE_SAMPLE_NOTE in p.notes else 0)
        row = [s.rank, s.pid, fi, s.thread, s.frame, s.seq, s.fr_completed, s.last_enqueued, s.last_completed,
               p.error, p.source, flags, ns.file_of(i) if relative else ns.files[i]]
        rows.append(row + [getattr(s, k) for k in ROW_LATER] if ROW_LATER else row)
        prog = thread_progress(p, s.thread)
        if prog is not None:
            progress[str(i)] = prog.to_dict()
    return {
        "schema": SCHEMA, "level": ns.level + 1, "nodes": ns.nodes, "world_size": ns.world_size,
        "warnings": list(ns.warnings),
        "facts": [[list(v) if isinstance(v, tuple) else v for v in f] for f in facts],
        "processes": rows,
        "progress": progress,
        "labels": [list(x) for x in ns.labels],
        "stacks": [[list(seq), positions_text(sorted(e[0])), e[1]] for seq, e in ns.stacks.items()],
        "findings": [{"step": g.step, "key": [g.finding.signature, g.finding.severity], "finding": _finding(g),
                      "members": positions_text(g.members)} for g in sorted(ns.groups, key=lambda g: g.step)],
        "triage": [{"key": [g.finding.triage.wait, g.finding.triage.blame], "finding": _finding(g),
                    "members": positions_text(g.members)} for g in ns.triage],
    }


def render_node(snapshot: Snapshot) -> str:
    """``--format node``: the node summary of an analyzed snapshot (or of merged summaries)."""
    return json.dumps(node_document(snapshot), separators=(",", ":")) + "\n"
