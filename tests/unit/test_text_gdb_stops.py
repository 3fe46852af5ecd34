"""gdb's stop at a breakpoint, a catchpoint or a watchpoint (``Thread 4 "python" hit Catchpoint 1
(exception thrown), 0x.. in __cxa_throw (...) at eh_throw.cc:78``): its location is the stopped
thread's frame #0.  A paste cut right below that line (pytorch-50893 without its ``bt``) held a
frame and was refused."""

from __future__ import annotations

import pytest
from helpers import real_text

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def test_a_catchpoints_stop_line_is_the_threads_frame():
    lines = real_text("pytorch/pytorch-50893-1.txt").split("\n")
    cut = "\n".join(lines[: next(i for i, x in enumerate(lines) if "hit Catchpoint" in x) + 2])
    threads = parse_text(cut).processes[0].threads
    assert [f.function for t in threads for f in t.frames] == ["__cxxabiv1::__cxa_throw"]
    assert threads[0].frames[0].address == 0x7FFFD756B072  # (its "at file:line" wrapped onto the next line)


def test_a_breakpoint_of_a_single_threaded_program():
    text = "Breakpoint 1, main (argc=1, argv=0x7fffffffe3c8) at hello.c:5\n"
    frames = parse_text(text).processes[0].threads[0].frames
    assert (frames[0].function, frames[0].line) == ("main", 5)


def test_prose_about_a_breakpoint_is_no_frame():
    with pytest.raises(InputError):
        parse_text("Breakpoint 1, then I continued and it hung (see below)\n")
