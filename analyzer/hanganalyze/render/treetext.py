"""The merged call tree (``analyze/calltree.py``) as compact text that fits a GitHub issue, even for
4,096 ranks: one line per chain of nodes that share a rank set, so lines appear only where ranks
diverge.  Used by the text and Markdown reports (``view.JobView.tree_lines``).
"""

from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Tuple

from hanganalyze.analyze.ranksets import compress_ranks, expand_ranks
from hanganalyze.frametext import clean_label


def _short_ranks(text: str, limit: int) -> str:
    """A rank set cut at a comma to ``limit`` characters (``0,2,4,…``); the count stays exact."""
    if len(text) <= limit:
        return text
    cut = text.rfind(",", 0, max(limit - 2, 1))
    return (text[:cut] if cut > 0 else text[: max(limit - 2, 1)]) + ",…"


def _join_kept(labels: List[str], kept: List[int]) -> str:
    parts: List[str] = []
    prev = -1
    for i in kept:
        if i > prev + 1:
            parts.append("… %d frame%s …" % (i - prev - 1, "s" if i - prev - 1 != 1 else ""))
        parts.append(labels[i])
        prev = i
    if prev < len(labels) - 1:
        parts.append("… %d frames …" % (len(labels) - 1 - prev))
    return " > ".join(parts)


def _fit_chain(labels: List[str], python: List[bool], room: int) -> str:
    """``a > b > c`` in ``room`` characters.  A chain too long for the line keeps its outermost
    frame (where it came from), its innermost (where it is), then its Python frames innermost
    first (the user's code), then native frames from the inside out; every gap becomes
    ``… N frames …``."""
    full = " > ".join(labels)
    if len(full) <= room:
        return full
    n = len(labels)
    order = [0, n - 1] if n > 1 else [0]
    order += [i for i in range(n - 2, 0, -1) if python[i]]
    order += [i for i in range(n - 2, 0, -1) if not python[i]]
    kept: List[int] = []
    for i in order:
        cand = sorted(kept + [i])
        if len(kept) < 2 or len(_join_kept(labels, cand)) <= room:
            kept = cand
        if len(kept) >= 2 and len(_join_kept(labels, kept)) > room:
            break
    text = _join_kept(labels, kept)
    if len(text) > room:  # even the two ends do not fit: shorten them (never the gap marker)
        each = max((room - 20) // max(len(kept), 1), 8)
        short = list(labels)
        for i in kept:
            short[i] = clean_label(labels[i], each)
        text = _join_kept(short, kept)
        if len(text) > room:
            text = text[: max(room - 1, 0)] + "…"
    return text


class _Unit:
    """One text line: a chain of nodes with one child each and the same rank set."""

    __slots__ = ("nodes", "depth", "children", "parent", "order", "chosen", "open_kids")

    def __init__(self, node: dict, depth: int, parent: Optional[_Unit], order: int) -> None:
        nodes = [node]
        while len(node["children"]) == 1 and node["children"][0].get("ranks") == node.get("ranks") \
                and "elided" not in node["children"][0]:
            node = node["children"][0]
            nodes.append(node)
        self.nodes = nodes
        self.depth = depth
        self.parent = parent
        self.order = order
        self.children: Optional[List[_Unit]] = None
        self.chosen = False
        self.open_kids = 0  # children not chosen

    @property
    def head(self) -> dict:
        return self.nodes[0]

    def kids(self, counter: List[int]) -> List[_Unit]:
        if self.children is None:
            self.children = []
            for c in self.nodes[-1]["children"]:
                counter[0] += 1
                self.children.append(_Unit(c, self.depth + 1, self, counter[0]))
            self.open_kids = len(self.children)
        return self.children


def _num(node: dict, key: str) -> int:
    v = node.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def render_tree_lines(tree: dict, max_lines: int = 200, width: int = 160) -> List[str]:
    """The tree as compact text that fits a GitHub issue, even for 4,096 ranks.

    One line per chain of nodes that share a rank set (``a > b > c``), so lines appear only where
    ranks diverge: ``[0-2,4 (4)] train_step (train.py:12) > all_reduce (…) > …wait``.  Deeper
    lines are indented two spaces per branch level.  Over ``max_lines``, lines are kept biggest
    rank set first and the rest of each branch point is one ``… N more branches (ranks …)`` line.
    ``max_lines`` below 2 counts as 2 (the root line and one "more" line).  Labels are cleaned again
    here: the tree may come from a snapshot file, not from this module."""
    max_lines = max(int(max_lines), 2)
    width = max(int(width), 40)
    counter = [0]
    root = _Unit(tree, 0, None, 0)
    root.chosen = True
    lines_used = 1
    heap: List[Tuple[int, int, int, _Unit]] = []

    def offer(u: _Unit) -> None:
        for k in u.kids(counter):
            heapq.heappush(heap, (-_num(k.head, "count"), -_num(k.head, "threads"), k.order, k))

    offer(root)
    if root.open_kids:
        lines_used += 1  # the "more branches" line while none of root's children is shown
    while heap:
        _, _, _, u = heap[0]
        parent = u.parent
        assert parent is not None
        u.kids(counter)
        delta = 1 - (1 if parent.open_kids == 1 else 0) + (1 if u.open_kids else 0)
        if lines_used + delta > max_lines:
            break
        heapq.heappop(heap)
        u.chosen = True
        parent.open_kids -= 1
        lines_used += delta
        offer(u)

    out: List[str] = []
    todo: List[Tuple[str, object]] = [("unit", root)]
    while todo:
        what, item = todo.pop()
        if what == "more":
            out.append(item)  # type: ignore[arg-type]
            continue
        u = item  # type: ignore[assignment]
        assert isinstance(u, _Unit)
        indent = "  " * min(u.depth, 24)
        head = u.head
        count, threads = _num(head, "count"), _num(head, "threads")
        tag = "%d" % count if threads in (0, count) else "%d, %d thr" % (count, threads)
        ranks = _short_ranks(clean_label(str(head.get("ranks", "")), 10 ** 6), max(width // 3, 12))
        prefix = "%s[%s (%s)] " % (indent, ranks, tag)
        labels = [clean_label(str(n.get("label", "?"))) for n in u.nodes]
        python = [n.get("kind") == "python" for n in u.nodes]
        out.append(prefix + _fit_chain(labels, python, max(width - len(prefix), 20)))
        kids = u.children or []
        shown = [k for k in kids if k.chosen]
        hidden = [k for k in kids if not k.chosen]
        later: List[Tuple[str, object]] = [("unit", k) for k in shown]
        if hidden:
            keys: set = set()
            for k in hidden:
                try:
                    keys.update(expand_ranks(str(k.head.get("ranks", ""))))
                except ValueError:
                    pass
            text = "%s… %d more branch%s (ranks %s)" % (
                "  " * min(u.depth + 1, 24), len(hidden), "es" if len(hidden) != 1 else "",
                _short_ranks(compress_ranks(keys), max(width // 2, 12)))
            later.append(("more", text[:width]))
        todo.extend(reversed(later))
    return out


# ----------------------------------------------------------------------------- where ranks diverge

#: Divergence points shown on a job's first screen (biggest first), and lines per branch under one.
MAX_DIVERGENCES = 6
BRANCH_LINES = 12


class Divergence:
    """A node of the merged tree whose children do not all hold its ranks: where ranks part ways.
    ``trunk`` is the path of nodes from below the root down to it (the frames all its ranks share)."""

    __slots__ = ("node", "trunk", "branches")

    def __init__(self, node: dict, trunk: List[dict]) -> None:
        self.node = node
        self.trunk = trunk
        #: The children that do not hold every rank of the node: the ways the ranks part.  The
        #: others go on as common trunk (walked further) or are folded.
        self.branches = [c for c in _kids(node) if c.get("ranks") != node.get("ranks")]

    @property
    def ranks(self) -> str:
        return clean_label(str(self.node.get("ranks", "")), 10 ** 6)


def _kids(node: dict) -> List[dict]:
    kids = node.get("children")
    return [c for c in kids if isinstance(c, dict)] if isinstance(kids, list) else []


def _splits(node: dict) -> bool:
    return any(c.get("ranks") != node.get("ranks") for c in _kids(node))


def _has_python(node: dict) -> bool:
    todo = [node]
    while todo:
        n = todo.pop()
        if n.get("kind") == "python":
            return True
        todo.extend(_kids(n))
    return False


class Divergences:
    """Every outermost divergence point of a tree, the branches where all ranks agree (folded), and
    the nodes an HTML tree opens (the paths down to the divergence points)."""

    def __init__(self, points: List[Divergence], same_branches: int, open_nodes: set) -> None:
        self.points = points
        self.same_branches = same_branches
        self.open_nodes = open_nodes

    def lines(self, width: int = 160) -> List[str]:
        """Text: per divergence point one ``N common frames`` line (the trunk elided to its
        innermost frame), then its branches as the compact tree, then one line for what is folded."""
        out: List[str] = []
        for d in self.points[:MAX_DIVERGENCES]:
            n = len(d.trunk)
            inner = clean_label(str(d.trunk[-1].get("label", "?"))) if d.trunk else ""
            count = _num(d.node, "count")
            if n:
                out.append("[%s (%d)] %d common frame%s, down to %s" % (
                    _short_ranks(d.ranks, max(width // 3, 12)), count, n, "s" * (n != 1), inner))
            else:
                out.append("[%s (%d)] no common frame" % (_short_ranks(d.ranks, max(width // 3, 12)), count))
            for b in d.branches:
                out.extend("  " + line for line in render_tree_lines(b, BRANCH_LINES, width - 2))
        if len(self.points) > MAX_DIVERGENCES:
            out.append("… %d more points where ranks diverge (the merged call tree has them)"
                       % (len(self.points) - MAX_DIVERGENCES))
        if self.same_branches:
            out.append("(%d branch%s where every rank is in the same place folded: the merged call tree has them)"
                       % (self.same_branches, "es" * (self.same_branches != 1)))
        return out


def divergences(tree: dict) -> Divergences:
    """The outermost points where the ranks of ``tree`` diverge, user code (Python frames) first,
    then by rank count.  Walked without recursion (the tree may come from a snapshot file)."""
    below: Dict[int, bool] = {}  # id(node) -> a divergence at or below it
    order: List[dict] = []
    todo = [tree]
    while todo:  # pre-order, then reversed: children before parents
        n = todo.pop()
        order.append(n)
        todo.extend(_kids(n))
    for n in reversed(order):
        below[id(n)] = _splits(n) or any(below[id(c)] for c in _kids(n))
    points: List[Divergence] = []
    same = 0
    opened = {id(tree)}
    walk: List[Tuple[dict, List[dict]]] = [(tree, [])]
    while walk:
        node, path = walk.pop()
        trunk = path + [node] if node is not tree else []
        kids = _kids(node)
        if _splits(node):
            points.append(Divergence(node, trunk))
            opened.update(id(x) for x in trunk)
            kids = [c for c in kids if c.get("ranks") == node.get("ranks")]
        for c in reversed(kids):
            if below[id(c)]:
                walk.append((c, trunk))
            else:
                same += 1
    points.sort(key=lambda d: (not _has_python(d.node), -_num(d.node, "count"), -_num(d.node, "threads")))
    return Divergences(points, same, opened)
