"""Reports of hostile or doubtful snapshots: undecodable bytes, invisible characters, and warnings
that put the stacks in doubt (shown at the top, not only in the notes at the bottom)."""

from __future__ import annotations

import os
import re

import pytest

from hanganalyze.render import encodable, render
from hanganalyze.render.text import clean
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

UNDECODABLE = os.fsdecode(b"app-\xff\xfe")  # bytes that were not UTF-8 in the core (surrogateescape)
HIDDEN = "a\u202eb\u200bc\x1b[2Jd\x07e"
DOUBT = "executable /opt/app has build-id aa but the core ran build-id bb: stacks may be wrong"


def snapshot(**kw) -> Snapshot:
    t = Thread(tid=7, name=HIDDEN, frames=[Frame(kind="native", function="f" + UNDECODABLE, library="/lib/x.so")])
    p = Process(source="core", pid=7, executable="/opt/" + UNDECODABLE, argv=[UNDECODABLE, HIDDEN], threads=[t])
    return Snapshot(processes=[p], **kw)


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_undecodable_bytes_render_and_encode(fmt):
    out = render(snapshot(), fmt)
    out.encode("utf-8")  # strict: this is what writing the report does
    if fmt != "json":
        assert "app-\\xff\\xfe" in out


def test_encodable_maps_other_lone_surrogates_to_replacement_char():
    assert encodable("x\ud800y\udcffz") == "x\ufffdy\\xffz"


def test_text_shows_invisible_and_control_characters():
    out = render(snapshot(), "text")
    assert "a\\u202eb\\u200bc\\x1b[2Jd\\x07e" in out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069]", out)
    assert clean("\u2066x\u2069") == "\\u2066x\\u2069"


def test_html_shows_invisible_and_control_characters():
    out = render(snapshot(), "html")
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "a\\u202eb\\u200bc\\x1b[2Jd\\x07e" in out


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_doubt_warnings_come_first(fmt):
    snap = snapshot(warnings=[DOUBT, "an ordinary note"])
    out = render(snap, fmt)
    first = out.find("stacks may be wrong")
    assert 0 <= first < out.find("Thread 7")  # before any stack
    assert out.count("stacks may be wrong") == 2  # at the top and in the notes
    assert out.count("an ordinary note") == 1  # only in the notes


def test_no_doubt_no_warning_line():
    out = render(snapshot(warnings=["core written by gdb (gcore) of a running process"]), "text")
    assert "WARNING:" not in out
