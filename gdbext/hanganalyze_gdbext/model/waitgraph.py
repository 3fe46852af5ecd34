"""The wait-for graph of one process, built from ``Thread.waits``: pure data, no gdb.

It is part of the shared model (standard library, Python 3.8) so that the gdb command
``hang-locks`` and the analyzer (``hanganalyze.analyze.waitfor``) share one implementation.

Graph: thread --waits--> resource --held_by--> thread.  Every thread waits on at most one
resource and every resource has at most one known owner, so following edges from any thread
either ends (a thread that is not waiting, or a resource whose owner is unknown) or enters a
cycle: a deadlock proven by memory, not guessed from stack shapes.
"""

from typing import Dict, List, Optional, Tuple

from . import Process, Thread, Wait, WaitEdge, WaitGraph, WaitNode
from .labels import ThreadStyle, thread_label

JOIN_KINDS = ("join", "pyjoin")


def thread_id(tid: Optional[int]) -> str:
    return "t%s" % tid


def resource_id(w: Wait, tid: Optional[int]) -> str:
    if w.resource:
        return "r:%s:%s" % (w.kind, w.resource)
    return "r:%s:anon-%s" % (w.kind, tid)  # unknown address: one node per waiter


def resource_label(w: Wait, owner: Optional[Thread]) -> str:
    kind = w.kind
    if kind == "gil":
        return "the GIL"
    if kind in JOIN_KINDS:
        target = owner.name if owner is not None and owner.name else "LWP %s" % w.owner_tid
        return "join(%s)" % target
    if w.name:
        return str(w.name)
    kind_word = {"mutex": "mutex", "rwlock": "rwlock", "rlock": "RLock", "pylock": "Lock",
                 "condvar": "condition variable", "futex": "futex"}.get(str(kind), str(kind))
    return "%s %s" % (kind_word, w.resource or "(address unknown)")


def build(process: Process) -> Optional[WaitGraph]:
    """The ``Process.waitgraph``, or None when no thread records a wait."""
    waiting = [(t, t.waits) for t in process.threads if t.waits]
    if not waiting:
        return None
    nodes: Dict[str, WaitNode] = {}
    edges: List[WaitEdge] = []
    nxt: Dict[str, str] = {}  # the single outgoing edge of every node

    def add_thread(tid: Optional[int]) -> str:
        nid = thread_id(tid)
        if nid not in nodes:
            nodes[nid] = WaitNode(nid, "thread", thread_label(process.thread_by_tid(tid), ThreadStyle.WAIT, tid))
        return nid

    for t, w in waiting:
        src = add_thread(t.tid)
        owner_tid = w.owner_tid
        owner = process.thread_by_tid(owner_tid) if owner_tid is not None else None
        rid = resource_id(w, t.tid)
        if rid not in nodes:
            nodes[rid] = WaitNode(rid, "resource", resource_label(w, owner))
        edges.append(WaitEdge(src, rid, "waits", str(w.kind)))
        nxt[src] = rid
        if owner_tid is not None and rid not in nxt:
            dst = add_thread(owner_tid)
            label = "held by (inferred from source)" if w.owner_inferred else "held by"
            edges.append(WaitEdge(rid, dst, "held_by", label))
            nxt[rid] = dst
    cycles = _cycles(nxt)
    on_cycle = {n for c in cycles for n in c}
    chains = _chains(nxt, nodes, edges, on_cycle)
    order = {n: i for i, n in enumerate(sorted(nodes, key=_node_sort_key))}
    return WaitGraph(sorted(nodes.values(), key=lambda n: order[n.id]), edges, cycles, chains)


def _node_sort_key(nid: str) -> Tuple[int, str]:
    if nid.startswith("t"):
        try:
            return (0, "%012d" % int(nid[1:]))
        except ValueError:
            return (0, nid)
    return (1, nid)


def _cycles(nxt: Dict[str, str]) -> List[List[str]]:
    """Cycles of a graph with out-degree <= 1, each starting at its smallest thread node."""
    cycles: List[List[str]] = []
    state: Dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(nxt, key=_node_sort_key):
        path: List[str] = []
        n: Optional[str] = start
        while n is not None and state.get(n) is None:
            state[n] = 1
            path.append(n)
            n = nxt.get(n)
        if n is not None and state.get(n) == 1:
            cyc = path[path.index(n):]
            threads = [x for x in cyc if x.startswith("t")]
            first = min(threads, key=_node_sort_key) if threads else cyc[0]
            k = cyc.index(first)
            cycles.append(cyc[k:] + cyc[:k])
        for x in path:
            state[x] = 2
    return cycles


def _chains(nxt: Dict[str, str], nodes: Dict[str, WaitNode], edges: List[WaitEdge],
            on_cycle: set) -> List[List[str]]:
    """Maximal paths from threads nobody waits behind, ending where the wait stops being
    explained: a thread that is not waiting, a resource with no known owner, or a cycle."""
    has_in = {e.dst for e in edges}
    chains: List[List[str]] = []
    for start in sorted(nodes, key=_node_sort_key):
        if not start.startswith("t") or start in has_in or start in on_cycle or start not in nxt:
            continue
        path = [start]
        n = nxt.get(start)
        while n is not None and n not in path:
            path.append(n)
            if n in on_cycle and n.startswith("t"):
                break  # blocked behind a deadlocked thread
            n = nxt.get(n)
        chains.append(path)
    return chains


# -- words ----------------------------------------------------------------------------------
def _wait_phrase(process: Process, w: Wait) -> str:
    owner_tid = w.owner_tid
    owner = process.thread_by_tid(owner_tid) if owner_tid is not None else None
    if w.kind in JOIN_KINDS:
        return "thread %s to exit (join)" % thread_label(owner, ThreadStyle.WAIT, owner_tid)
    return resource_label(w, owner)


def _held_by(process: Process, tid: Optional[int], cycle_resources: List[Wait]) -> List[str]:
    return [resource_label(w, None) for w in cycle_resources if w.owner_tid == tid and w.kind not in JOIN_KINDS]


def describe_cycle(process: Process, cycle: List[str]) -> str:
    """"thread poster (LWP 812) holds ledger, waits for audit; thread reconciler (LWP 813) holds
    audit, waits for ledger"."""
    threads = [process.thread_by_tid(_tid(n)) for n in cycle if n.startswith("t")]
    waits = [t.waits for t in threads if t is not None and t.waits]
    parts = []
    for t in threads:
        if t is None or not t.waits:
            continue
        held = _held_by(process, t.tid, waits)
        s = "thread %s" % thread_label(t, ThreadStyle.WAIT)
        if held:
            s += " holds %s," % " and ".join(held)
        s += " waits for %s" % _wait_phrase(process, t.waits)
        parts.append(s)
    inferred = [w for w in waits if w.owner_inferred and w.kind == "pylock"]
    if inferred:
        parts[-1] += " (%s inferred from source: CPython records no owner for threading.Lock)" % (
            "owner" if len(inferred) == 1 else "owners")
    pasted = [w.owner_inferred for w in waits if w.owner_inferred and w.kind != "pylock"]
    if pasted:  # a pasted stack's owners (gdb's printout, the GIL holder by elimination): say how
        parts[-1] += " (from a paste: %s)" % "; ".join(pasted)
    return "; ".join(parts)


def describe_chain(process: Process, chain: List[str], on_cycle: set) -> str:
    """"thread front (LWP 7) waits for shelf held by middle (LWP 8), which waits for crate held by
    sleeper (LWP 9), which is not waiting on a lock (running or in a system call: nanosleep)"."""
    s = ""
    for i, n in enumerate(chain):
        if not n.startswith("t"):
            continue
        t = process.thread_by_tid(_tid(n))
        label = thread_label(t, ThreadStyle.WAIT, _tid(n))
        s += ("thread %s" % label) if i == 0 else (" held by %s" % label)
        if i + 1 < len(chain) and t is not None and t.waits:
            s += "%s waits for %s" % (", which" if i else "", _wait_phrase(process, t.waits))
    end = chain[-1]
    if end in on_cycle:
        s += ", which is part of a deadlock cycle"
    elif end.startswith("t"):
        t = process.thread_by_tid(_tid(end))
        inner = next((f.function for f in t.frames if f.function), None) if t is not None else None
        s += ", which is not waiting on a lock (running or in a system call%s)" % (": %s" % inner if inner else "")
    else:
        s += ", whose owner is unknown"
    return s


def _tid(node: str) -> Optional[int]:
    try:
        return int(node[1:])
    except ValueError:
        return None


def describe(process: Process, graph: Optional[WaitGraph] = None) -> List[str]:
    """Sentences for text renderers: cycles first ("Deadlock: ..."), then chains ("Blocked behind")."""
    graph = graph if graph is not None else (process.waitgraph or build(process))
    if not graph:
        return []
    out = ["Deadlock: %s." % describe_cycle(process, c) for c in graph.cycles]
    on_cycle = {n for c in graph.cycles for n in c}
    for ch in graph.chains:
        if len(ch) >= 3:
            out.append("Blocked behind: %s." % describe_chain(process, ch, on_cycle))
    return out
