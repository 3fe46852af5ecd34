"""PLACEHOLDER (owned by the reports work): HTML report."""

from __future__ import annotations

import html

from hanganalyze.render.text import render_text


def render_html(snapshot):
    return "<!doctype html><meta charset=utf-8><pre>%s</pre>" % html.escape(render_text(snapshot))
