"""oslo.reports' Guru Meditation report (OpenStack services: nova, neutron, cinder... on SIGUSR2 or
SIGUSR1): its "Threads" and "Green Threads" sections, one block per thread, outermost call first.

::

    ====                         Green Threads                          ====
    ------                        Green Thread                        ------    -> a thread (green)
    ------                Thread #140146582210304                ------        -> a thread, its id

    /usr/lib/python3.8/threading.py:890 in _bootstrap                          -> a frame
        `self._bootstrap_inner()`                                                 its source line

Frames are reversed to innermost first; the backticked line under a frame is its source (what
``analyze/sourcewait.py`` reads the wait from).  The report's other sections (package, config,
processes) are messages.  Only a section or thread banner, or a ``path.py:N in func`` line followed by
a backticked line, makes a text this format.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Process, Thread

from .common import cap_messages, python_frame, to_int

NAME = "guru-meditation"

_SECTION = re.compile(r"^={4,}\s{1,80}(Green Threads|Threads)\s{1,80}={4,}$")
_BANNER = re.compile(r"^-{4,}\s{1,80}(Green Thread|Thread #?(\d{1,20}))\s{1,80}-{4,}$")
_FRAME = re.compile(r"^((?:[A-Za-z]:)?[^\s:]{1,400}\.py):(\d{1,9}) in ([\w.<>-]{1,200})$")
_SOURCE = re.compile(r"^\s{2,16}`(.{0,1000})`$")


def score(lines: List[str]) -> float:
    banners = framed = 0
    for i, line in enumerate(lines):
        s = line.strip()
        if (s.startswith("====") and _SECTION.match(s)) or (s.startswith("----") and _BANNER.match(s)):
            banners += 1
        elif _FRAME.match(s) and i + 1 < len(lines) and _SOURCE.match(lines[i + 1]):
            framed += 1
    if banners == 0 and framed < 2:
        return 0.0
    return 5.0 * banners + 2.0 * framed


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    green = False
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _SECTION.match(s) if s.startswith("====") else None
        if m:
            green = m.group(1) == "Green Threads"
            cur = None
            continue
        m = _BANNER.match(s) if s.startswith("----") else None
        if m:
            cur = Thread(tid=to_int(m.group(2)) if m.group(2) else None, merge="python-only")
            cur.name = "green thread" if green or m.group(1) == "Green Thread" else None
            threads.append(cur)
            continue
        m = _FRAME.match(s)
        if m:
            if cur is None:
                cur = Thread(merge="python-only")
                cur.notes.append("the thread header is not in the text (the paste starts inside its frames)")
                threads.append(cur)
            cur.frames.append(python_frame(m.group(3), m.group(1), to_int(m.group(2))))
            continue
        m = _SOURCE.match(line)
        if m and cur is not None and cur.frames:
            cur.frames[-1].source = m.group(1).strip()
            continue
        if s.startswith("===="):
            continue  # a section's rule
        messages.append(s)
    for t in threads:
        t.frames.reverse()  # the report prints the outermost call first
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
