"""Valgrind's reports (memcheck, helgrind, drd): each error's stack, and the signal that ended the
process.

::

    ==12629== Invalid write of size 8                         -> an error: a thread of its stack
    ==12629==    at 0x1E5A33: gc_list_remove (gcmodule.c:251)   -> a frame: function, file, line
    ==12629==    by 0x8474C46: PyNode_Free (in /usr/lib/libpython3.5m.so.1.0)   -> ... or its library
    ==12629==  Address 0x202e5020 is 128 bytes inside a block of size 1,120 free'd
    ==12629==    at 0x4C2CDFB: free (vg_replace_malloc.c:530)   -> the block's history: no thread
    ==5748== Process terminating with default action of signal 11 (SIGSEGV)   -> the signal, its thread

An error's first stack is where the thread stood when it made the error (the current one when
the process then died of a signal); the stacks under "Address ... free'd", "Block was alloc'd at"
or "Uninitialised value was created" are where a block came from, so they make no thread.  The
error lines stay messages: the triage reads a memory error (an invalid read or write, an invalid
free, a jump to an invalid address) as a crash's line (``waits.yaml``), as valgrind's report of one
is what a crashing C extension's issue pastes.  Frames are innermost first, as valgrind prints them.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "valgrind"

_PREFIX = re.compile(r"^(?:==|--)(\d{1,10})(?:==|--)\s?")
_FRAME = re.compile(r"^(at|by) 0x[0-9A-Fa-f]{1,16}: (.{1,2000}?) \((?:in )?([^()]{1,1000}?)(?::(\d{1,9}))?\)$")
_TERMINATING = re.compile(r"^Process terminating with default action of signal \d{1,2} \((SIG[A-Z]{2,6})\)")
#: The lines under which a stack is a block's history, not a thread's position.
_HISTORY = re.compile(r"^(?:Address 0x[0-9A-Fa-f]+ is|Block was alloc'd at|Uninitialised value was created|"
                      r"Lock at 0x[0-9A-Fa-f]+ was first observed|Conflicting access|This conflicts with|"
                      r"Thread #\d+ was created|Required order was established)")
#: Frame rows a text needs before it is read as valgrind's.
MIN_FRAMES = 2


def _split(line: str):
    m = _PREFIX.match(line.strip())
    return (m.group(1), line.strip()[m.end():].strip()) if m else (None, None)


def score(lines: List[str]) -> float:
    n = 0
    for line in lines:
        _pid, body = _split(line)
        if body and body[:3] in ("at ", "by ") and _FRAME.match(body):
            n += 1
    return 2.0 * n if n >= MIN_FRAMES else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    history = False  # the stack under this header is a block's history
    header = ""
    for line in lines:
        pid, body = _split(line)
        if pid is None:
            if line.strip():
                messages.append(line.strip())
            continue
        proc.pid = proc.pid or to_int(pid)
        if not body:
            cur, history = None, False  # a blank valgrind line ends a report
            continue
        m = _FRAME.match(body) if body[:3] in ("at ", "by ") else None
        if m:
            if history:
                continue
            if cur is None or m.group(1) == "at":
                cur = Thread()
                cur.notes.append("valgrind: %s" % (header or "a stack")[:200])
                threads.append(cur)
            func = None if m.group(2) == "???" else m.group(2)
            where = m.group(3)
            lib = where if m.group(4) is None else None
            cur.frames.append(Frame(kind="native", function=func, library=lib,
                                    file=where if m.group(4) else None, line=to_int(m.group(4))))
            continue
        cur = None
        history = bool(_HISTORY.match(body))
        t = _TERMINATING.match(body)
        if t:
            proc.signal = proc.signal or t.group(1)
            header = body
            history = False
        elif not history:
            header = body
        messages.append(body)
    for t in threads:
        if proc.signal and any(n.startswith("valgrind: Process terminating") for n in t.notes):
            t.current = True
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
