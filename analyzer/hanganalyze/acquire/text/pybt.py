"""gdb's ``py-bt`` / ``thread apply all py-bt`` / ``py-bt-full`` (CPython's python-gdb.py).

::

    Thread 4 (Thread 0x7f76f93ae6c0 (LWP 10723)):        (gdb's header, as for ``bt``)
    Traceback (most recent call first):
      <built-in method sleep of module object at remote 0x7f..>   -> Python frame "sleep"
      File "/work/txt_deadlock.py", line 34, in sleeper            -> Python frame
        time.sleep(3600)                                            (source: skipped)
      Waiting for the GIL                                           -> ThreadState.gil

py-bt prints innermost first, like gdb.  Everything gdb says about itself is dropped (the
gdb parser's rules); other lines are messages.  A paste cut above the header is still py-bt when
it holds ``<built-in ... at remote 0x..>`` lines (only py-bt prints objects so), not a traceback
read the other way round.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, looks_like_statement, parse_py_file_line, python_frame, to_int
from .gdblines import CORE_BY, CURRENT, FRAME, INFERIOR, THREAD, is_noise, is_stop_echo, thread_from_header
from .py2gil import NOTE as PY2_NOTE
from .py2gil import lock_not_gil

NAME = "pybt"

HEADER = "Traceback (most recent call first):"
_BUILTIN = re.compile(r"^<built-in (?:method|function) (\S+)(?: of (.{1,200}?))?(?: at remote 0x[0-9a-fA-F]+)?>$")
#: py-bt-full: ``#5 Frame 0x7f.., for file x.py, line 34, in sleeper (args)``
_FULL = re.compile(r"^#\d{1,6} Frame 0x[0-9a-fA-F]+, for file (.*), line (\d{1,9}), in (\S+)")
#: py-bt-full's line for a C frame that runs no Python code: ``#4 Waiting for the GIL``
_FULL_STATE = re.compile(r"^#\d{1,6} (Waiting for the GIL|Garbage-collecting)$")
#: Python 2's libpython.py py-bt, one gdb-numbered line a frame: ``#8 file '/usr/lib/x/threading.py', in 'join'``
_OLD = re.compile(r"^file '([^']{1,1000})', in '([^']{1,300})'$")
#: its line for the eval frame of a lock's acquire (``#1 Waiting for a lock (e.g. GIL)``): no frame of its own
OLD_LOCK_WAIT = "Waiting for a lock (e.g. GIL)"
#: a PyEval frame's argument as python-gdb prints it: ``f=Frame 0x7f.., for file x.py, line 239, in wait (``
EVAL_ARG = re.compile(r"\bf=(?:\w{1,20}@entry=)? ?Frame 0x[0-9a-fA-F]{1,16}, "
                      r"for file (.{1,1000}?), line (\d{1,9}), in (\w+)")


def score(lines: List[str]) -> float:
    headers = frames = 0
    remote = False  # "<built-in method X of Y object at remote 0x..>": only gdb's py-bt prints objects so
    for line in lines:
        s = line.strip()
        if s == HEADER:
            headers += 1
        elif s.startswith("<built-in method") or (s.startswith("#") and " Frame 0x" in s and ", for file " in s):
            frames += 2
            remote = remote or (s.startswith("<built-in ") and " at remote 0x" in s)
        elif s.startswith("File ") and ", in " in s:
            frames += 1
    if headers == 0 and frames == 0:
        return 0.0
    if headers == 0 and not remote and not any(line.lstrip().startswith("#") and " Frame 0x" in line for line in lines):
        return 0.0
    return 10.0 * headers + frames


def old_frame(body: str) -> Optional[Frame]:
    """The Python frame of a Python 2 py-bt line's body (after ``#N``): ``file 'x.py', in 'f'`` or
    ``<built-in method acquire of thread.lock object at remote 0x..>``; None for any other body."""
    m = _OLD.match(body)
    if m:
        return python_frame(m.group(2), m.group(1), None)
    m = _BUILTIN.match(body) if body.startswith("<built-in ") else None
    if m:
        f = python_frame(m.group(1), None, None)
        f.note = "built-in" + (" of %s" % m.group(2) if m.group(2) else "")
        return f
    return None


def eval_arg_frame(body: str) -> Optional[Frame]:
    """The Python frame a native eval frame runs, from its ``f=Frame 0x.., for file ..`` argument
    (gdb with python-gdb.py loaded prints PyFrameObject arguments so): it is placed with certainty."""
    if "Frame 0x" not in body:
        return None
    m = EVAL_ARG.search(body)
    return python_frame(m.group(3), m.group(1).strip('"'), to_int(m.group(2))) if m else None


def is_full_state(s: str) -> bool:
    """py-bt-full's numbered line for the GIL wait or a collection (``#4 Waiting for the GIL``): it
    starts the thread's py-bt listing as a frame line does, so the frames below are the same thread."""
    return _FULL_STATE.match(s) is not None


def is_full_frame(s: str) -> bool:
    """A py-bt-full (or Python 2 py-bt) frame line: ``#5 Frame 0x.., for file x.py, line 3, in f``."""
    return " Frame 0x" in s and _FULL.match(s) is not None


def frame_line(line: str, s: str, cur: Thread, frames: List[Frame]) -> bool:
    """Handle one line of a py-bt section for thread ``cur`` (frames go to ``frames``)."""
    parsed = parse_py_file_line(s)
    if parsed is not None:
        frames.append(parsed[0])
        return True
    if s.startswith("<built-in "):
        m = _BUILTIN.match(s)
        if m:
            f = python_frame(m.group(1), None, None)
            f.note = "built-in" + (" of %s" % m.group(2) if m.group(2) else "")
            frames.append(f)
            return True
    if s.startswith("#"):
        m = _FULL.match(s)
        if m:
            frames.append(python_frame(m.group(3), m.group(1).strip('"'), to_int(m.group(2))))
            return True
        m = _FULL_STATE.match(s)
        if m:
            if m.group(1) == "Garbage-collecting":
                cur.state.gc = True
            else:
                cur.state.gil = "waiting"
            return True
        # py-bt-full numbers its built-in lines too: ``#10 <built-in method sleep of module object ..>``
        num, _sp, rest = s.partition(" ")
        m = _BUILTIN.match(rest) if num[1:].isdigit() and rest.startswith("<built-in ") else None
        if m:
            f = python_frame(m.group(1), None, None)
            f.note = "built-in" + (" of %s" % m.group(2) if m.group(2) else "")
            frames.append(f)
            return True
    if line[:1] in (" ", "\t"):
        if s == "Waiting for the GIL":
            cur.state.gil = "waiting"
            return True
        if s == "Garbage-collecting":
            cur.state.gc = True
            return True
        if s.startswith(("(unable to read python frame", "(frame information optimized out)", "Unable to")):
            cur.notes.append(s)
            return True
        if frames:
            if frames[-1].source is None and frames[-1].file:
                frames[-1].source = s[:300]  # the source line under a frame (sourcewait.py)
            return True
    if frames and frames[-1].file and frames[-1].source is None and looks_like_statement(s):
        frames[-1].source = s[:300]  # a paste that lost its indentation: the source flush left
        return True
    if s.startswith("Unable to locate python frame"):
        cur.notes.append(s)
        return True
    return False


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    current_num: Optional[str] = None
    by_num = {}

    def new_thread() -> Thread:
        t = Thread(merge="python-only")
        threads.append(t)
        return t

    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("Thread "):
            m = THREAD.match(s)
            if m:
                cur = thread_from_header(m.group(1), m.group(2))
                cur.merge = "python-only"
                threads.append(cur)
                by_num[m.group(1)] = cur
                continue
        if s == HEADER:
            if cur is None or cur.frames:
                cur = new_thread()
            continue
        if s.startswith("#") and not _FULL.match(s) and FRAME.match(s):
            continue  # gdb's "#0 ..." echo of the stop location
        if cur is None and (s.startswith(("File ", "<built-in ", "#")) and frame_line(line, s, Thread(), [])):
            cur = new_thread()
        if cur is not None and frame_line(line, s, cur, cur.frames):
            continue
        m = CURRENT.match(s)
        if m:
            current_num = m.group(1)
            continue
        m = CORE_BY.match(s)
        if m:
            proc.argv = m.group(1).split() or None
            proc.executable = proc.argv[0] if proc.argv else None
            continue
        m = INFERIOR.match(s)
        if m:
            proc.pid = proc.pid or to_int(m.group(1))
            continue
        if is_noise(s) or is_stop_echo(s):
            continue
        messages.append(s)
    for t in threads:
        if t.state.gil == "waiting" and lock_not_gil(t.frames):
            t.state.gil = None
            t.notes.append(PY2_NOTE)
    if current_num in by_num:
        by_num[current_num].current = True
    elif len(threads) == 1 and not by_num:
        threads[0].current = True
    proc.threads.extend(threads)
    proc.messages.extend(cap_messages(messages, proc.notes))
