"""``pystack remote PID`` / ``pystack core CORE [EXE]`` output, with and without ``--native``.

::

    Traceback for thread 10722 (python3.11) [Has the GIL] (most recent call last):
        (C) File "./nptl/pthread_create.c", line 442, in start_thread (/usr/lib/.../libc.so.6)
        (Python) File "/work/txt_deadlock.py", line 28, in take_b_then_a
            with lock_a:                                    (source: skipped)
        (C) File "./nptl/futex-internal.c", line 57, in __futex_abstimed_wait_common64 (inlined) (libc)

pystack prints the outermost call first: frames are reversed to innermost first.  ``File "???",
line 0`` means unknown.  Core runs add "Core file information" (pid, executable, arguments) and
"The process died due receiving signal SIGx".
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, python_frame, to_int, unknown_function

NAME = "pystack"

_HEADER = re.compile(
    r"^Traceback for thread (\d{1,10})(?: \((.{0,64}?)\))?(?: \[(.{0,200}?)\])? \(most recent call last\):$"
)
_FRAME = re.compile(r'^(?:\((Python|C)\) )?File "(.*)", line (\d{1,9}), in (.+)$')
_INLINED = " (inlined)"
_LIB_TAIL = re.compile(r"^(.*) \(([^()]+)\)$")
#: ``clock_nanosleep@GLIBC_2.2.5``: the symbol version is not part of the function's name.
_SYMVER = re.compile(r"@@?[A-Z][A-Z0-9_]{0,20}_[0-9][0-9.]{0,20}$")
#: Lines of pystack's "Core file information" block that say nothing a signature could use.
_CORE_INFO = ("Core file information:", "state: ", "uid: ")
_SIGNAL = re.compile(r"died due (?:to )?receiving signal (SIG[A-Z0-9]+)")
_PID = re.compile(r"^pid: (\d{1,10}) ppid:")
_EXE = re.compile(r"^executable: (\S+)(?: arguments: (.*))?$")


def score(lines: List[str]) -> float:
    heads = frames = 0
    for line in lines:
        s = line.strip()
        if s.startswith("Traceback for thread ") and _HEADER.match(s):
            heads += 1
        elif s.startswith(("(Python) File ", "(C) File ")):
            frames += 1
    if heads == 0:
        # a paste cut after the header: pystack's "(C) File"/"(Python) File" frame lines alone
        return 6.0 * frames if frames >= 2 else 0.0
    return 10.0 * heads + 2.0 * frames


def _frame(m) -> Frame:
    kind, file, line, rest = m.group(1), m.group(2), to_int(m.group(3)), m.group(4).strip()
    if file == "???" or line == 0:
        file, line = (None if file == "???" else file), (None if line == 0 else line)
    if kind == "C":
        f = Frame(kind="native", file=file, line=line)
        lm = _LIB_TAIL.match(rest)
        lib = lm.group(2) if lm else ""
        if "/" in lib or ("." in lib and " " not in lib):
            f.library, rest = lm.group(2), lm.group(1)
        if rest.endswith(_INLINED):
            f.inlined, rest = True, rest[: -len(_INLINED)]
        f.function = unknown_function(_SYMVER.sub("", rest))
        return f
    return python_frame(rest, file, line)


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    cur: Optional[Thread] = None
    frame_indent: Optional[int] = None
    source_next = False  # the next deeper line is the source line of the frame just read
    headless = False  # the paste starts inside a stack: its frame lines may have lost their indent
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("Traceback for thread "):
            m = _HEADER.match(s)
            if m:
                cur = Thread(tid=to_int(m.group(1)))
                if m.group(2):
                    cur.name = cur.os_name = m.group(2)
                for flag in (m.group(3) or "").split(","):
                    flag = flag.strip()
                    if not flag:
                        continue
                    cur.notes.append("pystack: %s" % flag)
                    low = flag.lower()
                    if "has the gil" in low:
                        cur.state.gil = "held"
                    elif "waiting for the gil" in low or "dropping the gil" in low:
                        cur.state.gil = "waiting"
                    if "garbage collecting" in low:
                        cur.state.gc = True
                proc.threads.append(cur)
                frame_indent = None
                continue
        if cur is None and not proc.threads and s.startswith(("(Python) File ", "(C) File ")) and _FRAME.match(s):
            # frames before any header: the paste starts inside a thread's stack
            cur = Thread()
            cur.notes.append("the thread header is not in the text (the paste starts inside its stack)")
            proc.threads.append(cur)
            headless = True
        if headless and line[:1] not in (" ", "\t") and s.startswith(("(Python) File ", "(C) File ")):
            line = " " + line  # (a paste's common indent, removed by unwrap, took the frames' own)
        if cur is not None and line[:1] in (" ", "\t"):
            ind = len(line) - len(line.lstrip())
            m = _FRAME.match(s) if s.startswith(("(", "File ")) else None
            if m:
                cur.frames.append(_frame(m))
                frame_indent = ind
                source_next = True
                continue
            if frame_indent is not None and ind > frame_indent:
                # the source line under a Python frame (sourcewait.py reads the wait from it), or
                # --locals values ("Arguments:" / "Locals:" and their rows, never the first line)
                last = cur.frames[-1] if source_next and cur.frames else None
                source_next = False
                if last is not None and last.kind == "python" and s not in ("Arguments:", "Locals:"):
                    last.source = s[:300]
                continue
        m = _SIGNAL.search(s)
        if m:
            proc.signal = m.group(1)
        m = _PID.match(s)
        if m:
            proc.pid = proc.pid or to_int(m.group(1))
            continue
        if s.startswith(_CORE_INFO):
            continue
        m = _EXE.match(s)
        if m:
            proc.executable = proc.executable or m.group(1)
            if m.group(2):
                proc.argv = m.group(2).split()
            continue
        messages.append(s)
    for t in proc.threads:
        t.frames.reverse()
        kinds = {f.kind for f in t.frames}
        t.merge = "merged" if kinds == {"python", "native"} else ("python-only" if kinds == {"python"} else None)
    proc.messages.extend(cap_messages(messages, proc.notes))
