"""linememo: a long text's whole-text answers are computed once, and dropped once it is read."""

from __future__ import annotations

from hanganalyze import linememo
from hanganalyze.acquire.text import _ends, parse_text
from hanganalyze.errors import InputError


def test_a_long_texts_answer_is_computed_once_and_a_short_ones_each_time():
    calls = []

    @linememo.by_content
    def count(lines):
        calls.append(len(lines))
        return sum(1 for x in lines if "x" in x)

    long_lines = ["x %d" % i for i in range(linememo.MIN_LINES)]
    assert count(long_lines) == count(list(long_lines)) == linememo.MIN_LINES
    assert calls == [linememo.MIN_LINES]  # the same content, another list: not counted again
    short = ["x", "y"]
    count(short), count(short)
    assert calls[1:] == [2, 2]
    linememo.forget()
    count(long_lines)
    assert len(calls) == 4


def test_parse_text_keeps_no_text_after_reading_it():
    big = "\n".join("2026-01-01 12:00:00 INFO step %d done" % i for i in range(3 * linememo.MIN_LINES))
    try:
        parse_text(big)
    except InputError:
        pass
    assert linememo.stats() == {"texts": 0}


def test_a_huge_logs_ends_are_its_head_and_tail():
    lines = [str(i) for i in range(50000)]
    ends = _ends(lines)
    assert len(ends) == 20000 and ends[0] == "0" and ends[-1] == "49999" and "25000" not in ends
    assert _ends(lines[:100]) == lines[:100]
