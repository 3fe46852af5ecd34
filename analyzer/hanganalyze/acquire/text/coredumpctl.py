"""systemd-coredump's report of a process that dumped core (``coredumpctl info``, or the journal's
message): the signal, and each thread's stack as elfutils unwound it.

::

               PID: 781159 (python3)                                  -> the pid
            Signal: 11 (SEGV)                                         -> Process.signal
                    Stack trace of thread 781159:                     -> a thread (its tid); the first one
                    #0  0x00007f5b92bec42c n/a (libpython3.10.so.1.0 + 0x1ec42c)   -> a frame of a library,
                    #1  0x00007f5b92a9e37b PyObject_Call (libpython3.10.so.1.0 + 0x9e37b)   no symbol ("n/a")
                    Module libc.so.6 with build-id 60df1df31f02a7b2...  -> no frame

systemd-coredump writes the thread that took the signal first, so that thread is the current one.  A
report is written only for a process that dumped core: a fatal signal (SIGSEGV, SIGABRT, SIGBUS ...),
or SIGQUIT, which is how a hung process is made to dump one (the signal line says which, when the
paste keeps it; the journal's "dumped core" line says the same).  Every other line is a message.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze.loglines import DUMPED_CUT_NOTE, DUMPED_NOTE
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "coredumpctl"

_THREAD = re.compile(r"^Stack trace of thread (\d{1,10}):$")
_FRAME = re.compile(r"^#(\d{1,4})\s+0x([0-9a-fA-F]{1,16}) (.{1,2000}?) "
                    r"\(([^()]{1,500}?)(?: \+ 0x[0-9a-fA-F]{1,16})?\)$")
_SIGNAL = re.compile(r"^Signal: \d{1,2} \(([A-Z]{2,6})\)")
_PID = re.compile(r"^PID: (\d{1,10})\b")
_DUMPED = re.compile(r"\bof user \d{1,10} dumped core\b")
#: Frame rows (or thread headers) a text needs before it is read as this report.
MIN_ROWS = 2
#: Rows a chunk with no thread header needs (open round 43's kikit-678: frames #19-#34 of a wxPython
#: abort), and gdb's own row (``in`` before the function, or ``from`` a library), which none may hold.
MIN_CUT_ROWS = 3
_GDB_ROW = re.compile(r"^#\d{1,4}\s+(?:0x[0-9a-fA-F]{1,16} in |[\w:~<>]+ \(.*\) (?:at|from) )")


def score(lines: List[str]) -> float:
    heads = rows = 0
    for line in lines:
        s = line.strip()
        if s.startswith("Stack trace of thread ") and _THREAD.match(s):
            heads += 1
        elif s.startswith("#") and " (" in s and _FRAME.match(s) and (" n/a (" in s or " + 0x" in s
                                                                      or not _GDB_ROW.match(s)):
            rows += 1
    if heads == 0 and rows >= MIN_CUT_ROWS and not any(_GDB_ROW.match(line.strip()) for line in lines):
        return 5.0 * rows  # a chunk cut above its headers: its rows alone (gdb scores 4 a row of its own)
    # its header is systemd-coredump's own; its rows (``#0 0x.. name (lib)``) gdb reads too, and scores
    return 20.0 * heads + 3.0 * rows if heads and rows >= MIN_ROWS else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _THREAD.match(s) if s.startswith("Stack trace of thread ") else None
        if m:
            cur = Thread(tid=to_int(m.group(1)), current=not threads)
            cur.notes.append("systemd-coredump stack")
            threads.append(cur)
            continue
        f = _FRAME.match(s) if s.startswith("#") and (cur is not None or not threads) else None
        if f is not None and cur is None:  # rows above every header: a chunk cut from one thread's stack
            cur = Thread()
            cur.notes.append("systemd-coredump stack (its thread header cut)")
            threads.append(cur)
            proc.notes.append(DUMPED_CUT_NOTE)
        if f is not None and cur is not None:
            func = None if f.group(3) in ("n/a", "??") else f.group(3)
            cur.frames.append(Frame(kind="native", function=func, library=f.group(4), address=to_int(f.group(2), 16)))
            continue
        if s.startswith("Module ") and " with build-id " in s:
            continue
        sig = _SIGNAL.match(s)
        if sig:
            proc.signal = proc.signal or "SIG" + sig.group(1)
        pid = _PID.match(s)
        if pid:
            proc.pid = proc.pid or to_int(pid.group(1))
        cur = None if not s.startswith("#") else cur
        messages.append(s)
    if proc.signal in ("SIGQUIT", "SIGKILL"):  # a hung process made to dump core: its "dumped core" is no crash
        messages = [x for x in messages if not _DUMPED.search(x)]
    if proc.signal is None and threads and threads[0].current and not any(_DUMPED.search(x) for x in messages):
        proc.notes.append(DUMPED_NOTE)  # a chunk cut below the signal line: it dumped core all the same
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
