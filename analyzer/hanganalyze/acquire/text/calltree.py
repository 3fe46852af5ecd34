"""A call chain written by hand as an indented staircase, outermost call first: how an issue's author
abridges a native backtrace into the calls that matter (one frame a line, each line indented one step
further than its caller).

::

    _dl_open  (import torch -> dlopen _C.cpython-312-...so)   -> a frame; a parenthesised note
     _dl_init -> call_init                     # running ctors   -> two frames ("A -> B": A calls B)
      _GLOBAL__sub_I_numa_wrapper.cpp        (libtorch_rocshmem.so)  -> its library in parentheses
       __GI_exit (status=1)                    # <-- ctor calls exit()   -> arguments, a comment
        std::thread::join()                    # <-- HANGS forever       -> the innermost frame

No tool prints this, so what makes it one: at least ``MIN_STEPS`` consecutive lines, each indented
further than the line before (by at most ``MAX_STEP`` columns), each starting with a C / C++ symbol
(``name``, ``ns::name()``, ``name (args)``) and nothing else but a library in parentheses, a note in
parentheses after two spaces, or a ``#`` / ``//`` comment.  Code (``if x:``, ``f(a, b);``), YAML and
prose do not climb like that with a bare symbol at the head of every line.  Each staircase is one
thread, its frames reversed (innermost first, as every parser gives them); the comments and every
other line are messages.  Not looked for in another format's leftovers: a staircase is a whole paste.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, indent_of, split_call

NAME = "call-chain"

#: Fewer stair lines than this are no call chain (two nested lines of prose or code).
MIN_STEPS = 5
#: The most columns a line may be indented beyond its caller's line.
MAX_STEP = 8
#: A symbol: C identifiers joined by ``::`` (``~`` for destructors, ``.`` for GCC's
#: ``_GLOBAL__sub_I_file.cpp`` constructors and clone suffixes), optionally its template arguments.
_PART = r"~?[A-Za-z_][\w.]{0,200}(?:<[^<>]{0,200}>)?"
_SYMBOL = re.compile(r"^%s(?:::%s){0,20}$" % (_PART, _PART))
#: A trailing ``# comment`` or ``// comment`` (after at least one space).
_COMMENT = re.compile(r"\s{1,400}(?:#|//)(?:\s.{0,4000})?$")
#: ``  (libfoo.so)`` / ``  (libfoo.so.1)`` / ``(foo.dll)``: the frame's library, last on the line.
_LIBRARY = re.compile(r"^(.{0,4000}?)\s{1,400}\(([\w.+-]{1,200}\.(?:so(?:\.\d{1,6}){0,4}|dll|dylib))\)$")
#: ``  (a note with spaces)`` after two spaces: the author's note, not part of the frame.
_NOTE = re.compile(r"^(.{0,4000}?)\s{2,400}\(([^()]{1,500})\)$")


def _frames(body: str) -> Optional[Tuple[List[Frame], Optional[str]]]:
    """The frames of one stair line, outermost first, and its comment; None when the line does not
    start with a bare symbol (then it is no stair)."""
    comment = None
    m = _COMMENT.search(body)
    if m:
        comment = body[m.start():].strip().lstrip("#/").strip() or None
        body = body[:m.start()]
    body = body.rstrip()
    library = None
    m = _LIBRARY.match(body)
    if m:
        body, library = m.group(1).rstrip(), m.group(2)
    else:
        m = _NOTE.match(body)
        if m:
            body = m.group(1).rstrip()
    frames: List[Frame] = []
    for part in body.split(" -> "):
        name, _args = split_call(part.strip())
        if name.endswith("()"):
            name = name[:-2]
        if not _SYMBOL.match(name):
            return None
        frames.append(Frame(kind="native", function=name))
    if library is not None:
        frames[-1].library = library
    return frames, comment


def _stairs(lines: List[str]) -> List[Tuple[int, int]]:
    """(start, end) line ranges of every staircase of at least MIN_STEPS lines."""
    runs: List[Tuple[int, int]] = []
    start = None
    prev_indent = -1
    for i, line in enumerate(lines + [""]):
        ok = bool(line.strip()) and _frames(line.strip()) is not None
        ind = indent_of(line)
        if ok and start is not None and prev_indent < ind <= prev_indent + MAX_STEP:
            prev_indent = ind
            continue
        if start is not None and i - start >= MIN_STEPS:
            runs.append((start, i))
        start, prev_indent = (i, ind) if ok else (None, -1)
    return runs


def score(lines: List[str]) -> float:
    return sum(0.5 * (end - start) for start, end in _stairs(lines))


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    runs = _stairs(lines)
    taken = set()
    for start, end in runs:
        thread = Thread()
        thread.notes.append("call chain written outermost first")
        outer_first: List[Frame] = []
        for line in lines[start:end]:
            got = _frames(line.strip())
            if got is None:
                continue
            frames, comment = got
            outer_first.extend(frames)
            if comment:
                messages.append("%s: %s" % (frames[-1].function, comment))
        thread.frames = list(reversed(outer_first))
        proc.threads.append(thread)
        taken.update(range(start, end))
    messages.extend(line.strip() for i, line in enumerate(lines) if i not in taken and line.strip())
    proc.messages.extend(cap_messages(messages, proc.notes))
