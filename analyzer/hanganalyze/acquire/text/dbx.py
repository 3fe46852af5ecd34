"""AIX's (and Solaris') ``dbx`` ``where``: one line per frame, innermost first, of the thread it stopped
in (a core's faulting thread, or the one a live attach selected).

::

    IOT/Abort trap in pth_signal.pthread_kill at 0x80000000001e884          -> the signal (SIGABRT)
    pth_signal.pthread_kill(??, ??) at 0x80000000001e884                   -> frame: module.function
    abort() at 0x9000000002d0f60                                               at an address
    zmq::zmq_abort(char const*)(??), line 61 in "err.cpp"                      -> frame with its source
    unnamed block in zmq_poll(??, ??, ??), line 977 in "zmq.cpp"             -> a block of the frame
                                                                                above it: the same call

A C function's name carries its object module (``pth_signal.pthread_kill``, ``raise.raise``): the
module is dropped, a C++ name is kept whole; the argument list (``??`` for each unknown value) is
the last balanced group.  ``unnamed block in F`` lines repeat their function: one frame for a run of
them.  Only a run of at least ``MIN_ROWS`` frame lines is read (a sentence with "at 0x" is none).
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze.cnames import last_group_start
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "dbx"

_AT = re.compile(r"^(?:unnamed block in )?(\S.{0,2000}?) at 0x([0-9a-fA-F]{1,16})$")
_LINE = re.compile(r'^(?:unnamed block in )?(\S.{0,2000}?), line (\d{1,9}) in "(.{1,500}?)"$')
_SIGNAL = re.compile(r"^(Segmentation fault|IOT/Abort trap|Bus error|Floating point exception|Illegal instruction)"
                     r" in \S{1,500}")
_SIGNALS = {"Segmentation fault": "SIGSEGV", "IOT/Abort trap": "SIGABRT", "Bus error": "SIGBUS",
            "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}
#: A C function's name qualified by its object module (``pth_signal.pthread_kill``, ``raise.raise``).
_MODULE_QUALIFIED = re.compile(r"^\w+\.\w+$")
#: Frame lines a text needs before it is read as a dbx stack.
MIN_ROWS = 3


def _frame(s: str) -> Optional[Frame]:
    """One frame line -> its frame (None for any other line)."""
    m = _LINE.match(s) if s.endswith('"') else _AT.match(s) if " at 0x" in s else None
    if m is None:
        return None
    call = m.group(1)
    cut = last_group_start(call)
    if cut is None or cut == 0:
        return None
    name = call[:cut].strip()
    if _MODULE_QUALIFIED.match(name):
        name = name.split(".", 1)[1]  # a C function's object module: pth_signal.pthread_kill
    if s.endswith('"'):
        return Frame(kind="native", function=name, file=m.group(3), line=to_int(m.group(2)))
    return Frame(kind="native", function=name, address=to_int(m.group(2), 16))


def score(lines: List[str]) -> float:
    rows = sum(1 for line in lines if (" at 0x" in line or line.rstrip().endswith('"'))
               and "(" in line and _frame(line.strip()) is not None)
    return 2.0 * rows if rows >= MIN_ROWS else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    t = Thread(current=True, merge="native-only")
    t.notes.append("dbx where (the thread it stopped in)")
    block = False  # the last frame came from an "unnamed block in" line
    for line in lines:
        s = line.strip()
        if not s:
            continue
        sig = _SIGNAL.match(s)
        if sig:
            proc.signal = proc.signal or _SIGNALS[sig.group(1)]
            messages.append(s)
            continue
        f = _frame(s)
        if f is not None:
            unnamed = s.startswith("unnamed block in ")
            if (unnamed or block) and t.frames and t.frames[-1].function == f.function:
                block = block and unnamed
                continue  # a block of its function and the function's own line: one call
            t.frames.append(f)
            block = unnamed
            continue
        messages.append(s)
    if t.frames:
        proc.threads.append(t)
    proc.messages.extend(cap_messages(messages, proc.notes))
