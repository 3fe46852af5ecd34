"""pytest's own failure and interrupt reports (not pytest-timeout's thread dump: ``pytest_timeout``).

::

    !!!!!!!!!!!!!!!!!!!! KeyboardInterrupt !!!!!!!!!!!!!!!!!!!!       -> a message
    /site-packages/cheroot/server.py:2061: KeyboardInterrupt          (--tb=line, and Ctrl-C's form)

    ______________________________ test_wait ______________________________   -> a block (the test)
        def wait(self, timeout=None):                                  (--tb=long: the source, then
    >               self.not_empty.wait(remaining)                      the location line; ``def``
    E               KeyboardInterrupt                                   names the function)
    ../lib/python3.6/queue.py:173:
    _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _                         -> the next frame
    tests/test_x.py:50: in test_wait                                    (--tb=short / --tb=auto)
        q.get()

Each report block is one Thread, its frames reversed to innermost first (pytest prints the
outermost call first).  The location line is ``PATH:LINE: in FUNC`` (short), ``PATH:LINE: `` or
``PATH:LINE: EXCEPTION`` (long, line); in the long form the function is the ``def`` of the source
above it, when the paste shows it.  ``E   ...`` lines are the exception: notes and messages.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, python_frame, to_int

NAME = "pytest-tb"

#: ``path.py:50: in func`` / ``path.py:50: KeyboardInterrupt`` / ``path.py:50: `` (a Windows drive too).
_LOCATION = re.compile(
    r"^((?:[A-Za-z]:[\\/])?[^\s:<>|\"]{1,400}\.pyx?|<[\w\-. ]{1,100}>):(\d{1,9}):(?: (?:in ([\w.<>\[\]-]{1,200})"
    r"|([A-Za-z_][\w.]{0,200})(?:: .*)?)?)?$")
#: ``_____ test_name _____`` (a test's report) and ``_ _ _ _`` (between the frames of one report).
_TEST_HEADER = re.compile(r"^_{3,} (.{1,300}?) _{3,}$")
_DEF = re.compile(r"^\s*(?:async )?def (\w{1,200})\(")
_BANG = re.compile(r"^!{3,} (.{1,200}?) !{3,}$")
_EXC_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit", "Timeout", "Failed", "Failure", "Warning")


def _location(s: str) -> Optional[Tuple[Frame, Optional[str]]]:
    """A location line -> (frame, exception name or None); None for any other line, and for a
    line whose word after the colon is no exception (``x.py:12: error: ...`` is mypy's)."""
    if ".py" not in s and not s.startswith("<"):
        return None
    m = _LOCATION.match(s)
    if not m:
        return None
    exc = m.group(4)
    if exc is not None and not exc.rsplit(".", 1)[-1].endswith(_EXC_SUFFIXES):
        return None
    return python_frame(m.group(3), m.group(1), to_int(m.group(2))), exc


#: ``>       event_list = self._selector.select(timeout)``: pytest's marker of the failing line in
#: the long form's source (``>`` then the code's indentation), not a quote's ``> `` or a diff's.
_MARK = re.compile(r"^>\s{3,}\S")
#: Source lines a location-less chunk must hold around its marker to be a report's listing.
_CUT_CODE = 5


def score(lines: List[str]) -> float:
    located = excs = marks = 0
    marked = code = 0
    for line in lines:
        if _MARK.match(line):
            marked += 1
        elif line[:4] == "    " and line.strip():
            code += 1
        if not line or line[:1] in (" ", "\t"):
            continue
        s = line.rstrip()
        if s[:1] == "E" and s.startswith("E  "):
            marks += 1
        elif s[:1] == "!" and _BANG.match(s):
            marks += 3
        elif s[:1] == "_" and s.startswith("_ _ _"):
            marks += 1
        else:
            loc = _location(s)
            if loc is not None:
                located += 1
                excs += loc[1] is not None
    if located == 0:
        # a later chunk of a long report: its listing and its one failing line, the location cut
        return 0.5 if marked == 1 and code >= _CUT_CODE else 0.0
    if marks == 0 and excs == 0 and not any(_location(x.rstrip()) and " in " in x for x in lines[:2000]):
        return 0.0  # bare "x.py:12:" lines are grep's, not pytest's
    return 3.0 * located + 2.0 * excs + marks


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    blocks: List[Thread] = []
    cur: Optional[Thread] = None
    last_def: Optional[str] = None
    marked: Optional[str] = None  # the ``>`` line: the source of the location line that follows
    code = 0  # source lines seen (a report whose location lines the paste cut)
    for line in lines:
        s = line.rstrip()
        st = s.strip()
        if not st:
            continue
        m = _TEST_HEADER.match(st) if st[:1] == "_" and not st.startswith("_ _") else None
        if m:
            cur = Thread(name=m.group(1))
            cur.notes.append("pytest report of %s" % m.group(1))
            blocks.append(cur)
            last_def = None
            continue
        if st.startswith("_ _ _"):
            last_def = None
            continue
        if line[:1] not in (" ", "\t"):
            loc = _location(s)
            if loc is not None:
                frame, exc = loc
                if frame.function is None and last_def is not None:
                    frame.function = last_def
                if marked is not None:
                    frame.source, marked = marked, None
                if cur is None:
                    cur = Thread()
                    cur.notes.append("pytest report")
                    blocks.append(cur)
                cur.frames.append(frame)
                if exc is not None:
                    cur.notes.append("exception: %s" % exc)
                    messages.append(st)
                last_def = None
                continue
        d = _DEF.match(s) if last_def is None else None
        if d:
            last_def = d.group(1)  # the function the next location line is in (long form)
            continue
        if st.startswith("E  ") or st == "E":
            if cur is not None:
                cur.notes.append("exception: %s" % st[1:].strip())
            messages.append(st[1:].strip())
            continue
        b = _BANG.match(st) if st[:1] == "!" else None
        if b:
            messages.append(b.group(1))
            continue
        if _MARK.match(s):
            marked = st[1:].strip()
            continue
        if line[:1] in (" ", "\t") or st.startswith(">"):
            code += 1
            continue  # the source pytest shows around a frame
        messages.append(st)
    if not blocks and marked is not None and code >= _CUT_CODE:
        # the report's location lines are cut: its source listing and failing line are all there is
        t = Thread(merge="python-only")
        t.notes.append("pytest report, its location line cut: the failing line only")
        t.frames.append(python_frame(last_def, None, None))
        t.frames[0].source = marked
        blocks.append(t)
    for t in blocks:
        t.frames.reverse()  # innermost first
        t.merge = "python-only"
    proc.threads.extend(t for t in blocks if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
