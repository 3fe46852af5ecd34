"""lldb's ``gui`` Threads window, copied out of the terminal: a tree drawn in box characters.

::

    ┌──<Threads>──────────────────────────────────────────┐
    │ ◆─process 22068                                     │   -> pid
    │ ├─◆─thread #1: tid = 0x1d7a616, stop reason = signal│   -> a thread (lldb's header, cut at the border)
    │ │ ├─#0: __semwait_signal + 10                       │   -> frame 0: function (no address, no module)
    │ │ └─#8: start + 1                                   │
    │ ├─◆─thread #2: tid = 0x1d7a647                      │

Why a format of its own: no line of it starts the way ``bt`` prints (``frame #0: 0x...``), so the
lldb parser sees nothing, yet it is the same process state, one row per frame.  The window's
border (``│`` both sides, the ``┌──<Threads>──┐`` title row) and the tree's branches are no part
of a row; a header the border cut keeps what it shows.  Frames are innermost first, as lldb lists
them; the window prints no addresses and no modules.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int, unknown_function
from .lldb import _strip_at, _thread

NAME = "lldb-gui"

#: The tree's drawing left of a row's text: borders, branches, the ``◆`` of an expandable item.
_TREE = "│├└─◆◇▶▼ \t"
_ROW_FRAME = re.compile(r"^#(\d{1,6}): (.+)$")
_ROW_THREAD = re.compile(r"^thread #(\d{1,7})(?:: ?(.*))?$")
_ROW_PROCESS = re.compile(r"^process (\d{1,10})\b")
#: A row of the window: its left border, then the tree's branches before the item.
_ROW = re.compile(r"^\s*│\s*(?:[│├└]\s*)*[├└◆◇▶▼]─")


def _row(line: str) -> Optional[str]:
    """The item of a window row (border, branches and the right border removed); None for other lines."""
    if not _ROW.match(line):
        return None
    s = line.rstrip()
    if s.endswith("│"):
        s = s[:-1]
    return s.lstrip(_TREE).strip() or None


def score(lines: List[str]) -> float:
    frames = threads = 0
    for line in lines:
        item = _row(line)
        if item is None:
            continue
        if _ROW_FRAME.match(item):
            frames += 1
        elif _ROW_THREAD.match(item):
            threads += 1
    if frames == 0 or threads == 0:
        return 0.0
    return 2.0 * frames + 5.0 * threads


def _frame(body: str) -> Frame:
    """``__semwait_signal + 10`` / ``f(x=1) at file.c:12`` -> a native Frame with no address."""
    f = Frame(kind="native")
    sym, f.file, f.line = _strip_at(body.strip())
    i = sym.rfind(" + ")
    if i > 0 and sym[i + 3:].strip().isdigit():
        sym = sym[:i].rstrip()
    f.function = unknown_function(sym)
    return f


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    cur: Optional[Thread] = None
    for line in lines:
        item = _row(line)
        if item is None:
            s = line.strip()
            if s and not s.startswith("┌") and not s.startswith("└"):
                messages.append(s)
            continue
        m = _ROW_PROCESS.match(item)
        if m:
            proc.pid = proc.pid or to_int(m.group(1))
            continue
        m = _ROW_THREAD.match(item)
        if m:
            cur = _thread(m.group(1), m.group(2) or "", False)
            cur.notes.append("lldb gui Threads window")
            proc.threads.append(cur)
            continue
        m = _ROW_FRAME.match(item)
        if m and cur is not None:
            cur.frames.append(_frame(m.group(2)))
            continue
        messages.append(item)
    for t in proc.threads:
        t.merge = "native-only" if t.frames else None
    proc.messages.extend(cap_messages(messages, proc.notes))
