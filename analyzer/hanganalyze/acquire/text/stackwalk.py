"""A Windows program's own stack print: ``CaptureStackBackTrace`` (or ``StackWalk64``) and
``SymFromAddr``, one ``N: Function - 0xADDRESS`` line per frame, the way Microsoft's sample and the
snippets copied from it print them (``printf("%i: %s - 0x%0X\\n", i, symbol->Name, symbol->Address)``).

::

    0: PythonCmd - 0x7FFCBE425120                 -> frame 0, the innermost (function PythonCmd)
    1: TclNRRunCallbacks - 0x7FFCA3AEABA0
    2: Tcl_EvalEx - 0x7FFCA3AEBAA0

The capture returns the innermost frame first and the loop prints in that order; some copies
number the lines ``frames - i - 1`` (counting down), the order stays the same.  The address is the
symbol's start (``SYMBOL_INFO.Address``), not the frame's return address, so it is not kept as the
frame's PC.  Only a run of at least ``MIN_RUN`` lines numbered one after another (up or down) is
read: a numbered list in prose with a dash and a hex number is not a stack.
"""

from __future__ import annotations

import re
from typing import List

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages

NAME = "stackwalk"

#: ``12: SendMessageW - 0x7FFCC5FFB150`` (the name as SymFromAddr gives it: undecorated, may hold
#: blanks and templates' commas)
_ROW = re.compile(r"^(\d{1,5}): (\S.{0,500}?) - 0x([0-9a-fA-F]{1,16})$")
#: Rows numbered one after another that make a stack.
MIN_RUN = 3


def _rows(lines: List[str]) -> List[List[re.Match]]:
    """The runs of rows numbered one after another (blank lines skipped), each at least ``MIN_RUN``."""
    runs: List[List[re.Match]] = []
    cur: List[re.Match] = []
    step = 0
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _ROW.match(s) if s[:1].isdigit() and " - 0x" in s else None
        if m is not None and cur:
            d = int(m.group(1)) - int(cur[-1].group(1))
            if d in (1, -1) and (step in (0, d)):
                cur.append(m)
                step = d
                continue
        if len(cur) >= MIN_RUN:
            runs.append(cur)
        cur, step = ([m] if m is not None else []), 0
    if len(cur) >= MIN_RUN:
        runs.append(cur)
    return runs


def score(lines: List[str]) -> float:
    return 1.5 * sum(len(r) for r in _rows(lines))


def parse(lines: List[str], proc: Process) -> None:
    runs = _rows(lines)
    rows = {m.string for r in runs for m in r}
    for r in runs:
        t = Thread()
        t.notes.append("Windows stack print (N: Function - 0xAddress), innermost first")
        t.frames.extend(Frame(kind="native", function=m.group(2).strip()) for m in r)
        proc.threads.append(t)
    messages = [s for s in (line.strip() for line in lines) if s and s not in rows]
    proc.messages.extend(cap_messages(messages, proc.notes))
