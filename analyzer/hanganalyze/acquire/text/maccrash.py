"""macOS crash reports (ReportCrash's ``.crash`` / ``.ips`` "Translated Report", what the Console
and Python's ``Problem Report`` window show).  macOS writes one only for a process that crashed (a
hang's ``sample`` / spindump text is a call tree: ``macsample.py``), so a chunk of a report with
none of its header and no thread marked "Crashed" still says the process crashed (``REPORT_NOTE``:
ReportCrash's thread headers, or its rows' tab between the image and the address, which
``backtrace_symbols()`` does not print; open rounds 27-29 had four such chunks read as waits).

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
from typing import List, Optional, Tuple

from hanganalyze.loglines import REPORT_NOTE
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, numbered_run, to_int

NAME = "macos-crash"

#: ``Process:  Python [45370]`` and the other fields only a crash report's header has.
_PROCESS = re.compile(r"^Process:\s+.{1,200}? \[(\d{1,10})\]\s*$")
_HEADER = re.compile(r"^(Crashed Thread|Exception Type|Exception Codes|Termination Reason|Report Version|"
                     r"Code Type|Responsible|Parent Process|Anonymous UUID|OS Version):\s")
_SIGNAL = re.compile(r"^Exception Type:\s+\w+\s+\((SIG[A-Z]{2,6})\)")
#: ``Thread 0 Crashed::  Dispatch queue: ...`` / ``Thread 3:`` / ``Thread 1:: name``
_THREAD = re.compile(r"^T?hread (\d{1,6})( Crashed)?:{1,2}\s*(.{0,200})$")  # (T?: a copy cut at its first character)
#: ``0   libsystem_kernel.dylib   0x19df595d0 __pthread_kill + 8 (file.c:12)``: read in pieces
#: (``_frame_parts``), not one regex, so a long line costs one pass.  The address has 6+ hex digits,
#: as every report prints them: a numbered list with a small hex number is no frame.
_ADDRESS = re.compile(r"\s(0x[0-9a-fA-F]{6,16})\s+")
_AT = re.compile(r"^([^():]{1,500}):(\d{1,9})\)$")
_OFFSET = re.compile(r" \+ \d{1,12}$")
#: Frame lines numbered 0, 1, 2, ... with no thread header: execinfo's backtrace_symbols() output.
_BARE_RUN = 3
_BARE = "backtrace_symbols() frames (no thread header)"
_CUT = "the thread header is not in the text (the paste starts inside its frames)"
#: ReportCrash pads the image name and puts a tab before the address; backtrace_symbols() (a program's
#: own crash or hang handler, NSException's call stack) separates them with spaces only.
_REPORT_ROW = re.compile(r"^\d{1,4}\s+\S[^\t]{0,200}\t\s*0x[0-9a-fA-F]{6,16}\s")


def _frame_parts(s: str) -> Optional[Tuple[str, str, str, Optional[str], Optional[str]]]:
    """(library, address, function, file, line) of a frame line, else None."""
    num, _, rest = s.partition(" ")
    if not num.isdigit() or len(num) > 4 or not rest:
        return None
    m = _ADDRESS.search(rest)
    if not m:
        return None
    lib, func = rest[: m.start()].strip(), rest[m.end():].strip()
    if not lib or len(lib) > 200 or not func:
        return None
    file = line = None
    i = func.rfind(" (")
    if i > 0 and func.endswith(")"):
        am = _AT.match(func[i + 2:])
        if am:
            file, line, func = am.group(1), am.group(2), func[:i]
    om = _OFFSET.search(func)
    if om:
        func = func[: om.start()]
    return lib, m.group(1), func, file, line


def _row(s: str) -> bool:
    """A report's frame row for sure: ``_frame_parts`` and the symbol's ``+ offset`` (or ``???``),
    what tells a row from other numbered lines with an address (gdb's ``info threads``)."""
    fp = _frame_parts(s)
    return fp is not None and (fp[0] == "???" or _OFFSET.search(s) is not None) and not fp[0].startswith("Thread")


def score(lines: List[str]) -> float:
    header = frames = threads = run = best = 0
    prev = -2
    for line in lines:
        s = line.strip()
        if _HEADER.match(s) or _PROCESS.match(s):
            header += 1
        elif s.startswith("Thread ") and _THREAD.match(s):
            threads += 1
        elif s[:1].isdigit() and _frame_parts(s) is not None:
            frames += 1
            n = int(s.split(" ", 1)[0])
            run = (run + 1 if n == prev + 1 else 1) if (n == 0 or _row(s)) else 0
            prev, best = n, max(best, run)
    if header < 2 and threads == 0:
        # backtrace_symbols() printed by the program itself (a hang detector, a crash handler), or a
        # report's thread cut above its header (a paste's later chunk): the report's frame lines,
        # numbered one after another, with no report around them
        return 1.5 * best if best >= _BARE_RUN else 0.0
    if header < 2 and frames < 2:
        return 0.0
    return 3.0 * header + 4.0 * threads + (1.5 * frames if threads or header >= 2 else 0.0)


def _frame(lib: str, address: str, func: str, file: Optional[str], line: Optional[str]) -> Frame:
    name = None if func.startswith("0x") or func == "0" or lib == "???" else func
    return Frame(kind="native", function=name, library=None if lib == "???" else lib,
                 address=to_int(address, 16), file=file, line=to_int(line))


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    report = False  # ReportCrash's own lines seen: a thread header, a row with its tab
    for i, line in enumerate(lines):
        s = line.strip()
        if not s:
            continue
        m = _THREAD.match(s) if s.startswith("Thread ") else None
        if m and "State" not in s:  # "Thread 0 crashed with ARM Thread State" heads registers
            report = True
            cur = Thread(current=bool(m.group(2)))
            rest = m.group(3).strip()
            if rest and not rest.startswith("Dispatch queue:"):
                cur.name = rest
            cur.notes.append("macOS crash report thread %s" % m.group(1))
            threads.append(cur)
            if m.group(2):  # only ReportCrash marks a thread so: the one that took the fatal exception
                messages.append(s)
            continue
        if cur is None and not threads and s[:1].isdigit() and _frame_parts(s) is not None \
                and (s.startswith("0 ") or numbered_run(lines, i, _BARE_RUN, _row)):
            if s.startswith("0 "):
                cur = Thread(current=True)  # backtrace_symbols() lines: the thread that printed them
                cur.notes.append(_BARE)
            else:  # a thread's deeper frames: the paste starts inside it
                cur = Thread()
                cur.notes.append(_CUT)
            threads.append(cur)
        fp = _frame_parts(s) if cur is not None and s[:1].isdigit() else None
        if fp is not None and cur is not None:
            cur.frames.append(_frame(*fp))
            report = report or _REPORT_ROW.match(s) is not None
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
    if threads and threads[0].notes == [_BARE] and any(t.current for t in threads[1:]):
        threads[0].current = False  # a cut report's first frames, not the printing thread
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
    if report and any(t.frames for t in threads) and REPORT_NOTE not in proc.notes:
        proc.notes.append(REPORT_NOTE)
