"""The wait-for graph as one inline SVG (no scripts, no external assets) and as sentences.

Layout is deterministic and simple: threads in the left column, resources in the right one,
rows ordered so that each cycle's members sit together.  ``waits`` edges run left to right,
``held_by`` edges right to left on a curve so the two directions never overlap; cycle edges
are drawn thick and red.  Every label comes from a core (untrusted), so all text is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Dict, List, Optional, Tuple

from hanganalyze_gdbext.model import Process, WaitGraph, waitgraph

ROW = 44
TOP = 48
LEFT_X = 20
RIGHT_X = 400
BOX_W = 250
BOX_H = 30
WIDTH = RIGHT_X + BOX_W + 20
MAX_LABEL = 38
#: Rows drawn per column; cycles and chains come first, the rest is counted in a note.
MAX_ROWS = 60

CYCLE_COLOR = "#c0392b"
EDGE_COLOR = "#555"


def _short(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "\u2026"


def _order(graph: WaitGraph) -> Tuple[List[str], List[str]]:
    """Thread and resource node ids in display order: cycle members first, in cycle order."""
    kinds = {n.id: n.kind for n in graph.nodes}
    threads: List[str] = []
    resources: List[str] = []

    def push(nid: str) -> None:
        bucket = threads if kinds.get(nid) == "thread" else resources
        if nid in kinds and nid not in bucket:
            bucket.append(nid)

    for seq in graph.cycles + graph.chains:
        for nid in seq:
            push(nid)
    for n in graph.nodes:
        push(n.id)
    return threads, resources


def render_svg(graph: Optional[WaitGraph]) -> str:
    """An ``<svg>`` element for the wait-for graph (empty string when there is no graph)."""
    if not graph or not graph.nodes:
        return ""
    labels = {n.id: str(n.label or n.id) for n in graph.nodes}
    threads, resources = _order(graph)
    hidden = max(0, len(threads) - MAX_ROWS)
    threads = threads[:MAX_ROWS]
    drawn = set(threads)
    linked = {e.dst for e in graph.edges if e.src in drawn}
    linked |= {e.src for e in graph.edges if e.dst in drawn}
    resources = [r for r in resources if r in linked][:MAX_ROWS]
    pos: Dict[str, Tuple[int, int]] = {}
    for i, nid in enumerate(threads):
        pos[nid] = (LEFT_X, TOP + i * ROW)
    for i, nid in enumerate(resources):
        pos[nid] = (RIGHT_X, TOP + i * ROW)
    height = TOP + max(len(threads), len(resources), 1) * ROW + (26 if hidden else 10)
    cycle_edges = set()
    for cyc in graph.cycles:
        for a, b in zip(cyc, cyc[1:] + cyc[:1]):
            cycle_edges.add((a, b))

    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" class="waitgraph" role="img" width="%d" height="%d" '
        'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (WIDTH, height, WIDTH, height),
        "<title>wait-for graph</title>",
        "<defs>",
        '<marker id="wf-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>' % EDGE_COLOR,
        '<marker id="wf-arrow-cycle" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>' % CYCLE_COLOR,
        "</defs>",
        '<text x="%d" y="14" fill="#555" font-size="11">solid: waits for \u00b7 dashed: held by \u00b7 '
        'red: deadlock cycle</text>' % LEFT_X,
        '<text x="%d" y="36" font-weight="bold">threads</text>' % LEFT_X,
        '<text x="%d" y="36" font-weight="bold">resources</text>' % RIGHT_X,
    ]
    for e in graph.edges:
        src, dst = e.src, e.dst
        if src not in pos or dst not in pos:
            continue
        on_cycle = (src, dst) in cycle_edges
        color = CYCLE_COLOR if on_cycle else EDGE_COLOR
        marker = "wf-arrow-cycle" if on_cycle else "wf-arrow"
        width = 2.5 if on_cycle else 1.2
        (sx, sy), (dx, dy) = pos[src], pos[dst]
        if e.kind == "waits":
            x1, y1 = sx + BOX_W, sy + BOX_H // 2 - 4
            x2, y2 = dx, dy + BOX_H // 2 - 4
            dash = ""
        else:
            x1, y1 = sx, sy + BOX_H // 2 + 4
            x2, y2 = dx + BOX_W, dy + BOX_H // 2 + 4
            dash = ' stroke-dasharray="5,3"'
        mx, my = (x1 + x2) // 2, (y1 + y2) // 2 + (12 if e.kind == "held_by" else -12)
        out.append(
            '<path class="wf-edge%s" d="M%d,%d Q%d,%d %d,%d" fill="none" stroke="%s" stroke-width="%s"%s '
            'marker-end="url(#%s)"><title>%s</title></path>'
            % (" wf-cycle" if on_cycle else "", x1, y1, mx, my, x2, y2, color, width, dash, marker,
               escape("%s %s %s" % (labels.get(src, src), e.label or e.kind or "", labels.get(dst, dst))))
        )
    on_cycle_nodes = {n for c in graph.cycles for n in c}
    for nid, (x, y) in sorted(pos.items(), key=lambda kv: (kv[1][0], kv[1][1])):
        is_thread = nid in threads
        stroke = CYCLE_COLOR if nid in on_cycle_nodes else "#888"
        fill = "#eef3fb" if is_thread else "#fdf6e3"
        rx = 4 if is_thread else 14
        label = labels.get(nid, nid)
        out.append(
            '<g class="wf-node wf-%s"><rect x="%d" y="%d" width="%d" height="%d" rx="%d" fill="%s" stroke="%s" '
            'stroke-width="%s"/><text x="%d" y="%d"><title>%s</title>%s</text></g>'
            % ("thread" if is_thread else "resource", x, y, BOX_W, BOX_H, rx, fill, stroke,
               2 if nid in on_cycle_nodes else 1, x + 8, y + BOX_H // 2 + 4, escape(label), escape(_short(label)))
        )
    if hidden:
        out.append('<text x="%d" y="%d" fill="#777">%d more waiting threads not drawn</text>'
                   % (LEFT_X, height - 4, hidden))
    out.append("</svg>")
    return "\n".join(out)


def describe_cycles(process: Process) -> List[str]:
    """Sentences for text/markdown renderers: each cycle ("Deadlock: thread poster (LWP 812) holds
    ledger, waits for audit; ..."), then each chain ("Blocked behind: ...")."""
    return waitgraph.describe(process)
