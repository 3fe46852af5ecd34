"""Self-contained HTML report: one file, inline CSS/JS, no network, every core string escaped.

Safety rules (the report is attached to public bug trackers and opened by strangers):

* jinja2 autoescape is on for the whole template and no core data is marked safe;
* links come only from signature references and only with http(s) schemes
  (``view.safe_url``), with ``rel="noopener noreferrer"``;
* a Content-Security-Policy meta tag forbids every network fetch, so even a bug in escaping
  cannot make the page call home;
* the one piece of pre-built markup, the wait-for SVG from ``render.waitsvg``, is parsed and
  re-serialised from a whitelist of SVG elements and attributes (no scripts, no event handlers, no
  external references) before it is inserted.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional, Tuple

import jinja2
from markupsafe import Markup

from hanganalyze.render import asynctree
from hanganalyze.render.gpuview import gpu_lines
from hanganalyze.render.rasview import ras_section
from hanganalyze.render.view import ReportView, build_view
from hanganalyze_gdbext.model import SEVERITIES, TRIAGE, Process, Snapshot
from hanganalyze_gdbext.model.termsafe import visible

#: Non-idle groups shown expanded when the page opens (the rest are one click away).
OPEN_GROUPS = 6

_SVG_NS = "http://www.w3.org/2000/svg"
SVG_TAGS = frozenset(
    {"svg", "g", "path", "line", "polyline", "polygon", "rect", "circle", "ellipse", "text", "tspan", "title",
     "desc", "defs", "marker"}
)
SVG_ATTRS = frozenset(
    {"id", "class", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry", "width", "height", "d", "points",
     "fill", "stroke", "stroke-width", "stroke-dasharray", "opacity", "fill-opacity", "stroke-opacity",
     "transform", "viewBox", "preserveAspectRatio", "font-size", "font-family", "font-weight", "text-anchor",
     "dominant-baseline", "marker-end", "marker-start", "markerWidth", "markerHeight", "refX", "refY", "orient",
     "markerUnits", "dx", "dy", "role", "aria-label", "version"}
)
_URL_REF = re.compile(r"url\(\s*#[A-Za-z0-9_.:-]+\s*\)")

_env: Optional[jinja2.Environment] = None


def _visible(value: object) -> object:
    """jinja2 ``finalize``: every ``{{ }}`` string shows the characters that are invisible or act
    on a terminal (``cat report.html``) as ``\\xNN``/``\\uNNNN``, tab and newline excepted (before
    autoescaping; the escapes are plain text).  Markup (the sanitised SVG) is left alone."""
    return visible(value, keep="\t\n") if type(value) is str else value


def environment() -> jinja2.Environment:
    """One jinja2 environment; autoescape is unconditional (not by file extension)."""
    global _env
    if _env is None:
        _env = jinja2.Environment(
            loader=jinja2.PackageLoader("hanganalyze.render", "templates"),  # a zipapp's too (issue 35)
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=_visible,
        )
    return _env


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def sanitize_svg(svg: str) -> Optional[str]:
    """Re-serialise an SVG keeping only whitelisted elements and attributes; None if unusable.

    Attribute values that reference anything (``url(...)``) must point inside the document.
    """
    if not svg or not svg.lstrip().startswith("<"):
        return None
    try:
        root = ET.fromstring(svg)
    except ET.ParseError:
        return None
    if _local(root.tag) != "svg":
        return None

    def clean(el: ET.Element) -> Optional[ET.Element]:
        tag = _local(el.tag)
        if tag not in SVG_TAGS:
            return None
        out = ET.Element(tag)
        for k, v in el.attrib.items():
            name = _local(k)
            if name not in SVG_ATTRS:
                continue
            if "url(" in v and not _URL_REF.fullmatch(v.strip()):
                continue
            out.set(name, v)
        out.text = el.text
        for child in el:
            c = clean(child)
            if c is not None:
                out.append(c)
            # keep the text that followed a dropped or kept child
            if child.tail:
                target = out[-1] if len(out) else None
                if target is not None and c is not None:
                    target.tail = child.tail
                else:
                    out.text = (out.text or "") + child.tail
        return out

    cleaned = clean(root)
    if cleaned is None:
        return None
    cleaned.set("xmlns", _SVG_NS)
    return ET.tostring(cleaned, encoding="unicode", method="xml")


def waitgraph_svg(p: Process) -> Optional[Markup]:
    """The wait-for picture from the wait-for engineer's ``render_svg``, sanitised; None if absent."""
    if not p.waitgraph:
        return None
    try:
        from hanganalyze.render.waitsvg import render_svg  # type: ignore
    except Exception:  # noqa: BLE001 - not written yet, or broken: the edge table stands in
        return None
    try:
        svg = render_svg(p.waitgraph)
    except Exception:  # noqa: BLE001
        return None
    safe = sanitize_svg(svg) if isinstance(svg, str) else None
    return Markup(safe) if safe else None


def waitgraph_edges(p: Process) -> List[Tuple[str, str, str]]:
    """Fallback picture: the graph's edges as (from, edge kind, to) rows with node labels."""
    g = p.waitgraph
    if not g:
        return []
    labels = {n.id: n.label or n.id for n in g.nodes}
    rows = []
    for e in g.edges:
        kind = str(e.kind or "")
        if e.label:
            kind += " (%s)" % e.label
        rows.append((str(labels.get(e.src, e.src)), kind, str(labels.get(e.dst, e.dst))))
    return rows


def render_view_html(view: ReportView) -> str:
    top = view.findings[0].finding.severity if view.findings else "none"
    if view.findings and (top not in SEVERITIES or top == TRIAGE):  # the triage's header shows as info
        top = "info"
    svgs: Dict[int, Optional[Markup]] = {}
    edges: Dict[int, List[Tuple[str, str, str]]] = {}
    for p in view.processes:
        svgs[p.index] = waitgraph_svg(p.process)
        edges[p.index] = waitgraph_edges(p.process)
    atrees, aloose = asyncio_trees(view)
    tpl = environment().get_template("report.html.j2")
    return tpl.render(view=view, top_severity=top, svgs=svgs, edges=edges, open_groups=OPEN_GROUPS,
                      atrees=atrees, aloose=aloose, ras=ras_section(view.snapshot),
                      gpu=gpu_lines(view.snapshot))


AsyncBlock = Tuple[str, str]  # (head line, tree text): plain text, escaped by the template


def asyncio_trees(view: ReportView) -> Tuple[Dict[str, List[AsyncBlock]], Dict[int, List[AsyncBlock]]]:
    """Each event loop's task tree (``render/asynctree.py``) under the group of the thread running
    it (keyed by the group's anchor); loops no shown thread runs, per process index."""
    under: Dict[str, List[AsyncBlock]] = {}
    loose: Dict[int, List[AsyncBlock]] = {}
    for p in view.processes:
        anchors = {t.tid: g.anchor for g in p.groups for t in g.threads if t.tid is not None}
        for tid, head, text in asynctree.loop_blocks(p.process):
            if tid is not None and tid in anchors:
                under.setdefault(anchors[tid], []).append((head, text))
            else:
                loose.setdefault(p.index, []).append((head, text))
    return under, loose


def render_html(snapshot: Snapshot) -> str:
    """The HTML report (one self-contained file)."""
    return render_view_html(build_view(snapshot))
