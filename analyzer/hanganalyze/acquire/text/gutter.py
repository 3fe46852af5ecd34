"""A margin every line of a pasted dump carries: `` : `` or `` | `` before each line.

Why: some stack printers (an application's "dump all threads" helper, a log viewer's gutter, an
outline) draw a column of ``:`` or ``|`` to the left of every line they print, so no line of the
dump starts the way its format does (``File "..."`` of a traceback, ``#0`` of gdb).  When every
non-blank line carries the same margin (the same leading blanks, the same mark, then a blank or the
line's end), or every line of one block of them with prose only above and below it, the margin is
no part of the dump, like a quote's ``> ``; a dump's own ``:`` or ``|`` never starts every one of
its lines.
"""

from __future__ import annotations

import re
from typing import List, Optional

#: Leading blanks, the margin's mark, and the one blank after it (or the line's end).
_MARGIN = re.compile(r"^([ \t]{0,8}[:|])(?: |$)")
#: Fewer lines than this are no column: a lone ``: text`` line is not a margin.
_MIN_LINES = 3


#: Margin lines a block needs when lines without the margin stand around it (the sentence above a
#: paste, its thanks below): a longer column than a lone one.
_MIN_BLOCK = 5


def strip_gutter(lines: List[str]) -> Optional[List[str]]:
    """The lines without the margin that every non-blank one carries, or every one of a block of at
    least ``_MIN_BLOCK`` lines with prose only above and below it (the margin is the dump's; the
    issue's sentences around it have none); None otherwise."""
    marks = []  # (index, mark or None) of each non-blank line
    for i, line in enumerate(lines):
        if line.strip():
            m = _MARGIN.match(line)
            marks.append((i, m.group(1) if m else None))
    at = [k for k, (_i, mark) in enumerate(marks) if mark is not None]
    if len(at) < _MIN_LINES:
        return None
    first, last = at[0], at[-1]
    mark = marks[first][1]
    if any(marks[k][1] != mark for k in range(first, last + 1)):
        return None  # a line inside the block without it, or another mark: no column
    if (first > 0 or last < len(marks) - 1) and len(at) < _MIN_BLOCK:
        return None
    lo, hi = marks[first][0], marks[last][0]
    n = len(mark or "")
    return [line[n + 1:] if lo <= i <= hi and line.startswith(mark or "") else line for i, line in enumerate(lines)]
