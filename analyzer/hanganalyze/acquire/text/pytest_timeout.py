"""pytest-timeout's dump of every thread when a test runs past its timeout.

::

    +++++++++++++++++++++++++++++++++ Timeout +++++++++++++++++++++++++++++++++   -> a message
    ~~~~~~~~~~~~~~~~ Stack of Thread-6 (139742417913600) ~~~~~~~~~~~~~~~~        -> name, pthread id
      File "/usr/lib/python3.8/threading.py", line 890, in _bootstrap            -> Python frame
        self._bootstrap_inner()                                                   (source: skipped)

Each block is ``traceback.format_stack`` of one thread: outermost call first, so the frames are
reversed (innermost first, as everywhere).  The number is ``threading.get_ident()``, the pthread
id, not the LWP: it goes to ``Thread.pthread_id``.  ``File`` lines above the first header (a
paste cut at the top) form a thread of their own.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Process, Thread

from .common import cap_messages, indent_of, parse_py_file_line

NAME = "pytest-timeout"


def header(s: str) -> Optional[Tuple[Optional[str], Optional[int]]]:
    """``~~~ Stack of NAME (IDENT) ~~~`` (stripped) -> (name, ident); None for any other line.
    String operations only: linear whatever the line holds."""
    if not (s.startswith("~") and s.endswith("~")):
        return None
    inner = s.strip("~").strip()
    if not inner.startswith("Stack of "):
        return None
    inner = inner[len("Stack of "):].strip()
    i = inner.rfind(" (")
    if i > 0 and inner.endswith(")") and inner[i + 2:-1].isdigit() and len(inner) - i <= 24:
        return inner[:i].strip() or None, int(inner[i + 2:-1])
    return inner or None, None


def score(lines: List[str]) -> float:
    headers = frames = 0
    for line in lines:
        s = line.strip()
        if s.startswith("~") and header(s) is not None:
            headers += 1
        elif s.startswith("File ") and ", line " in s and ", in " in s:
            frames += 1
    if headers == 0 or frames == 0:
        return 0.0
    return 6.0 * headers + frames


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    frame_indent = -1
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("~"):
            h = header(s)
            if h is not None:
                cur = Thread(name=h[0], python_name=h[0], pthread_id=h[1], merge="python-only")
                cur.notes.append("pytest-timeout stack")
                threads.append(cur)
                frame_indent = -1
                continue
        if s.startswith("File "):
            parsed = parse_py_file_line(s)
            if parsed is not None:
                if cur is None:  # the paste starts inside a thread's stack: its header was cut
                    cur = Thread(merge="python-only")
                    cur.notes.append("the thread header is not in the text (the paste starts inside its stack)")
                    threads.append(cur)
                cur.frames.append(parsed[0])
                frame_indent = indent_of(line)
                continue
        if cur is not None and frame_indent >= 0 and indent_of(line) > frame_indent:
            continue  # the source line under a frame
        if s.startswith("+") and s.endswith("+") and s.strip("+ "):
            messages.append(s.strip("+ "))  # "+++++ Timeout +++++"
            cur = None
            continue
        cur = None if not line[:1].isspace() else cur
        messages.append(s)
    for t in threads:
        t.frames.reverse()  # format_stack prints the outermost call first
    proc.threads.extend(threads)
    proc.messages.extend(cap_messages(messages, proc.notes))
