"""Renderers: turn an analyzed Snapshot into html, md, json or text.  Nothing here computes findings."""

from __future__ import annotations

import re

from hanganalyze.gdbext.model import Snapshot

#: Lone surrogates: bytes that were not UTF-8 in a core (argv, paths: decoded with surrogateescape)
#: or on stdin.  No encoder writes them, so a report holding one would fail at the last step.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _show_surrogate(m: re.Match[str]) -> str:
    """A byte that was not UTF-8 (U+DC80-U+DCFF) is shown as ``\\xNN``; any other lone surrogate
    as U+FFFD.  Both are plain characters, so this is safe after HTML/Markdown escaping."""
    c = ord(m.group(0))
    return "\\x%02x" % (c - 0xDC00) if 0xDC80 <= c <= 0xDCFF else "\ufffd"


def encodable(text: str) -> str:
    """`text` with no lone surrogate left, so that it can be written as UTF-8."""
    return _SURROGATE.sub(_show_surrogate, text)


def render(snapshot: Snapshot, fmt: str) -> str:
    if fmt == "json":
        from hanganalyze.render.jsonout import render_json

        return render_json(snapshot)  # ASCII: json escapes surrogates as \udcNN
    if fmt == "text":
        from hanganalyze.render.text import render_text

        return encodable(render_text(snapshot))
    if fmt == "md":
        from hanganalyze.render.markdown import render_markdown

        return encodable(render_markdown(snapshot))
    if fmt == "html":
        from hanganalyze.render.html import render_html

        return encodable(render_html(snapshot))
    raise ValueError("unknown format %r" % fmt)
