"""Renderers: turn an analysed Snapshot into html, md, json or text.  Nothing here computes findings."""

from __future__ import annotations

from hanganalyze.gdbext.model import Snapshot


def render(snapshot: Snapshot, fmt: str) -> str:
    if fmt == "json":
        from hanganalyze.render.jsonout import render_json

        return render_json(snapshot)
    if fmt == "text":
        from hanganalyze.render.text import render_text

        return render_text(snapshot)
    if fmt == "md":
        from hanganalyze.render.markdown import render_markdown

        return render_markdown(snapshot)
    if fmt == "html":
        from hanganalyze.render.html import render_html

        return render_html(snapshot)
    raise ValueError("unknown format %r" % fmt)
