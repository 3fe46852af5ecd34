"""QGIS's crash report: the dialog its crash handler shows (and the issue template users paste), with
the crashing thread's stack one frame a line, the symbol then its source file and line (both empty
where the build has no line table).

::

    ## Report Details                          -> header lines (kept as messages)
    **Crash ID**: 3f2a...
    **Stack Trace**
    QgsPlotCanvas::mousePressEvent :           -> a frame, no file known
    QgsMapCanvas::refresh qgsmapcanvas.cpp:593 -> a frame with its file and line
    PyInit__gui :

QGIS writes this only after a crash, so the one thread is the crashing one (``loglines.QGIS_NOTE``):
the process crashed there.  Rows alone (a chunk without the header) are read the same way: no other
tool prints ``Symbol :`` rows.
"""

from __future__ import annotations

import re
from typing import List

from hanganalyze.loglines import QGIS_NOTE
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "qgis-crash"

#: ``Symbol :`` / ``Symbol file.cpp:123``: a C++ or C symbol, a blank, then ``file:line`` or a bare colon.
_ROW = re.compile(r"^([A-Za-z_~][\w:~<>]{0,500}) (?:([\w./\\\\-]{1,300}\.\w{1,6}):(\d{1,7})|:)$")
_HEADER = re.compile(r"^(?:#+ |\*\*)?(?:Crash ID|Stack Trace|Report Details)\b")
#: Rows a text needs before it is read as this report.
MIN_ROWS = 4


def score(lines: List[str]) -> float:
    rows = heads = 0
    for line in lines:
        s = line.strip()
        if _ROW.match(s):
            rows += 1
        elif _HEADER.match(s):
            heads += 1
    return 2.0 * rows + 4.0 * heads if rows >= MIN_ROWS else 0.0


def parse(lines: List[str], proc: Process) -> None:
    thread = Thread(current=True)
    thread.notes.append("QGIS crash report's stack")
    rows = set()
    for i, line in enumerate(lines):
        m = _ROW.match(line.strip())
        if m:
            rows.add(i)
            thread.frames.append(Frame(kind="native", function=m.group(1), file=m.group(2) or None,
                                       line=to_int(m.group(3)) if m.group(3) else None))
    if len(thread.frames) < MIN_ROWS:  # (fewer: "Note :" lines of prose, never read as a stack)
        rows = set()
    else:
        proc.threads.append(thread)
        proc.notes.append(QGIS_NOTE)
    messages = [line.strip() for i, line in enumerate(lines) if i not in rows and line.strip()]
    proc.messages.extend(cap_messages(messages, proc.notes))
