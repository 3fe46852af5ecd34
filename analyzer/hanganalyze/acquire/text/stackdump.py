"""Hand-written Python stack dumpers (``sys._current_frames()`` + ``traceback.extract_stack``),
the recipes projects paste into their code to debug a hang.

::

    # ThreadID: 140089313593088                              (the ActiveState "stacktracer" recipe)
    # Thread #5 (id=139671354054400), Folder INBOX           (offlineimap's SIGUSR dump)
    # Thread: MainThread(140089313593088)
    ===============  <Thread(waitress-1, started daemon 140089313593088)>  ===============
    ### ThreadID: 139818489702144 Thread name: PoolThread-0    (Tribler's watchdog: PATH:LINE func: rows)
    threading.py: wait: 309                                  (a dumper's PATH: func: LINE rows, innermost first)
    File: "/usr/lib/python2.7/threading.py", line 340, in wait waiter.acquire()   -> frame (source
    File: "/usr/lib/python2.7/threading.py", line 340, in wait                        after the name
      File "/usr/lib/python3.12/threading.py", line 355, in wait                      is dropped)

Each header starts a Thread (its name and ``threading.get_ident()``, a pthread id); frames are
printed outermost first (``extract_stack``) and reversed to innermost first.  ``File:`` lines
before any header (a paste cut at the top) form a thread of their own.  Without a ``File:`` line or
a header this is no stack dumper's text: tracebacks and faulthandler have their own parsers.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, python_frame, to_int

NAME = "stack-dumper"

#: ``File: "path", line N, in func [source]`` and ``File "path", line N, in func`` (comma optional; a
#: dumper that prints the path's repr quotes it with ``'``).
_FILE = re.compile(r'^(?:File|FILE):? (["\'])(.{1,1000}?)\1, line (\d{1,9}),? in (\S{1,300})(?: .*)?$')
#: ``NAME: Thread-3`` over ``FILE: "x", line N, in f`` rows (an application's own dumper: canto-curses')
_NAME_HEAD = re.compile(r"^NAME: ?(\S.{0,200})$")
_HEADERS = (
    # ``# ThreadID: 123`` / ``# Thread: name(123)`` / ``# Thread #5 (id=123), what it does``
    re.compile(r"^# ?Thread ?ID: ?(\d{1,20})\s*$|^# ?Thread: ?(\d{1,20})\s*$"),
    re.compile(r"^# ?Thread: ?(.{0,200}?)\((\d{1,20})\)\s*$"),
    re.compile(r"^# ?Thread #?(\d{1,6})? ?\(id=(\d{1,20})\),? ?(.{0,200})$"),
    # ``=====  <Thread(name, started daemon 123)>  =====`` / ``--- <_MainThread(MainThread, started 123)> ---``
    re.compile(r"^[=\-#~*]{3,}\s*<(?:_?\w{0,40}Thread)\((.{1,200}?), (?:started|initial|stopped)[\w ]{0,30}?"
               r"(\d{1,20})?\)>\s*[=\-#~*]{3,}$"),
)


#: Tribler's watchdog dump (its instrumentation.print_all_stacks): ``### ThreadID: N Thread name: X`` over
#: ``/path/file.py:LINE func:`` rows, innermost first (its "innermost last" heading notwithstanding: the
#: dumper's own print_all_stacks is the first row of its thread).
_TRIBLER_HEAD = re.compile(r"^#{3} ?ThreadID: ?(\d{1,20}) Thread name: ?(.{0,200})$")
_TRIBLER_ROW = re.compile(r"^(\S{1,1000}?\.py):(\d{1,9}) ([\w.<>]{1,300}):$")
_INNERMOST_FIRST = "rows innermost first (Tribler's watchdog dump)"
#: A dumper's ``path.py: func: LINE`` rows, innermost first (execnet's gateway dump, open round 45).
_COLON_ROW = re.compile(r"^(\S{1,1000}?\.py): ([\w.<>]{1,300}): (\d{1,9})$")
_COLON_FIRST = "rows innermost first ('path.py: func: LINE', a dumper's own rows)"
#: Those rows a text needs (with no header) before it is read as such a dump.
MIN_COLON_ROWS = 3


def _header(s: str) -> Optional[Tuple[Optional[str], Optional[int]]]:
    """A thread header line -> (name, ident); None for any other line."""
    if s.startswith("NAME:"):
        m = _NAME_HEAD.match(s)
        return (m.group(1).strip(), None) if m else None
    if not s or s[0] not in "#=-~*":
        return None
    m = _TRIBLER_HEAD.match(s)
    if m:
        return (m.group(2).strip() or None), to_int(m.group(1))
    for i, rx in enumerate(_HEADERS):
        m = rx.match(s)
        if not m:
            continue
        if i == 0:
            return None, to_int(m.group(1) or m.group(2))
        if i == 2:
            return (m.group(3).strip() or None), to_int(m.group(2))
        return (m.group(1).strip() or None), to_int(m.group(2))
    return None


#: ``# Thread: 123  File "path", line N, in func``: a bare ident header with the thread's first frame
#: on its line (a dumper that printed the header without its newline, open round 11's gRPC paste).
_JOINED = re.compile(r'^(# ?Thread(?: ?ID)?: ?\d{1,20})\s+(File:? ["\'].*)$')


def _split(s: str) -> Tuple[str, str]:
    """(the header, the frame after it on the same line) of a joined line, else (s, "")."""
    m = _JOINED.match(s) if s.startswith("#") else None
    return (m.group(1), m.group(2)) if m else (s, "")


def _frame(s: str) -> Optional[Frame]:
    if ".py: " in s and s[-1:].isdigit():
        row = _COLON_ROW.match(s)
        return python_frame(row.group(2), row.group(1), to_int(row.group(3))) if row else None
    if s.endswith(":") and ".py:" in s:
        row = _TRIBLER_ROW.match(s)
        return python_frame(row.group(3), row.group(1), to_int(row.group(2))) if row else None
    if not s.startswith(("File", "FILE")):
        return None
    m = _FILE.match(s)
    if not m:
        return None
    return python_frame(m.group(4), m.group(2), to_int(m.group(3)))


def score(lines: List[str]) -> float:
    headers = colon = frames = rows = 0
    for line in lines:
        s, joined = _split(line.strip())
        frames += _frame(joined) is not None
        if ".py: " in s and s[-1:].isdigit() and _COLON_ROW.match(s):
            rows += 1
        elif s.startswith(("File", "FILE")) or (s.endswith(":") and ".py:" in s):
            if _frame(s) is not None:
                frames += 1
                colon += not s.startswith("File ")  # "File:" or a Tribler row: no traceback's line
        elif _header(s) is not None:
            headers += 1
    if rows >= MIN_COLON_ROWS or (rows and headers):
        return 5.0 * headers + 2.0 * rows
    if frames == 0 or (colon == 0 and headers == 0):
        return 0.0
    return 5.0 * headers + 2.0 * colon + 0.5 * frames


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    indent = -1
    for line in lines:
        s, joined = _split(line.strip())
        if not s:
            continue
        h = _header(s)
        if h is not None:
            cur = Thread(name=h[0], python_name=h[0], pthread_id=h[1], merge="python-only")
            cur.notes.append("Python stack dumper")
            if _TRIBLER_HEAD.match(s):
                cur.notes.append(_INNERMOST_FIRST)
            threads.append(cur)
            indent = -1
            f = _frame(joined)
            if f is not None:
                cur.frames.append(f)
            continue
        f = _frame(s)
        if f is not None:
            if cur is None:
                cur = Thread(merge="python-only")
                cur.notes.append("the thread header is not in the text (the paste starts inside its stack)")
                threads.append(cur)
            if _COLON_ROW.match(s) and _COLON_FIRST not in cur.notes:
                cur.notes.append(_COLON_FIRST)
            cur.frames.append(f)
            indent = len(line) - len(line.lstrip())
            continue
        if cur is not None and indent >= 0 and len(line) - len(line.lstrip()) > indent:
            continue  # the source line under a frame
        messages.append(s)
    for t in threads:
        if _INNERMOST_FIRST not in t.notes and _COLON_FIRST not in t.notes:
            t.frames.reverse()  # extract_stack: outermost first
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
