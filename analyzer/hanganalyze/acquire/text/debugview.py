"""An IDE debugger's thread view copied as text: PyDev/Eclipse, and the same "function [file:line]"
rows other debuggers' stack views print.

::

    thread0 - pid2994_seq5                       -> a thread (its name; PyDev's pid/sequence dropped)
        wait_for_response [auth_handler.py:193]  -> a Python frame (function, file, line)
        auth_password [transport.py:1269]
    Thread-218 - pid2994_seq155
        read_all [packet.py:254]

Frames are innermost first, as the view lists them.  A row is a frame only with a Python (``.py``,
``.pyw``, ``.pyx``) file and a line number in the brackets, so prose with a bracketed note is no
frame; a thread line is any other line with frames indented under it.  Rows before any thread line
(a paste cut at the top) form a thread of their own.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Process, Thread

from .common import cap_messages, indent_of, python_frame, to_int

NAME = "debugger-view"

#: ``wait_for_response [auth_handler.py:193]`` (``<module>``, dotted and dunder names too)
_FRAME = re.compile(r"^([\w<>.]{1,300}) \[([^\[\]]{1,500}?\.py[wx]?):(\d{1,9})\]$")
#: PyDev's ``name - pid2994_seq5`` thread line: the suffix is dropped from the name.
_PYDEV_SUFFIX = re.compile(r"\s+-\s+pid\d{1,10}_seq\d{1,10}$")
#: Fewer frame rows than this are no stack view (a log line that happens to look like one).
MIN_FRAMES = 3


def score(lines: List[str]) -> float:
    frames = sum(1 for x in lines if x.rstrip().endswith("]") and _FRAME.match(x.strip()))
    return 1.5 * frames if frames >= MIN_FRAMES else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    pending: Optional[str] = None  # the last non-frame line: the next frames' thread name
    pending_indent = 0
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _FRAME.match(s)
        if m:
            if cur is None or (pending is not None and indent_of(line) > pending_indent):
                cur = Thread(name=_PYDEV_SUFFIX.sub("", pending) if pending else None)
                cur.notes.append("debugger thread view")
                threads.append(cur)
                if pending is not None and messages and messages[-1] == pending:
                    messages.pop()
            pending = None
            cur.frames.append(python_frame(m.group(1), m.group(2), to_int(m.group(3))))
            continue
        pending, pending_indent = s, indent_of(line)
        messages.append(s)
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
