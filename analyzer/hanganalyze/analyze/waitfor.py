"""Wait-for graphs and deadlock cycles, as pure functions of a Snapshot.

The graph itself is built by ``hanganalyze_gdbext.model.waitgraph`` (shared with the gdb command
``hang-locks``); this module stores it on each process and turns cycles into findings.  A cycle
is proven by memory (each edge is an owner field read from the process), so it needs no
signature rule and carries full confidence.
"""

from __future__ import annotations

from typing import List

from hanganalyze_gdbext.model import Evidence, Finding, Snapshot, waitgraph

SIGNATURE = "deadlock-cycle"

FIX_LOCK_ORDER = (
    "Acquire these locks in one global order everywhere (or take them together, e.g. std::scoped_lock / "
    "a single coarser lock); a cycle cannot form when every thread takes them in the same order."
)
FIX_GIL = (
    "Never wait for a native lock while holding the GIL: release it first (Py_BEGIN_ALLOW_THREADS, "
    "pybind11::gil_scoped_release, ctypes.CDLL instead of PyDLL), or do not call back into Python "
    "while holding that native lock."
)
FIX_JOIN = "Do not join a thread while holding a lock that thread needs; release it before join()."


def annotate_waitgraphs(snapshot: Snapshot) -> None:
    """Fill ``process.waitgraph`` for every process whose threads record waits."""
    for p in snapshot.processes:
        p.waitgraph = waitgraph.build(p)


def cycle_findings(snapshot: Snapshot) -> List[Finding]:
    """One ``deadlock-cycle`` finding per cycle, with the frame where each thread waits."""
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
                fix.append(FIX_GIL)
            if kinds & {"join", "pyjoin"}:
                fix.append(FIX_JOIN)
            if kinds & {"mutex", "rwlock", "rlock", "pylock"}:
                fix.append(FIX_LOCK_ORDER)
            title = "Deadlock: %d threads wait for each other in a cycle" % len(tids) if len(tids) > 1 else \
                "Deadlock: a thread waits for a lock it holds itself"
            if "gil" in kinds:
                title += " (GIL vs native lock)"
            out.append(Finding(
                signature=SIGNATURE,
                title=title,
                severity="deadlock",
                process=pi,
                threads=tids,
                summary=waitgraph.describe_cycle(p, cyc),
                fix=fix,
                evidence=evidence,
                confidence=1.0,
                cause="lock-order inversion" if "gil" not in kinds else "GIL / native lock inversion",
            ))
    return out
