"""Hostile strings from a core stay inert text in HTML and Markdown (and do not break the layout)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from hanganalyze.render.html import render_html, sanitize_svg
from hanganalyze.render.markdown import render_markdown
from hanganalyze.render.text import render_text
from hanganalyze_gdbext.model import Evidence, Finding, Frame, Process, PythonFacts, Snapshot, Thread, Wait, WaitGraph

SCRIPT = "<script>alert(1)</script>"
EVIL = SCRIPT + " \"' {{7*7}} ``` </details> <img src=x onerror=alert(1)> [x](javascript:alert(1)) | ${7*7}"


def hostile_snapshot() -> Snapshot:
    frames = [
        Frame(kind="native", function="evil_" + EVIL + "(int)", file="/src/" + EVIL + ".c", line=7),
        Frame(kind="python", function=EVIL, file="/tmp/" + EVIL + "/x.py", line=3),
        Frame(kind="native", function="start_thread", library="/lib/" + EVIL + ".so"),
    ]
    t1 = Thread(tid=1001, name=EVIL, os_name="os" + EVIL, frames=frames,
                waits=Wait(kind="mutex", resource=EVIL, owner_tid=1002, detail=EVIL))
    t2 = Thread(tid=1002, name="plain", frames=[Frame(kind="native", function="pthread_join")])
    idle = [Thread(tid=2000 + i, name="idle", frames=[Frame(kind="native", function="epoll_wait")]) for i in range(3)]
    p = Process(source="core", pid=1002, executable="/bin/" + EVIL, argv=[EVIL, '" onmouseover="alert(1)'],
                signal="SIGABRT", python=PythonFacts(version=EVIL), threads=[t1, t2] + idle,
                notes=[EVIL], waitgraph=WaitGraph.from_dict({
                    "nodes": [{"id": "t1", "label": EVIL}, {"id": "m", "label": "m"}],
                    "edges": [{"src": "t1", "dst": "m", "kind": "waits", "label": EVIL}],
                    "cycles": [["t1", "m"]]}))
    f = Finding(signature="sig-" + EVIL, title="title " + EVIL, severity="deadlock", process=0, threads=[1001],
                summary=EVIL, fix=["fix " + EVIL], cause=EVIL,
                references=["javascript:alert(1)", "https://example.org/a\"onclick=\"x", "https://example.org/ok",
                            "data:text/html,<script>alert(1)</script>"],
                evidence=[Evidence(thread=1001, frame=1, rule=EVIL, text=EVIL)])
    return Snapshot(processes=[p], findings=[f], warnings=[EVIL])


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_keeps_core_strings_inert():
    out = render_html(hostile_snapshot())
    assert SCRIPT not in out
    assert "<img" not in out
    assert "{{7*7}}" in out  # shown literally, not evaluated
    body = re.sub(r"<style>.*?</style>", "", out, flags=re.S)
    assert "49" not in body
    p = Collect()
    p.feed(out)
    scripts = [a for t, a in p.tags if t == "script"]
    assert len(scripts) == 1 and not scripts[0]  # only our own inline script
    for tag, attrs in p.tags:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        if tag == "a":
            href = attrs.get("href", "")
            assert href.startswith("#") or href.startswith("https://"), href
            if href.startswith("https://"):
                assert attrs.get("rel") == "noopener noreferrer"
        assert tag not in ("img", "iframe", "object", "embed", "link", "base", "form")
    hrefs = [a.get("href") for t, a in p.tags if t == "a"]
    assert "https://example.org/ok" in hrefs
    assert not any(h and "javascript" in h for h in hrefs)
    assert "Content-Security-Policy" in out


def test_html_is_self_contained():
    out = render_html(hostile_snapshot())
    p = Collect()
    p.feed(out)
    for tag, attrs in p.tags:
        for k in ("src", "srcset", "action", "poster", "data"):
            assert k not in attrs, (tag, attrs)
        if tag == "link":
            raise AssertionError("external stylesheet")
    assert "@import" not in out and "url(http" not in out


def fences_and_details(md: str):
    """Walk Markdown as GitHub does: track fences; return (open fence at end, details depth, stray tags)."""
    fence = None
    depth = 0
    stray = []
    for line in md.split("\n"):
        s = line.strip()
        if fence is not None:
            m = re.match(r"^(`{3,})\s*$", s)
            if m and len(m.group(1)) >= len(fence):
                fence = None
            continue
        m = re.match(r"^(`{3,})", s)
        if m:
            fence = m.group(1)
            continue
        depth += len(re.findall(r"<details", s)) - len(re.findall(r"</details>", s))
        assert depth >= 0, line
        for tag in re.findall(r"</?([A-Za-z][\w-]*)", s):
            if tag not in ("details", "summary", "b", "i"):
                stray.append((tag, line))
    return fence, depth, stray


def test_markdown_keeps_core_strings_inert():
    out = render_markdown(hostile_snapshot())
    fence, depth, stray = fences_and_details(out)
    assert fence is None and depth == 0
    # autolinks of safe references are the only other '<...' constructs outside fences
    stray = [s for s in stray if not (s[0] == "https" and s[1].startswith("**References:** <https://"))]
    assert stray == []
    assert "<https://example.org/ok>" in out
    assert "49" not in out
    outside = re.sub(r"(?ms)^\s*(`{3,}).*?^\s*\1\s*$", "", out)
    assert SCRIPT not in outside and "<img" not in outside
    # a link needs an unescaped "[": every "[" from the core is backslash-escaped
    assert not re.search(r"(?<!\\)\[[^\]]*\]\(javascript", outside)
    assert "\\[x\\](javascript" in outside


def test_markdown_fence_longer_than_content_backticks():
    s = hostile_snapshot()
    s.processes[0].threads[0].frames[0].function = "f" + "`" * 9
    out = render_markdown(s)
    assert "`" * 10 + "text" in out
    assert fences_and_details(out)[0] is None


def test_text_escapes_terminal_controls():
    s = hostile_snapshot()
    s.processes[0].threads[0].name = "bad\x1b[2J\x07name\nsecond"
    out = render_text(s)
    assert "\x1b" not in out and "\x07" not in out
    assert "bad\\x1b[2J\\x07name\\nsecond" in out


@pytest.mark.parametrize(
    "svg,ok",
    [
        ('<svg xmlns="http://www.w3.org/2000/svg"><text x="1">a &lt;b&gt;</text></svg>', True),
        ('<svg><script>alert(1)</script><rect width="1"/></svg>', True),
        ('<svg onload="alert(1)"><a href="javascript:x"><text>t</text></a></svg>', True),
        ("<svg><foreignObject><div>x</div></foreignObject></svg>", True),
        ("not svg", False),
        ("<div>x</div>", False),
    ],
)
def test_svg_sanitizer(svg, ok):
    out = sanitize_svg(svg)
    if not ok:
        assert out is None
        return
    assert out is not None
    assert "script" not in out and "onload" not in out and "javascript" not in out and "foreignObject" not in out


# -- property tests: whatever the core says, the document structure does not change ----------------

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

core_text = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != "")


def one_thread_snapshot(value: str) -> Snapshot:
    frames = [Frame(kind="native", function=value, file="/src/" + value, line=3, library="/lib/" + value),
              Frame(kind="python", function=value, file=value, line=4)]
    t = Thread(tid=7, name=value, os_name=value, frames=frames, waits=Wait(kind="mutex", name=value, detail=value))
    p = Process(source="core", pid=7, executable="/bin/" + value, argv=[value, value], signal="SIGABRT",
                python=PythonFacts(version=value), threads=[t], notes=[value])
    f = Finding(signature="s", title=value, severity="hang", process=0, threads=[7], summary=value, fix=[value],
                cause=value, references=["https://example.org/x"], evidence=[Evidence(thread=7, frame=1, text=value)])
    return Snapshot(processes=[p], findings=[f], warnings=[value])


def tag_sequence(doc: str):
    p = Collect()
    p.feed(doc)
    return [(t, tuple(sorted(a))) for t, a in p.tags]


BASELINE_HTML = tag_sequence(render_html(one_thread_snapshot("x")))


#: Markup a core string could try to smuggle into a report (headings, rules, lists, quotes, HTML,
#: code, links, autolinks, tables, escapes, comments, fences, emphasis, images, link definitions).
MARKUP_EXAMPLES = [
    '# h',
    '---',
    '===',
    '1. x',
    '* x',
    '> q',
    '<b>x</b>',
    '`x`',
    '[a](https://b.org)',
    '| a | b |',
    '\\\\',
    '&amp;',
    '    indented',
    'x\\n# h',
    '<!--',
    ']]>',
    '~~~',
    '***',
    '_a_',
    '<https://evil.org>',
    'www.evil.org',
    'https://evil.org/x',
    'a@b.org',
    '![i](x.png)',
    '[x]: https://evil.org',
]


def with_markup_examples(test):
    """Hypothesis ``@example`` for every markup string above, on top of the generated ones."""
    for value in reversed(MARKUP_EXAMPLES):
        test = example(value)(test)
    return test


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(core_text)
@with_markup_examples
def test_html_structure_is_independent_of_core_strings(value):
    assert tag_sequence(render_html(one_thread_snapshot(value))) == BASELINE_HTML


def commonmark_tags(doc: str):
    import markdown_it

    return tag_sequence(markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(doc))


@settings(max_examples=80, deadline=None)
@given(core_text)
@with_markup_examples
def test_markdown_structure_is_independent_of_core_strings(value):
    out = render_markdown(one_thread_snapshot(value))
    fence, depth, stray = fences_and_details(out)
    assert fence is None and depth == 0
    assert [s for s in stray if s[0] != "https"] == []
    pytest.importorskip("markdown_it")
    assert commonmark_tags(out) == commonmark_tags(render_markdown(one_thread_snapshot("x")))


@settings(max_examples=80, deadline=None)
@given(core_text)
def test_text_has_no_control_characters(value):
    out = render_text(one_thread_snapshot(value))
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)


def test_markdown_through_a_commonmark_renderer_yields_only_our_tags():
    """Render the Markdown as an issue tracker would (CommonMark + raw HTML + tables): core strings
    must not produce a single element of their own."""
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")
    out = md.render(render_markdown(hostile_snapshot()))
    p = Collect()
    p.feed(out)
    allowed = {"h2", "h3", "p", "strong", "em", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "details",
               "summary", "b", "i", "pre", "code", "a", "blockquote"}
    assert {t for t, _ in p.tags} <= allowed, {t for t, _ in p.tags} - allowed
    for tag, attrs in p.tags:
        assert not any(k.startswith("on") for k in attrs)
        if tag == "a":
            assert attrs["href"] == "https://example.org/ok", attrs
    assert sum(1 for t, _ in p.tags if t == "details") == 3  # one per thread group (3 idle threads alike)
    assert SCRIPT not in out


def test_markdown_core_urls_and_emails_do_not_autolink():
    """GitHub autolinks bare URLs, www. names and e-mail addresses after resolving escapes."""
    s = hostile_snapshot()
    s.processes[0].threads[0].name = "see https://evil.org/x www.evil.org root@evil.org"
    s.findings[0].summary = "fetch http://evil.org"
    out = render_markdown(s)
    outside = re.sub(r"(?ms)^\s*(`{3,}).*?^\s*\1\s*$", "", out)  # fenced code is never linked
    outside = re.sub(r"<https://example\.org/ok>", "", outside)  # our own reference link
    readable = html.unescape(re.sub(r"\\(.)", r"\1", outside))
    assert not re.search(r"(?i)(?<![a-z0-9])(https?://|www\.)", readable), readable
    assert not re.search(r"[\w.+-]+@[A-Za-z0-9-]+\.", readable)
    assert "evil" in readable  # still shown, just not linked
