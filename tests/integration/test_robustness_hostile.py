"""Hostile data in a REAL core stays inert everywhere: reports (html, md, text, json), and the gdb
commands' terminal output.

The core is of tests/fixtures/py_hostile.py, run with hostile argv (markup, template syntax,
quotes, terminal escapes, a newline, 100 KB, bytes that are not UTF-8) whose threads and Python
functions/files carry hostile names (ESC and OSC sequences, BEL, CR, newline, U+202E, a lone
surrogate, 100 KB).  One core per module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, gcore, gdb_batch, pyenv_pythons, run_hanganalyze, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

SCRIPT = "<script>alert(1)</script>"
ARGV_EVIL = ['<script>alert("argv")</script>', "'\"{{7*7}}", "\x1b[31mRED\x1b[0m", "a\nb", "A" * 100_000,
             os.fsdecode(b"\xff\xfeinvalid")]
#: Raw terminal controls and invisible reordering characters: none may reach a terminal.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    py = pyenv_pythons().get("3.11")
    if py is None:
        pytest.skip("pyenv CPython 3.11 not installed")
    d = tmp_path_factory.mktemp("hostile")
    h = start_hung([str(py), str(FIXTURES / "py_hostile.py")] + ARGV_EVIL, settle=0.3)
    try:
        core = gcore(h.pid, d)
    finally:
        h.kill()
    return py, core


@pytest.fixture(scope="module")
def reports(hostile, tmp_path_factory):
    """Each format written with -o (the report file must be strict UTF-8)."""
    _py, core = hostile
    d = tmp_path_factory.mktemp("reports")
    out = {}
    for fmt in ("html", "md", "json", "txt"):
        path = d / ("report." + fmt)
        res = run_hanganalyze([core, "-o", path] + (["--format", "text"] if fmt == "txt" else []), timeout=300)
        assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")[-2000:]
        assert b"Traceback" not in res.stderr
        out[fmt] = path.read_bytes().decode("utf-8")  # strict: no lone surrogate got through
    return out


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_json_keeps_every_argv_string_exactly(reports):
    argv = json.loads(reports["json"])["processes"][0]["argv"]
    assert argv[2:] == ARGV_EVIL  # markup, escapes, 100 KB and undecodable bytes, unchanged


def test_html_has_no_tag_or_handler_from_the_core(reports):
    page = reports["html"]
    assert SCRIPT not in page and '<script>alert("argv")' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # shown, as text
    p = Tags()
    p.feed(page)
    assert len([t for t, _a in p.tags if t == "script"]) <= 1  # the report's own script only
    assert not [a for _t, a in p.tags if any(k.startswith("on") for k in a)]
    assert "\x1b" not in page


def test_undecodable_argv_bytes_are_shown_as_escapes(reports):
    for fmt in ("html", "txt"):
        assert "\\xff\\xfeinvalid" in reports[fmt], fmt


def test_text_report_has_no_raw_terminal_controls(reports, hostile):
    assert not RAW_CONTROL.search(reports["txt"])
    assert "\\x1b[31mRED" in reports["txt"]  # visible, not interpreted
    _py, core = hostile
    res = run_hanganalyze([core], timeout=300)  # and on stdout
    assert res.returncode in (0, 3, 5, 6)
    assert not RAW_CONTROL.search(res.stdout.decode("utf-8"))


def test_markdown_has_no_raw_controls_or_markup(reports):
    md = reports["md"]
    assert "\x1b" not in md and "\u202e" not in md
    body = re.sub(r"```.*?```", "", md, flags=re.S)  # fenced code is literal in Markdown
    assert SCRIPT not in body


def test_gdb_commands_print_no_raw_escape_from_the_inferior(hostile):
    py, core = hostile
    out = gdb_batch(["hang-bt -a", "thread 2", "bt", "hang-locks"], core=core, exe=py)
    assert "Traceback" not in out
    assert "[py]" in out and "\\x1b[31mRED" in out  # the hostile names are there, escaped
    ours = [ln for ln in out.splitlines() if "[py]" in ln or "LWP" in ln]
    assert ours
    for line in ours:
        assert not RAW_CONTROL.search(line), repr(line[:200])
