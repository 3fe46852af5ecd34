"""Rich's tracebacks (``rich.traceback``, what Lightning, Typer and many CLIs install): boxed frames.

::

    ╭───────────────────── Traceback (most recent call last) ──────────────────────╮
    │ /usr/lib/python3.10/site-packages/pytorc                                     │  (a long path wraps:
    │ h_lightning/strategies/ddp.py:204 in setup_distributed                       │   its pieces are joined)
    │                                                                              │
    │   203 │   │   assert self.cluster_environment is not None                    │
    │ ❱ 204 │   │   _init_dist_connection(self.cluster_environment, self._process_ │  -> the frame's line
    ╰──────────────────────────────────────────────────────────────────────────────╯
    DistStoreError: Timed out after 1801 seconds waiting for clients. 1/4 clients joined.

Frames are printed outermost first, as Python's; they are reversed to innermost first.  Only a
location inside a box (``│ path:N in func │``) is a frame, so a log line ``file.py:12 in main``
is not one.  The ``❱`` line is the frame's source line (sourcewait.py reads it); locals panels and
other box lines are skipped; lines outside the boxes are messages (the exception line).
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Process, Thread

from .common import cap_messages, python_frame, to_int

NAME = "rich"

_BAR = "│"
_HEADER = re.compile(r"^╭─+ Traceback \(most recent call last\) ─+╮$")
#: ``path:204 in setup_distributed`` (the path may hold spaces; ``<module>`` and ``<lambda>`` too)
_LOCATION = re.compile(r"^(\S.{0,600}?):(\d{1,9}) in ([\w.<>]{1,200})$")
#: ``❱ 204 │ code`` / ``  203 │ code``: a source line (the current one marked ``❱``)
_SOURCE = re.compile(r"^(❱)? ?(\d{1,9}) │(.*)$")
#: A location rich wrapped at a blank (its text wraps at words, folding only a word longer than the
#: box): ``path:1163 in`` over ``_try_get_data``, or ``path:1163`` over ``in _try_get_data``.
_HEAD = re.compile(r"^(\S.{0,600}?):(\d{1,9})( in)?$")
_TAIL = re.compile(r"^(in )?([\w.<>]{1,200})$")


def _wrapped(head: str, body: str) -> Optional[re.Match]:
    """The location a box line ``head`` starts and the next one, ``body``, ends; None if none."""
    h = _HEAD.match(head)
    t = _TAIL.match(body) if h else None
    if h is None or t is None or bool(h.group(3)) == bool(t.group(1)):
        return None
    return _LOCATION.match("%s:%s in %s" % (h.group(1), h.group(2), t.group(2)))


def _inside(line: str) -> Optional[str]:
    """The text inside a box line ``│ text │``, stripped; None for a line outside a box."""
    s = line.strip()
    if len(s) < 2 or not s.startswith(_BAR):
        return None
    s = s[1:]
    if s.endswith(_BAR):
        s = s[:-1]
    return s.strip()


def score(lines: List[str]) -> float:
    headers = frames = 0
    last = ""
    for line in lines:
        s = line.strip()
        if s.startswith("╭") and _HEADER.match(s):
            headers += 1
            continue
        body = _inside(line)
        if body and not _SOURCE.match(body) and (_LOCATION.match(body) or last and _wrapped(last, body)):
            frames += 1
        last = body or ""
    if frames == 0:
        return 0.0
    return 8.0 * headers + 3.0 * frames


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    blocks: List[Thread] = []
    cur: Optional[Thread] = None
    piece = ""  # a box line that may be the first part of a wrapped path
    body: Optional[str] = None  # the box line before (a location wrapped at its blank starts there)
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("╭") and _HEADER.match(s):
            cur = None
            piece = ""
            continue
        if s.startswith(("╭", "╰")):
            piece = ""
            continue
        head, body = body, _inside(line)
        if body is None:
            messages.append(s)
            if cur is not None and cur.frames and not any(n.startswith("exception: ") for n in cur.notes):
                cur.notes.append("exception: %s" % s)
            piece = ""
            continue
        src = _SOURCE.match(body)
        if src:
            if src.group(1) and cur is not None and cur.frames and cur.frames[-1].source is None:
                cur.frames[-1].source = src.group(3).strip("│ ")[:300] or None
            piece = ""
            continue
        m = _LOCATION.match(piece + body) if piece else None
        m = m or _LOCATION.match(body) or (_wrapped(head, body) if head else None)
        if m is not None:
            if cur is None:
                cur = Thread(merge="python-only")
                cur.notes.append("rich traceback")
                blocks.append(cur)
            cur.frames.append(python_frame(m.group(3), m.group(1), to_int(m.group(2))))
            piece = ""
            continue
        piece = body if body and " " not in body else ""
    for t in blocks:
        t.frames.reverse()  # innermost first
    proc.threads.extend(blocks)
    proc.messages.extend(cap_messages(messages, proc.notes))
