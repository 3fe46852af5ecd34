"""pdb's ``where`` / ``bt`` (and ipdb's, pudb's text), the stack of the thread the debugger stopped.

::

    (Pdb) where
      /srv/app/crash.py(15)<module>()                  -> a frame: FILE(LINE)FUNCTION()
    -> result = next(iterator)                         -> its source line
    > /srv/app/pool.py(232)chunk_result()              -> '>' marks the debugger's current frame
    -> return future.result()

pdb prints the outermost frame first: frames are reversed to innermost first.  Its own frames
(``bdb.py``, ``pdb.py``: a breakpoint() or set_trace() call) are the debugger's, not the program's,
and are dropped when they are innermost.  A user who went ``up`` moves the ``>`` mark, not the
stack: the innermost frame is still where the thread stands.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Process, Thread

from .common import cap_messages, python_frame, to_int

NAME = "pdbwhere"

#: ``  /path/file.py(15)func()`` / ``> /path/file.py(232)chunk_result()`` (``<string>(1)<module>()`` too).
_FRAME = re.compile(r"^(?:> |  |>)?((?:/|[A-Za-z]:\\|\.{0,2}/|<|~)[^()\n]{0,500}|[\w.\-]{1,200}\.pyx?)"
                    r"\((\d{1,9})\)([\w<>.]{1,200})\(\)$")
_PROMPT = re.compile(r"^\((?:Pdb|ipdb|Pdb\+\+)\) ?(?:where|w|bt)\b")
_DEBUGGER_FILES = re.compile(r"(^|/)(bdb|pdb|ipdb/__main__|IPython/core/debugger)\.py$")


def _frame_match(line: str) -> Optional[re.Match[str]]:
    s = line.rstrip()
    return _FRAME.match(s) if "(" in s and s.endswith("()") else None


def score(lines: List[str]) -> float:
    """Frame lines each followed by pdb's ``-> source`` line; the prompt adds to it."""
    frames = prompt = 0
    for i, line in enumerate(lines):
        if _frame_match(line) and i + 1 < len(lines) and lines[i + 1].startswith("-> "):
            frames += 1
        elif _PROMPT.match(line.strip()):
            prompt = 1
    return 0.0 if frames < 2 and not (frames and prompt) else 3.0 * frames + 5.0 * prompt


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    cur: Optional[Thread] = None
    for line in lines:
        m = _frame_match(line)
        if m:
            if cur is None:
                cur = Thread(merge="python-only", current=True)
                cur.notes.append("pdb's where: the stack of the thread the debugger stopped")
                proc.threads.append(cur)
            cur.frames.append(python_frame(m.group(3), m.group(1).strip(), to_int(m.group(2))))
            continue
        if line.startswith("-> ") and cur is not None and cur.frames and cur.frames[-1].source is None:
            cur.frames[-1].source = line[3:].strip()[:300]
            continue
        s = line.strip()
        if s and not _PROMPT.match(s):
            messages.append(s)
    if cur is not None:
        cur.frames.reverse()
        while len(cur.frames) > 1 and _DEBUGGER_FILES.search(cur.frames[0].file or ""):
            cur.frames.pop(0)  # the debugger's own frames over a breakpoint: not the program's
    proc.messages.extend(cap_messages(messages, proc.notes))
