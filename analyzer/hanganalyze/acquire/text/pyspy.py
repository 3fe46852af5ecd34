"""``py-spy dump`` text, with and without ``--native`` (and ``--locals``, whose lines are skipped).

::

    Process 10719: /usr/bin/python3.11 train.py        -> pid, argv (one Process per header)
    Python v3.11.7 (/usr/bin/python3.11)               -> python version, executable
    Thread 10719 (idle): "MainThread"                  -> tid, name; "+gil" -> GIL held
        Thread.join (threading.py:1119)                -> Python frame (file as py-spy shortens it)
        PyThread_acquire_lock_timed (libpython3.11.so.1.0)   -> native frame, library
        0x7f76faaa3f16 (libc.so.6)                     -> native frame without a symbol

py-spy prints innermost first.  Without ``--native`` all frames are Python.

py-spy before 0.3 (``py-spy --dump``) printed no ``Process``/``Python`` lines, no thread name,
and indented frames by a tab (``Thread 0x7F41B8301700 (active)`` / ``\t run (threading.py:864)``).
``ray stack`` runs py-spy on every worker and prints ``Stack dump for <ps aux line>`` above each
(``common.split_processes`` cuts there): its pid and command are the process's.  Frames above
the first thread header (a paste cut at the top) form a thread of their own; when such frames
start flush left (a stack copied as a list: ``poll (/usr/lib/libc-2.32.so:0)``, then its callers),
the flush-left lines that follow are its frames while no sentence could look like them (a Python
file's line, a shared object, a C source's line).  ``library:0`` is a native frame without line
information: a library, not a source file.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, PythonFacts, Thread

from .common import cap_messages, python_frame, stack_dump_header, to_int, unknown_function

NAME = "pyspy"

_PROCESS = re.compile(r"^Process (\d{1,10}): ?(.*)$")
_PYTHON = re.compile(r"^Python v(\d+\.\d+[\w.+]*) \((.*)\)$")
_THREAD = re.compile(r'^Thread (0x[0-9a-fA-F]{1,16}|\d{1,10}) \(([\w+ ]{0,40})\)(?:: "(.*)")?$')
#: ``func (where)``: ``where`` is ``file:line`` for Python (and native with line info), else a library.
_FRAME = re.compile(r"^(\S.*?) \(([^()]*)\)$")
#: ``MainThread:`` / ``Thread-1 (FlushWorker):``: a thread's name over its frames where an issue's author
#: abridged py-spy's header to the name (the frames follow as py-spy prints them)
_NAMED = re.compile(r"^((?:MainThread|Thread-\d{1,6}|[\w.-]{0,60}[Tt]hread[\w.-]{0,40})(?: \([\w .:-]{1,80}\))?):$")
_WHERE_LINE = re.compile(r"^(.*):(\d{1,9})$")
_PY_SUFFIXES = (".py", ".pyx", ".pyi", ".pyw")
#: A shared object's path: ``libpq.so.5.13``, ``libc-2.32.so``, ``x.dylib``, ``x.dll``, ``x.pyd``.
_SHARED_OBJECT = re.compile(r"\.so(\.\d+)*$|\.(dylib|dll|pyd)$")
_C_SOURCE = (".c", ".cc", ".cpp", ".cxx", ".h", ".hpp")


def score(lines: List[str]) -> float:
    heads = frames = strong = 0
    for line in lines:
        s = line.strip()
        if s.startswith("Thread ") and _THREAD.match(s):
            heads += 1
        elif s.startswith(("Process ", "Python v")) and (_PROCESS.match(s) or _PYTHON.match(s)):
            heads += 1
        elif s.startswith("Stack dump for ") and stack_dump_header(s):
            heads += 1
        elif s.endswith(")") and _FRAME.match(s):
            sure = _strong(_frame(s))
            if line[:1] in (" ", "\t") or sure:  # a paste that lost its indentation keeps the frames
                frames += 1
            if sure:
                strong += 1
    if heads == 0:
        # no header at all: a paste cut at the top, inside a thread's frames (weak: any format
        # with a header of its own wins)
        return 0.5 * strong if strong >= 2 else 0.0
    if frames == 0:
        return 0.0
    return 6.0 * heads + frames


def _strong(f: Optional[Frame]) -> bool:
    """A frame no sentence looks like: ``f (x.py:12)``, ``f (libc.so.6)``."""
    if f is None:
        return False
    if f.kind == "python":
        # (an import's frames: ``_find_and_load (<frozen importlib._bootstrap>:1173)``)
        return bool(f.file and (f.file.endswith(_PY_SUFFIXES) or f.file.startswith("<frozen "))
                    and f.line is not None)
    lib = f.library or ""
    if f.file and f.line and f.file.endswith(_C_SOURCE):
        return True  # ``f (pqpath.c:829)``: a native frame with its source line
    return ".so" in lib or lib.endswith((".dylib", ".dll", ".pyd"))


def _frame(s: str) -> Optional[Frame]:
    m = _FRAME.match(s)
    if not m:
        return None
    func, where = m.group(1), m.group(2).strip()
    if "=" in where or ", " in where:
        return None  # a log line's call or arguments (``timeout (self.timeout=300, soft=False)``), no place
    lm = _WHERE_LINE.match(where)
    if lm and (lm.group(1).endswith(_PY_SUFFIXES) or lm.group(1).startswith("<")):
        return python_frame(func, lm.group(1), to_int(lm.group(2)))
    f = Frame(kind="native")
    if func.startswith("0x") and to_int(func, 16) is not None:
        f.address = to_int(func, 16)
    else:
        f.function = unknown_function(func)
    if lm and not (lm.group(2) == "0" and _SHARED_OBJECT.search(lm.group(1))):
        f.file, f.line = lm.group(1), to_int(lm.group(2))
    elif lm:
        f.library = lm.group(1)  # ``libpq.so.5.13:0``: no line information, the library
    else:
        f.library = where or None
    return f


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    cur: Optional[Thread] = None
    frame_indent = None
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _PROCESS.match(s)
        if m:
            proc.pid = proc.pid or to_int(m.group(1))
            if m.group(2):
                proc.argv = m.group(2).split()
                proc.executable = proc.executable or proc.argv[0]
            continue
        m = _PYTHON.match(s)
        if m:
            proc.python = PythonFacts(version=m.group(1))
            proc.executable = m.group(2) or proc.executable
            continue
        if s.startswith("Stack dump for "):
            sd = stack_dump_header(s)
            if sd is not None:
                proc.pid = proc.pid or sd[0]
                if sd[1] and not proc.argv:
                    proc.argv = sd[1]
                    proc.executable = proc.executable or sd[1][0]
                proc.notes.append("ray stack: %s" % s[len("Stack dump for "):].strip()[:300])
                continue
        if s.startswith("Thread "):
            m = _THREAD.match(s)
            if m:
                ident = m.group(1)
                cur = Thread()
                if ident.startswith("0x"):
                    cur.pthread_id = to_int(ident, 16)
                else:
                    cur.tid = to_int(ident)
                status = m.group(2).strip()
                if "gil" in status:
                    cur.state.gil = "held"
                if status:
                    cur.notes.append("py-spy: %s" % status)
                if m.group(3) is not None:
                    cur.name = cur.python_name = m.group(3)
                proc.threads.append(cur)
                frame_indent = None
                continue
        m = _NAMED.match(s) if s.endswith(":") else None
        if m:
            cur = Thread(name=m.group(1))
            cur.python_name = m.group(1)
            cur.notes.append("py-spy's frames under the thread's name alone (its header abridged)")
            proc.threads.append(cur)
            frame_indent = None
            continue
        if cur is None and not proc.threads and s.endswith(")"):
            f = _frame(s)
            if f is not None and (line[:1] in (" ", "\t") or _strong(f)):
                # the paste starts inside a thread's frames: its header was cut
                cur = Thread()
                cur.notes.append("the thread header is not in the text (the paste starts inside its frames)")
                proc.threads.append(cur)
                frame_indent = len(line) - len(line.lstrip())
                cur.frames.append(f)
                continue
        if cur is not None and frame_indent in (None, 0) and line[:1] not in (" ", "\t") and s.endswith(")"):
            f = _frame(s)
            if f is not None and _strong(f):
                # the next frame of a stack copied flush left (a rendered page drops the indentation)
                frame_indent = 0
                cur.frames.append(f)
                continue
        if cur is not None and line[:1] in (" ", "\t"):
            ind = len(line) - len(line.lstrip())
            if frame_indent is None or ind <= frame_indent:
                f = _frame(s)
                if f is not None:
                    frame_indent = ind
                    cur.frames.append(f)
                    continue
            if frame_indent is not None and ind > frame_indent:
                continue  # --locals: "Arguments:" / "Locals:" and their values
        messages.append(s)
    for t in proc.threads:
        kinds = {f.kind for f in t.frames}
        t.merge = "merged" if kinds == {"python", "native"} else ("python-only" if kinds == {"python"} else None)
    proc.messages.extend(cap_messages(messages, proc.notes))
