"""Fixes made after sealed rounds 91/92 were scored (not counted in their score), each on the round's
real paste and a near miss: py-spy's frames written as a table (function, then file.py:LINE), and
macOS spindump's header of an application that stopped answering."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def test_py_spy_frames_written_as_a_table_are_a_stack_innermost_first(db):
    text = real_text("sealed92/antenna-1024-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert [f.function for f in t.frames] == ["release", "reset", "__del__"]
    assert t.frames[0].file == "redis/connection.py" and t.frames[0].line == 1529
    assert text_verdict(text, db)[0].findings
    # near miss: a two-column table of words and a path without a line number is no stack
    with pytest.raises(InputError):
        parse_text("release        redis/connection.py\nreset          redis/client.py\n"
                   "__del__        redis/client.py\n")


def test_spindumps_header_of_an_unresponsive_app_is_a_known_line(db):
    text = real_text("sealed92/matplotlib-11152-1.txt")
    assert text_verdict(text, db)[0].findings
    # near miss: a spindump of another event (a CPU resource report) is no hang's line
    near = text.replace("Event:           hang", "Event:           cpu usage").replace(
        "(process was unresponsive for 134 seconds before sampling)", "")
    assert near != text
    with pytest.raises(InputError):
        parse_text(near)
