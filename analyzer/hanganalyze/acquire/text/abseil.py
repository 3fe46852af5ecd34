"""abseil's stack reports: the ``absl::Mutex`` deadlock detector, and the same ``@ pc symbol``
frames under glog's / abseil's failure handlers.

::

    [mutex.cc : 1359] RAW: Potential Mutex deadlock:          -> a message; the thread below is
            @ 0x7f9786a4bc6f absl::DebugOnlyDeadlockCheck()       the one that detected it
            @ 0x7f9786a4b67f absl::Mutex::Lock()              -> function, address
            @ 00007FFF10C00260                                -> function None (Windows: no 0x)
    [mutex.cc : 1438] RAW: Acquiring absl::Mutex 0x.. while holding 0x..; a cycle in the
                           historical lock ordering graph has been observed
    [mutex.cc : 1453] RAW: mutex@0x7f939834bb70 stack:        -> a thread: where that mutex was
            @ 0x564f4ce62fe5 ...                                 acquired (lock-order graph)
    *** Check failure stack trace: ***  /  *** SIGSEGV received at time=... ***   (glog / absl)
    PC: @ 0x55d3c1 (unknown) foo()                            -> first frame of that thread

Frames are innermost first, as abseil prints them.  A logger's prefix before the ``@`` (ray's
``[2024-.. E 73667 73667] logging.cc:361:``) is skipped.  Each run of ``@`` lines is one stack (one
Thread here); the line above it says whose.  The stacks of a deadlock report come from the
lock-order graph and may be old: their notes say so.  ``(unknown)`` is ``function=None``.  The
same stack printed twice in a row (raw, then through a logger) is kept once.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int, unknown_function

NAME = "abseil"

#: ``@ 0x7f97..`` / ``@ 00007FFF..`` then an optional symbol (glog may print a size first).
_PC = re.compile(r"^(?:PC: )?@ +(0x[0-9a-fA-F]{1,16}|[0-9a-fA-F]{6,16})(?:\s+(.*))?$")
#: A symbolized frame with no pc (TSL / XLA's "Stack for thread NAME:" dumps of a stuck rendezvous):
#: ``@      name`` or ``@      path/file.cc:LINE name()``, two spaces or more after the ``@``.
_NO_PC = re.compile(r"^@ {2,}(?:(\S{1,300}\.(?:cc|cpp|c|h|cu|inc)):(\d{1,7}) )?"
                    r"([A-Za-z_~][\w:~<>,.*&$-]{0,400}(?:\(.{0,400}\))?(?: const)?)$")
_SIGNAL = re.compile(r"^\*\*\* (SIG[A-Z]{2,8}) received at time=")
_HEADERS = ("Potential Mutex deadlock", "RAW: mutex@", "Check failure stack trace", "received at time=",
            "] Stack for thread ")


def _at(s: str) -> int:
    """Where the ``@ pc`` (or ``PC: @ pc``) part of a line starts, after whatever prefix a logger
    put before it (``[2024-02-27 ..] logging.cc:361:``, ray's ``(pid=123)``); -1 if none."""
    if s.startswith(("@", "PC: @")):
        return 0 if s.startswith("PC: @") or _PC.match(s) or _NO_PC.match(s) else -1
    i = s.find("@ ")
    tries = 0
    while 0 < i < 300 and tries < 4:
        if s[i - 1] in " \t)":
            j = i - 4 if s[max(0, i - 4):i] == "PC: " else i
            rest = s[i + 1:].lstrip()
            if rest[:1] in "0123456789abcdefABCDEF" and rest[:1]:
                return j
        i = s.find("@ ", i + 2)
        tries += 1
    return -1


def _frame(s: str) -> Optional[Frame]:
    i = _at(s)
    if i < 0:
        return None
    s = s[i:]
    m = _PC.match(s)
    if not m:
        n = _NO_PC.match(s)
        if n is None:
            return None
        return Frame(kind="native", function=unknown_function(n.group(3).strip() or None), file=n.group(1),
                     line=int(n.group(2)) if n.group(2) else None)
    sym = (m.group(2) or "").strip()
    words = sym.split(None, 1)
    if len(words) == 2 and (words[0].isdigit() or words[0] == "(unknown)"):
        # the failure signal handler prints the frame's size first: "@ 0x7f.. 48 f()", "(unknown)"
        sym = words[1].strip()
    if sym == "(unknown)":
        sym = ""
    return Frame(kind="native", function=unknown_function(sym or None), address=to_int(m.group(1), 16))


def score(lines: List[str]) -> float:
    frames = headers = 0
    for line in lines:
        s = line.strip()
        if "@ " in s and _frame(s) is not None:
            frames += 1
        elif ("RAW:" in s or "***" in s) and any(h in s for h in _HEADERS):
            headers += 1
    if frames == 0 or (headers == 0 and frames < 2):
        return 0.0
    return 2.0 * frames + 10.0 * headers


def _whose(header: Optional[str]) -> str:
    if header is None:
        return "abseil stack (the line naming it is not in the text)"
    if "Potential Mutex deadlock" in header:
        return "abseil: the thread that detected a potential deadlock (it is acquiring a mutex)"
    i = header.find("mutex@")
    if i >= 0 and "stack" in header[i:]:
        return "abseil: where %s was acquired (from the lock-order graph; may be old)" % header[i:].split()[0]
    k = header.find("] Stack for thread ")
    if k >= 0:
        return "TSL's dump of a thread that a rendezvous waited for: %s" % header[k + 2:].rstrip(":")[:200]
    if "Check failure stack trace" in header:
        return "glog/abseil: check failure"
    k = header.find("*** SIG")
    if k >= 0 and "received at time=" in header:
        return "abseil failure signal handler: %s" % header[k + 4:].split()[0]
    return "abseil stack after: %s" % header[:200]


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    header: Optional[str] = None
    for line in lines:
        s = line.strip()
        if not s:
            continue
        f = _frame(s) if "@ " in s else None
        if f is not None:
            pc = "PC: @" in s[: _at(s) + 5]
            if cur is None or pc:
                cur = Thread(merge="native-only")
                whose = _whose(header)
                if pc and not whose.startswith("abseil failure signal handler"):
                    whose = "abseil failure signal handler (PC: the frame that got the signal)"
                cur.notes.append(whose)
                if pc or (header is not None and ("Potential Mutex deadlock" in header or "***" in header)):
                    cur.current = True  # the thread that detected the deadlock / got the signal
                threads.append(cur)
            cur.frames.append(f)
            continue
        k = s.find("*** SIG")
        m = _SIGNAL.match(s[k:]) if k >= 0 else None
        if m:
            proc.signal = proc.signal or m.group(1)
        cur = None
        header = s
        messages.append(s)
    # ray (and others) print the failure handler's report twice, raw and through their logger:
    # the same stack again is no second thread
    seen = set()
    for t in threads:
        key = tuple((f.address, f.function) for f in t.frames)
        if key in seen:
            continue
        seen.add(key)
        proc.threads.append(t)
    proc.messages.extend(cap_messages(messages, proc.notes))
