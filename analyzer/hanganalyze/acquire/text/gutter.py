"""A margin every line of a pasted dump carries: `` : `` or `` | `` before each line.

Why: some stack printers (an application's "dump all threads" helper, a log viewer's gutter, an
outline) draw a column of ``:`` or ``|`` to the left of every line they print, so no line of the
dump starts the way its format does (``File "..."`` of a traceback, ``#0`` of gdb).  When every
non-blank line carries the same margin (the same leading blanks, the same mark, then a blank or the
line's end) the margin is no part of the dump, like a quote's ``> ``; a dump's own ``:`` or ``|``
never starts every one of its lines.
"""

from __future__ import annotations

import re
from typing import List, Optional

#: Leading blanks, the margin's mark, and the one blank after it (or the line's end).
_MARGIN = re.compile(r"^([ \t]{0,8}[:|])(?: |$)")
#: Fewer lines than this are no column: a lone ``: text`` line is not a margin.
_MIN_LINES = 3


def strip_gutter(lines: List[str]) -> Optional[List[str]]:
    """The lines without the margin every non-blank one carries; None when they do not all carry
    the same one."""
    mark: Optional[str] = None
    count = 0
    for line in lines:
        if not line.strip():
            continue
        m = _MARGIN.match(line)
        if m is None or (mark is not None and m.group(1) != mark):
            return None
        mark = m.group(1)
        count += 1
    if mark is None or count < _MIN_LINES:
        return None
    n = len(mark)
    return [line[n + 1:] if line.startswith(mark) else line for line in lines]
