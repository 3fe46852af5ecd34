"""Python's faulthandler dumps: ``dump_traceback[_later]``, ``register(SIGUSR1)``, fatal errors.

::

    Fatal Python error: Aborted                      -> Process.signal = "SIGABRT" (+ message)
    Thread 0x00007fbd198a56c0 (most recent call first):
      File "/usr/lib/python3.12/threading.py", line 355 in wait
    Current thread 0x00007fbd1a4e0b80 (most recent call first):   -> Thread.current
    Stack (most recent call first):                   (dump of the current thread alone)
      Garbage-collecting                              -> ThreadState.gc
    Current thread's C stack trace (most recent call first):      (3.14+)
      Binary file "/lib/libc.so.6", at abort+0x1c [0x7f..]         -> native frame

faulthandler prints innermost first already.  ``Binary file`` lines with no header above them (a paste cut
below "Current thread's C stack trace") are that stack: the current thread's.  The hex number is the
pthread id (``pthread_self``), not the LWP: it goes to ``Thread.pthread_id`` and ``tid`` stays
unknown.  ``File`` lines above the first header (a paste cut at the top) form a thread of their own.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze.loglines import CURRENT_NOTE
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, parse_py_file_line, python_frame, to_int, unknown_function

NAME = "faulthandler"

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]{1,16})(?: \[(.{0,200})\])? \(most recent call first\):$")
_STACK = "Stack (most recent call first):"
#: A dump an issue's author condensed: the header's words of their own, each frame ``path, line N in f``
#: without faulthandler's ``File "..."`` (open sealed round 64's anyio worker), innermost first still.
_ABRIDGED_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]{1,16}) \((?!most recent)[^()]{1,200}\):$")
_ABRIDGED_FRAME = re.compile(r"^(<frozen [\w.]{1,100}>|[\w./\\-]{1,300}\.py), line (\d{1,9})(?: in (\S{1,300}))?$")
_C_STACK = re.compile(r"^(?:Current thread's )?C stack trace(?: \(most recent call first\))?:$")
_BINARY = re.compile(r'^Binary file "(.*)", at ([^\s\[]*?)(?:\+(0x[0-9a-fA-F]+))? \[(0x[0-9a-fA-F]+)\]$')
_HEADS = ("Thread 0x", "Current thread 0x")
_FATAL = re.compile(r"^Fatal Python error: (.*)$")
#: A process note: faulthandler marks a "Current thread" on a fatal error (or an explicit
#: faulthandler.dump_traceback()), never in a dump_traceback_later timeout; the triage reads it as
#: crash evidence when the fatal-error header was cut from the paste.

#: faulthandler's text for each fatal signal (Modules/faulthandler.c).
SIGNAL_TEXT = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}


def score(lines: List[str]) -> float:
    headers = frames = binary = 0
    for line in lines:
        s = line.strip()
        if s.endswith("(most recent call first):") and (s.startswith(_HEADS) or s == _STACK):
            headers += 1
        elif s.startswith("File ") and ", line " in s and ", in " not in s and " in " in s:
            frames += 1
        elif s.startswith("Thread 0x") and _ABRIDGED_THREAD.match(s):
            headers += 1
        elif s.startswith('Binary file "') and _BINARY.match(s):
            binary += 1
    if frames == 0:
        return 1.0 * binary if binary >= 2 else 0.0  # 3.14's C stack alone: its header cut from the paste
    if headers == 0:
        return 0.5 * frames  # cut at the top: the "File .., line N in f" lines (no comma) are faulthandler's
    return 5.0 * headers + 1.5 * frames


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.endswith("(most recent call first):"):
            m = _THREAD.match(s)
            if m:
                cur = Thread(pthread_id=to_int(m.group(2), 16), current=m.group(1) == "Current thread")
                if m.group(3):
                    cur.name = cur.python_name = m.group(3)
                cur.merge = "python-only"
                threads.append(cur)
                continue
            if s == _STACK:
                cur = Thread(current=True, merge="python-only")
                threads.append(cur)
                continue
            if _C_STACK.match(s):
                messages.append(s)  # a fatal error's (analyze/crashframes.py)
                continue  # the C frames that follow belong to the current thread
        if s.startswith("C stack trace") or s.startswith("Current thread's C stack"):
            messages.append(s)
            continue
        m = _ABRIDGED_THREAD.match(s) if s.startswith(("Thread 0x", "Current thread 0x")) else None
        if m:
            cur = Thread(pthread_id=to_int(m.group(2), 16), current=m.group(1) == "Current thread", merge="python-only")
            cur.notes.append("a faulthandler dump its author abridged (path, line N in f)")
            threads.append(cur)
            continue
        m = _ABRIDGED_FRAME.match(s) if cur is not None and ", line " in s else None
        if m and any(n.startswith("a faulthandler dump its author abridged") for n in cur.notes):
            cur.frames.append(python_frame(m.group(3) or "<module>", m.group(1), to_int(m.group(2))))
            continue
        parsed = parse_py_file_line(s)
        if parsed is not None and cur is None and not threads and not parsed[1]:
            # frames before any header: the paste starts inside a thread's stack
            cur = Thread(merge="python-only")
            cur.notes.append("the thread header is not in the text (the paste starts inside its stack)")
            threads.append(cur)
        if parsed is not None and cur is not None and (line[:1] in (" ", "\t") or not parsed[1]):
            cur.frames.append(parsed[0])
            continue
        if s.startswith("Binary file ") and cur is None and _BINARY.match(s):
            # 3.14's C stack with its header cut: only the fatal error handler (or a program's own
            # faulthandler.dump_c_stack()) writes it, for the thread that took the fatal signal
            cur = Thread(current=True, merge="native-only")
            cur.notes.append("CPython's C stack trace, its header not in the text (written by the fatal error handler)")
            threads.append(cur)
        if s.startswith("Binary file ") and cur is not None:
            m = _BINARY.match(s)
            if m:
                cur_t = next((t for t in threads if t.current), cur)
                cur_t.frames.append(Frame(
                    kind="native", function=unknown_function(m.group(2)), library=m.group(1),
                    address=to_int(m.group(4), 16),
                ))
                cur_t.merge = "unmerged" if any(f.kind == "python" for f in cur_t.frames) else cur_t.merge
                continue
        if cur is not None and line[:1] in (" ", "\t"):
            if s == "Garbage-collecting":
                cur.state.gc = True
                continue
            if s in ("<no Python frame>", "...", "<truncated rest of calls>"):
                cur.notes.append(s)
                continue
        m = _FATAL.match(s)
        if m:
            proc.signal = proc.signal or SIGNAL_TEXT.get(m.group(1).strip())
        messages.append(s)
    proc.threads.extend(threads)
    if any(t.current for t in threads) and CURRENT_NOTE not in proc.notes:
        proc.notes.append(CURRENT_NOTE)
    proc.messages.extend(cap_messages(messages, proc.notes))
