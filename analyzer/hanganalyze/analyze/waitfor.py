"""Wait-for graphs and deadlock cycles, as pure functions of a Snapshot.

The graph itself is built by ``hanganalyze_gdbext.model.waitgraph`` (shared with the gdb command
``hang-locks``); this module stores it on each process and turns cycles into findings.  A cycle
is proven by memory (each edge is an owner field read from the process), so it needs no
signature rule and carries full confidence.  Its id and texts (titles, causes, fixes) are data:
the ``deadlock-cycle`` entry of ``signatures/rules/rules.yaml`` (``analyze/rules.py``).
"""

from __future__ import annotations

from typing import List, Optional

from hanganalyze.analyze.findings import from_rule
from hanganalyze.analyze.rules import Rule, load_rules
from hanganalyze_gdbext.model import Evidence, Finding, Snapshot, waitgraph

SIGNATURE = "deadlock-cycle"

def annotate_waitgraphs(snapshot: Snapshot) -> None:
    """Fill ``process.waitgraph`` for every process whose threads record waits."""
    for p in snapshot.processes:
        p.waitgraph = waitgraph.build(p)


def cycle_findings(snapshot: Snapshot, rule: Optional[Rule] = None) -> List[Finding]:
    """One ``deadlock-cycle`` finding per cycle, with the frame where each thread waits; texts from
    ``rule`` (the rule list's ``deadlock-cycle`` entry when not given)."""
    rule = rule if rule is not None else load_rules().by_id(SIGNATURE)
    out: List[Finding] = []
    for pi, p in enumerate(snapshot.processes):
        graph = p.waitgraph if p.waitgraph is not None else waitgraph.build(p)
        for cyc in graph.cycles if graph else []:
            tids = [int(n[1:]) for n in cyc if n.startswith("t") and n[1:].isdigit()]
            threads = [p.thread_by_tid(t) for t in tids]
            waiting = [(t, t.waits) for t in threads if t is not None and t.waits]
            kinds = {w.kind for _t, w in waiting}
            evidence = []
            for t, w in waiting:
                fi = w.frame
                fr = t.frames[fi] if isinstance(fi, int) and 0 <= fi < len(t.frames) else None
                where = ""
                if fr is not None:
                    where = " at %s" % (fr.function or "??")
                    if fr.file:
                        where += " (%s:%s)" % (fr.file, fr.line)
                evidence.append(Evidence(
                    thread=t.tid,
                    frame=fi,
                    rule="wait-for cycle",
                    text="%s waits for %s%s: %s" % (
                        waitgraph.thread_label(t, t.tid),
                        waitgraph.resource_label(w, p.thread_by_tid(w.owner_tid)),
                        where,
                        w.detail or "",
                    ),
                ))
            fix = []
            if "gil" in kinds:
                fix.append(rule.text("fix_gil"))
            if kinds & {"join", "pyjoin"}:
                fix.append(rule.text("fix_join"))
            if kinds & {"mutex", "rwlock", "rlock", "pylock"}:
                fix.append(rule.text("fix_lock_order"))
            title = rule.text("title_cycle") % len(tids) if len(tids) > 1 else rule.text("title_self")
            if "gil" in kinds:
                title += rule.text("title_gil")
            cause = rule.text("cause_gil" if "gil" in kinds else "cause_locks")
            out.append(from_rule(rule, pi, waitgraph.describe_cycle(p, cyc), evidence, 1.0, threads=tids,
                                 title=title, fix=fix, cause=cause))
    return out
