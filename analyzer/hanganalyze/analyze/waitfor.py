"""Wait-for graphs and deadlock cycles, as pure functions of a Snapshot.

The graph itself is built by ``hanganalyze_gdbext.model.waitgraph`` (shared with the gdb command
``hang-locks``); this module stores it on each process and turns cycles into findings.  A cycle
is proven by memory (each edge is an owner field read from the process), so it needs no
signature rule and carries full confidence; where memory records no owner (a plain
``threading.Lock``), an edge may be inferred from the holder's source (``heldlocks.py``): the
evidence says so and the confidence is ``INFERRED_CONFIDENCE``.  Its id and texts (titles, causes, fixes) are data:
the ``deadlock-cycle`` entry of ``signatures/rules/rules.yaml`` (``analyze/rules.py``).
"""

from __future__ import annotations

from typing import List, Optional

from hanganalyze.analyze.findings import from_rule
from hanganalyze.analyze.pastegil import BY_ELIMINATION, infer_gil_holder
from hanganalyze.analyze.pastelocks import infer_paste_waits
from hanganalyze.analyze.rules import Rule, load_rules
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Evidence, Finding, Snapshot, waitgraph
from hanganalyze_gdbext.model.labels import ThreadStyle, thread_label

SIGNATURE = "deadlock-cycle"
#: Confidence of a cycle with a held-by edge inferred from the holder's source (a plain
#: ``threading.Lock`` records no owner): strong, but not memory's proof (1.0).
INFERRED_CONFIDENCE = 0.85
#: Confidence of a cycle with an edge found by elimination in a paste (``pastegil.BY_ELIMINATION``:
#: the only thread left that could hold the lock): a lead, not a confident answer.
ELIMINATED_CONFIDENCE = 0.6

def annotate_waitgraphs(snapshot: Snapshot) -> None:
    """Fill ``process.waitgraph`` for every process whose threads record waits (a paste's plain
    Lock waits first: ``pastelocks``, by the locks' names in the frames' source)."""
    for p in snapshot.processes:
        if p.source == "text":
            infer_paste_waits(p)
            infer_gil_holder(p)
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
            inferred = any(w.owner_inferred for _t, w in waiting)
            eliminated = any((w.owner_inferred or "").startswith(BY_ELIMINATION) for _t, w in waiting)
            evidence = []
            for t, w in waiting:
                fi = w.frame
                fr = t.frames[fi] if isinstance(fi, int) and 0 <= fi < len(t.frames) else None
                where = " at " + frame_text(fr, FrameStyle.WAIT) if fr is not None else ""
                evidence.append(Evidence(
                    thread=t.tid,
                    frame=fi,
                    rule="wait-for cycle",
                    text="%s waits for %s%s: %s" % (
                        thread_label(t, ThreadStyle.WAIT),
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
                # Python locks only: no C++ advice (std::scoped_lock) for a Python program
                python_only = not kinds & {"mutex", "rwlock"}
                fix.append(rule.text("fix_lock_order_python" if python_only else "fix_lock_order"))
            title = rule.text("title_cycle") % len(tids) if len(tids) > 1 else rule.text("title_self")
            if "gil" in kinds:
                title += rule.text("title_gil")
            cause = rule.text("cause_gil" if "gil" in kinds else "cause_locks")
            out.append(from_rule(rule, pi, waitgraph.describe_cycle(p, cyc), evidence,
                                 ELIMINATED_CONFIDENCE if eliminated else INFERRED_CONFIDENCE if inferred else 1.0,
                                 threads=tids,
                                 title=title, fix=fix, cause=cause))
    return out
