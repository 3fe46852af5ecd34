"""The merged call tree of a whole job (as LLNL STAT does).

A hang of a 4,096-rank job is usually *one* rank (or a handful) that is somewhere else than all
the others: the straggler sits in ``load_next_batch`` while everybody else waits in
``all_reduce``.  Reading 4,096 reports cannot show that; one prefix tree of every thread's stack,
outermost frame at the root and each node labelled with the set of ranks that pass through it,
shows it at a glance: the tree branches exactly at the frame where the ranks diverge.

The normalized stacks it is built from are ``stacks.py``, its rank sets ``ranksets.py``, the
rank classes built in the same pass ``rankclasses.py`` (their names are importable from here too);
its text form is ``render/treetext.py``.  Everything here is a pure function of the processes
(no snapshot, no findings, no I/O), so the pipeline, the renderers and the tests can call it in
any order.

Design choices:

* Frames are *normalized* before they enter the tree (``frametext.FrameStyle.TREE``): addresses, C++
  parameter lists, template arguments and clone suffixes differ between builds, hosts and ASLR
  layouts of the same code, and would otherwise split the tree on noise.  Python frames keep their
  line, because a different line *is* a different place in the program (that is how the
  straggler of the test data shows: the same ``<module>`` at line 14 vs 15).
* CPython's own native frames (``_PyEval_EvalFrameDefault`` ...) are dropped: between two Python
  frames they only add noise, and their number varies with the CPython version.
* Speed: identical raw stacks are normalized once (a cache keyed by the raw frames without
  addresses), identical normalized stacks are inserted once with a rank bitset and a thread
  multiplicity, and rank sets are Python ``int`` bitsets over the dense positions of the keys while
  building (an OR of a 4,096-bit int is a few machine words) and become range strings only at the
  end, memoised per distinct set.
* Bounds: a stack deeper than ``MAX_DEPTH`` is elided in the middle and the tree is pruned to
  ``MAX_NODES`` nodes (smallest subtrees first), so the JSON, the HTML and any recursive consumer
  (jinja2 macros, ``json.dumps``) stay bounded even for hostile or pathological inputs.
"""

from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Sequence, Tuple

# the pieces the tree is made of, named here too for the callers of this module
from hanganalyze.analyze.rankclasses import active_classes, rank_classes  # noqa: F401
from hanganalyze.analyze.ranksets import RankBits, compress_ranks, default_keys, expand_ranks  # noqa: F401
from hanganalyze.analyze.stacks import (  # noqa: F401
    DEPTH_HEAD,
    MAX_DEPTH,
    NO_FRAMES_LABEL,
    THREAD_MODES,
    Stacks,
    check_args,
    main_thread,
    scan_threads,
)
from hanganalyze_gdbext.model import Process
from hanganalyze_gdbext.model.job import NodeSummary

#: Label of the synthetic root node.
ROOT_LABEL = "<job>"
#: A process without any thread (acquisition failed), or whose threads were all filtered out.
NO_THREADS_LABEL = "<no threads>"
#: Nodes kept in the tree; beyond it the smallest subtrees become ``… N more branches`` nodes (one
#: per branch point that lost children, so the result has at most about twice this many).
MAX_NODES = 10000

# internal trie node: [label id, rank bitset, thread count, {label id: child}]
_LID, _BITS, _THREADS, _KIDS = 0, 1, 2, 3


def _prune(root: list, max_nodes: int) -> dict:
    """Which trie nodes to keep: grow from the root, biggest rank sets first, until ``max_nodes``.
    Returns ``{"kept": ids of kept nodes, "cut": {id of a kept node: its children that were cut}}``
    (each cut group becomes one ``… N more branches`` node)."""
    kept = {id(root)}
    heap: List[Tuple[int, int, int, int, list, list]] = []
    seq = 0

    def push(parent: list) -> None:
        nonlocal seq
        for child in parent[_KIDS].values():
            seq += 1
            heapq.heappush(heap, (-bin(child[_BITS]).count("1"), -child[_THREADS], seq, id(child), child, parent))

    push(root)
    while heap and len(kept) < max_nodes:
        item = heapq.heappop(heap)
        kept.add(id(item[4]))
        push(item[4])
    cut: Dict[int, List[list]] = {}
    for item in heap:
        cut.setdefault(id(item[5]), []).append(item[4])
    return {"kept": kept, "cut": cut}


def _count_nodes(root: list, stop: int) -> int:
    n, todo = 0, [root]
    while todo and n <= stop:
        node = todo.pop()
        n += 1
        todo.extend(node[_KIDS].values())
    return n



def build_call_tree(processes: Sequence[Process], keys: Sequence[int], threads: str = "all",
                    max_nodes: int = MAX_NODES) -> dict:
    """The prefix tree of every selected thread's stack across processes, outermost frame first.

    ``keys[i]`` is the rank of ``processes[i]`` (see ``default_keys``).  ``threads`` is ``"all"``,
    ``"main"`` (each process's main thread) or ``"active"`` (no idle thread, by grouping's rule).
    Each node is ``{"label", "kind", "ranks": "0-3,5", "count": ranks, "threads": n, "children"}``,
    children by count descending then label; the root is a synthetic ``"<job>"`` node (kind
    ``native``) holding every key; a process with no selected thread hangs a ``"<no threads>"``
    leaf under it, so that no rank silently vanishes.  A node that summarises pruned siblings has
    ``"elided"`` (the number of nodes it stands for) and no children."""
    return job_view(processes, keys, threads, max_nodes, classes=False)[0]


def job_view(processes: Sequence[Process], keys: Sequence[int], threads: str = "all",
             max_nodes: int = MAX_NODES, classes: bool = True) -> Tuple[dict, List[dict]]:
    """``(build_call_tree(...), rank_classes(...))`` from one pass over the frames (about half the
    time of the two calls: reading 2.4 million frames is most of the work)."""
    check_args(processes, keys, threads)
    stacks = Stacks()
    selected: List[List[int]] = []
    active: List[List[int]] = []
    for proc in processes:
        sel, act = scan_threads(proc, threads, stacks, classes)
        selected.append(sel)
        active.append(act)
    tree = _tree(selected, keys, stacks, max_nodes)
    return tree, (active_classes(processes, keys, active) if classes else [])


def _tree(selected: List[List[int]], keys: Sequence[int], stacks: Stacks, max_nodes: int) -> dict:
    sorted_keys = sorted(set(keys))
    position = {k: i for i, k in enumerate(sorted_keys)}
    # normalized stack id -> [rank bits, thread count]; a process contributes its bit once per stack
    agg: Dict[int, list] = {}
    no_threads = stacks.label_id(NO_THREADS_LABEL, "native")
    empty_bits = 0
    for sids, key in zip(selected, keys):
        bit = 1 << position[key]
        if not sids:
            empty_bits |= bit
            continue
        for sid in sids:
            entry = agg.get(sid)
            if entry is None:
                agg[sid] = [bit, 1]
            else:
                entry[0] |= bit
                entry[1] += 1
    items = [(stacks.seqs[sid], e[0], e[1]) for sid, e in agg.items()]
    if empty_bits:
        items.append(((no_threads,), empty_bits, 0))
    return tree_from_items(items, sorted_keys, stacks, max_nodes)


def tree_from_summary(summary: NodeSummary, keys: Sequence[int], max_nodes: int = MAX_NODES) -> Optional[dict]:
    """The tree of merged node summaries (their processes have no stacks): their distinct stacks,
    each with the processes that have it, keyed by ``keys[process]``; None when no process of
    theirs had threads."""
    if not summary.live:
        return None
    sorted_keys = sorted({keys[i] for i in summary.live})
    position = {k: j for j, k in enumerate(sorted_keys)}
    st = Stacks()
    lids = [st.label_id(lab, kind) for lab, kind in summary.labels]
    items = []
    nbytes = (len(sorted_keys) + 8) // 8
    for seq, (members, threads) in summary.stacks.items():
        buf = bytearray(nbytes)
        for x in members:
            b = position[keys[x]]
            buf[b >> 3] |= 1 << (b & 7)
        items.append((tuple(lids[x] for x in seq), int.from_bytes(bytes(buf), "little"), threads))
    return tree_from_items(items, sorted_keys, st, max_nodes)


def tree_from_items(items: Sequence[Tuple[Tuple[int, ...], int, int]], sorted_keys: List[int], stacks: Stacks,
                    max_nodes: int = MAX_NODES) -> dict:
    """The tree from its distinct stacks: ``(label ids outermost first, rank bits over the positions
    of sorted_keys, thread count)`` each; merged node summaries' tree (``tree_from_summary``) is built so."""
    all_bits = (1 << len(sorted_keys)) - 1
    root: list = [stacks.label_id(ROOT_LABEL, "native"), all_bits, 0, {}]
    for seq, bits, n in items:
        root[_THREADS] += n
        node = root
        for lid in seq:
            kids = node[_KIDS]
            child = kids.get(lid)
            if child is None:
                child = kids[lid] = [lid, bits, n, {}]
            else:
                child[_BITS] |= bits
                child[_THREADS] += n
            node = child
    plan = _prune(root, max_nodes) if _count_nodes(root, max_nodes) > max_nodes else None
    return _to_dict(root, stacks, RankBits(sorted_keys), plan)


def _to_dict(root: list, stacks: Stacks, ranks: RankBits, plan: Optional[dict]) -> dict:
    """Trie -> nested dicts, iteratively (a deep tree must not hit the recursion limit)."""
    labels, kinds = stacks.labels, stacks.kinds

    def make(node: list) -> dict:
        text, count = ranks.text(node[_BITS])
        return {"label": labels[node[_LID]], "kind": kinds[node[_LID]], "ranks": text, "count": count,
                "threads": node[_THREADS], "children": []}

    out = make(root)
    todo = [(root, out)]
    while todo:
        node, d = todo.pop()
        children = []
        for child in node[_KIDS].values():
            if plan is not None and id(child) not in plan["kept"]:
                continue
            cd = make(child)
            children.append(cd)
            todo.append((child, cd))
        cut = plan["cut"].get(id(node)) if plan is not None else None
        if cut:
            bits = 0
            n_threads = 0
            n_nodes = 0
            for c in cut:
                bits |= c[_BITS]
                n_threads += c[_THREADS]
                n_nodes += _count_nodes(c, 1 << 62)
            text, count = ranks.text(bits)
            label = "… %d more branch%s" % (len(cut), "es" if len(cut) != 1 else "")
            children.append({"label": label, "kind": "native", "ranks": text,
                             "count": count, "threads": n_threads, "children": [], "elided": n_nodes})
        children.sort(key=lambda c: ("elided" in c, -c["count"], c["label"], c["kind"]))
        d["children"] = children
    return out
