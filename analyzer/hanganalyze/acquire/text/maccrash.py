"""macOS crash reports (ReportCrash's ``.crash`` / ``.ips`` "Translated Report", what the Console
and Python's ``Problem Report`` window show; the sample/spindump text of a hang has the same frame
lines).

::

    Process:               Python [45370]                    -> pid
    Exception Type:        EXC_CRASH (SIGABRT)               -> Process.signal (the name in brackets)
    Crashed Thread:        0  Dispatch queue: com.apple.main-thread
    Thread 0 Crashed::  Dispatch queue: com.apple.main-thread -> a thread, current (it took the signal)
    0   libsystem_kernel.dylib        	0x19df595d0 __pthread_kill + 8      -> function, library, address
    3   Python                        	0x1049c6f1c take_gil + 120 (ceval_gil.c:331)   -> file, line
    Thread 1:: python3.13 worker                            -> a thread, its name
    9   ???                           	0x000000000 0 + 0      -> a frame without symbol

Frames are innermost first, as the report prints them.  The header's fields and the "Application
Specific Information" lines (``abort() called``, an objc fork-safety message) are messages: a
report cut before its first thread still says the process crashed and why.  Nothing else in a
report is read (binary images, registers).
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "macos-crash"

#: ``Process:  Python [45370]`` and the other fields only a crash report's header has.
_PROCESS = re.compile(r"^Process:\s+.{1,200}? \[(\d{1,10})\]\s*$")
_HEADER = re.compile(r"^(Crashed Thread|Exception Type|Exception Codes|Termination Reason|Report Version|"
                     r"Code Type|Responsible|Parent Process|Anonymous UUID|OS Version):\s")
_SIGNAL = re.compile(r"^Exception Type:\s+\w+\s+\((SIG[A-Z]{2,6})\)")
#: ``Thread 0 Crashed::  Dispatch queue: ...`` / ``Thread 3:`` / ``Thread 1:: name``
_THREAD = re.compile(r"^Thread (\d{1,6})( Crashed)?:{1,2}\s*(.{0,200})$")
#: ``0   libsystem_kernel.dylib   0x19df595d0 __pthread_kill + 8 (file.c:12)``
#: (an address of 6+ hex digits, as every report prints them: a numbered list with a small hex
#: number is no frame)
_FRAME = re.compile(r"^(\d{1,4})\s+(\S.{0,200}?)\s+(0x[0-9a-fA-F]{6,16})\s+(.{1,4000}?)"
                    r"(?: \+ \d{1,12})?(?: \(([^():]{1,500}):(\d{1,9})\))?\s*$")


def score(lines: List[str]) -> float:
    header = frames = threads = 0
    for line in lines:
        s = line.strip()
        if _HEADER.match(s) or _PROCESS.match(s):
            header += 1
        elif s.startswith("Thread ") and _THREAD.match(s):
            threads += 1
        elif s[:1].isdigit() and _FRAME.match(s):
            frames += 1
    if header < 2 and threads == 0:
        return 0.0
    if header < 2 and frames < 2:
        return 0.0
    return 3.0 * header + 4.0 * threads + (1.5 * frames if threads or header >= 2 else 0.0)


def _frame(m: re.Match[str]) -> Frame:
    lib, func = m.group(2).strip(), m.group(4).strip()
    if func.startswith("0x") or func == "0" or lib == "???":
        name: Optional[str] = None
    else:
        name = func
    return Frame(kind="native", function=name, library=None if lib == "???" else lib,
                 address=to_int(m.group(3), 16), file=m.group(5), line=to_int(m.group(6)))


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _THREAD.match(s) if s.startswith("Thread ") else None
        if m and "State" not in s:  # "Thread 0 crashed with ARM Thread State" heads registers
            cur = Thread(current=bool(m.group(2)))
            rest = m.group(3).strip()
            if rest and not rest.startswith("Dispatch queue:"):
                cur.name = rest
            cur.notes.append("macOS crash report thread %s" % m.group(1))
            threads.append(cur)
            continue
        fm = _FRAME.match(s) if cur is not None and s[:1].isdigit() else None
        if fm:
            assert cur is not None
            cur.frames.append(_frame(fm))
            continue
        if s.startswith("Binary Images:"):
            break
        pm = _PROCESS.match(s)
        if pm:
            proc.pid = proc.pid or to_int(pm.group(1))
        sm = _SIGNAL.match(s)
        if sm:
            proc.signal = proc.signal or sm.group(1)
        cur = None  # a thread's frames end at the first other line
        messages.append(s)
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
