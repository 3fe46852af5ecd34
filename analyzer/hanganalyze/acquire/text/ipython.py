"""IPython / Jupyter tracebacks (ultratb), old and new style, ANSI colours already stripped.

::

    KeyboardInterrupt                         Traceback (most recent call last)   -> a block starts
    ~/lib/python3.5/threading.py in wait(self, timeout)        (IPython < 8: PATH in FUNC(ARGS))
        292             if timeout is None:
    --> 293                 waiter.acquire()                   -> the frame's line
    Cell In[3], line 4                                         (IPython >= 8: a notebook cell)
    ----> 4     time.sleep(1)
    File ~/pydevd.py:2188, in PyDB.do_wait_suspend(self, thread)   (IPython >= 8: FILE:LINE, in FUNC)
    Input In [3], in <cell line: 5>()                          (IPython 8.0-8.4)
    KeyboardInterrupt:                                         -> exception note and message

Each block is one Thread, its frames reversed to innermost first (IPython prints the outermost
call first, as Python does).  A cell is a frame of function ``<cell>`` in file ``Cell In[N]``,
so reports can tell notebook code from library code.  Other lines are messages.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, python_frame, to_int

NAME = "ipython"

#: ``KeyboardInterrupt                         Traceback (most recent call last)``
_HEADER = re.compile(r"^([A-Za-z_][\w.]{0,200})\s{2,}Traceback \(most recent call last\)$")
#: IPython < 8: ``PATH in FUNC(ARGS)`` / ``<ipython-input-3-ab12> in <module>()``.
_OLD = re.compile(r"^((?:~|/|[A-Za-z]:\\|\.{1,2}/|<)[^\s]{0,400}?(?:\.pyx?|>)) in ([\w.<>]{1,200}|<cell line: \d{1,9}>)"
                  r"(\(.{0,2000}\))?$")
#: IPython >= 8: ``File PATH:LINE, in FUNC(ARGS)`` (PATH may hold spaces and ``C:\``).
_NEW = re.compile(r"^File (.{1,400}?):(\d{1,9}), in ([\w.<>]{1,200}|<cell line: \d+>)(\(.{0,2000}\))?$")
#: ``Cell In[3], line 4`` / ``Input In [3], in <cell line: 5>()``
_CELL = re.compile(r"^(?:Cell In ?\[(\d{1,6})\], line (\d{1,9})|Input In ?\[(\d{1,6})\], in (.{1,200}?)(?:\(\))?)$")
#: ``---> 293     code`` / ``-> 2188`` / ``----> 4``: the line the frame is at.
_ARROW = re.compile(r"^-{1,4}> ?(\d{1,9})\b")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]{0,200}(?::.*)?$")
#: Colab links each file: ``[/usr/lib/x.py](https://localhost:8080/#) in f()``.
_LINK = re.compile(r"^\[([^\]]{1,400})\]\(https?://[^)\s]{0,400}\)")


def _frame_line(s: str) -> Optional[Frame]:
    """An old- or new-style frame header, or a cell header, as a Python frame; None otherwise."""
    if s.startswith("File "):
        m = _NEW.match(s)
        if m:
            return python_frame(m.group(3), m.group(1).strip(), to_int(m.group(2)))
        return None
    if s.startswith(("Cell In", "Input In")):
        m = _CELL.match(s)
        if m:
            if m.group(1) is not None:
                return python_frame("<cell>", "Cell In[%s]" % m.group(1), to_int(m.group(2)))
            return python_frame(m.group(4), "Input In [%s]" % m.group(3), None)
        return None
    if s[:1] == "[" and "](" in s:
        s = _LINK.sub(r"\1", s, count=1)
    if " in " in s:
        m = _OLD.match(s)
        if m:
            return python_frame(m.group(2), m.group(1), None)
    return None


def score(lines: List[str]) -> float:
    headers = frames = arrows = 0
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.endswith("(most recent call last)") and _HEADER.match(s):
            headers += 1
        elif s[:1] == "-" and _ARROW.match(s):
            arrows += 1
        elif line[:1] not in (" ", "\t") and _frame_line(s) is not None:
            frames += 1
    if frames == 0 or (arrows == 0 and headers == 0):
        return 0.0  # a frame header alone may be prose ("x.py in foo")
    return 5.0 * headers + 3.0 * frames + arrows


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    blocks: List[Thread] = []
    cur: Optional[Thread] = None
    frame: Optional[Frame] = None
    state = "log"  # "log" | "frames" | "exception"
    for line in lines:
        s = line.strip()
        if s.endswith("(most recent call last)"):
            m = _HEADER.match(s)
            if m:
                cur = Thread()
                cur.notes.append("IPython traceback (%s)" % m.group(1))
                blocks.append(cur)
                frame, state = None, "frames"
                continue
        f = _frame_line(s) if s and line[:1] not in (" ", "\t") else None
        if f is not None:
            if cur is None or state == "exception":
                cur = Thread()
                cur.notes.append("IPython traceback (its header is not in the text)")
                blocks.append(cur)
            cur.frames.append(f)
            frame, state = f, "frames"
            continue
        if state == "frames" and cur is not None:
            m = _ARROW.match(s) if s[:1] == "-" else None
            if m:
                if frame is not None and frame.line is None:
                    frame.line = to_int(m.group(1))
                if frame is not None and frame.source is None:  # the arrow's code is the frame's line
                    frame.source = s[m.end():].strip() or None
                continue
            if not s or line[:1] in (" ", "\t") or s[:1].isdigit():
                continue  # the source lines around a frame's line
            if _EXCEPTION.match(s):
                cur.notes.append("exception: %s" % s)
                messages.append(s)
                state = "exception"
                continue
        if s:
            messages.append(s)
        if state == "exception" and not s:
            state = "log"
    for t in blocks:
        t.frames.reverse()  # innermost first
        t.merge = "python-only"
    proc.threads.extend(t for t in blocks if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
