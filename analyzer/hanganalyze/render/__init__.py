"""Renderers: turn an analyzed Snapshot into html, md, json or text.  Nothing here computes findings."""

from __future__ import annotations

from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.termsafe import encodable


def render(snapshot: Snapshot, fmt: str) -> str:
    if fmt == "json":
        from hanganalyze.render.jsonout import render_json  # here: only the format asked for

        return render_json(snapshot)  # ASCII: json escapes surrogates as \udcNN
    if fmt == "text":
        from hanganalyze.render.text import render_text  # here: only the format asked for

        return encodable(render_text(snapshot))
    if fmt == "md":
        from hanganalyze.render.markdown import render_markdown  # here: only the format asked for

        return encodable(render_markdown(snapshot))
    if fmt == "html":
        from hanganalyze.render.html import render_html  # here: only the format asked for (jinja2)

        return encodable(render_html(snapshot))
    if fmt == "node":  # a node summary, mergeable (acquire/nodesummary.py reads it)
        from hanganalyze.render.node import render_node  # here: only the format asked for

        return render_node(snapshot)
    raise ValueError("unknown format %r" % fmt)
