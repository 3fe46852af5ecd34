"""x64dbg's (and x32dbg's) Call Stack view, copied as text: one row a frame, innermost first, the
stack address, the return address (To), the called function's address (From) and a comment that
names both ends of the call.

::

    Address           To                From              Comment
    00000000001B9528  00007FFE7DBC9A85  00007FFE7DC20E10  return to ntdll.00007FFE7DBC9A85 from
                                                          ntdll.NtWaitForSingleObject      (one line)
    00000000001B9588  00007FFE669BF18E  00007FFE66A04EB0  return to dbghelp.00007FFE669BF18E from
                                                          dbghelp.00007FFE66A04EB0         (one line)

Each row's frame is the function it came *from* (``module.Symbol``, or ``module.ADDRESS`` without a
symbol): the innermost row's is where the thread stands (NtWaitForSingleObject above).
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "x64dbg"

_HEADER = re.compile(r"^Address\s+To\s+From\s+(?:Size\s+)?Comment\b")
_ROW = re.compile(r"^([0-9A-Fa-f]{8,16})\s+([0-9A-Fa-f]{8,16})\s+([0-9A-Fa-f]{8,16})\s+(?:[0-9A-Fa-f]{1,8}\s+)?"
                  r"return to (\S{1,300}) from (\S{1,300})\s*$")
_HEX = re.compile(r"^[0-9A-Fa-f]{8,16}$")


def _target(name: str, address: str) -> Frame:
    module, dot, symbol = name.partition(".")
    if not dot:
        return Frame(kind="native", function=None, library=None, address=to_int(address, 16))
    if _HEX.match(symbol):
        return Frame(kind="native", function=None, library=module, address=to_int(symbol, 16))
    return Frame(kind="native", function=symbol.split("+", 1)[0], library=module, address=to_int(address, 16))


def _frame(s: str) -> Optional[Frame]:
    m = _ROW.match(s)
    return _target(m.group(5), m.group(3)) if m else None


def score(lines: List[str]) -> float:
    heads = rows = 0
    for line in lines:
        s = line.strip()
        if _HEADER.match(s):
            heads += 1
        elif "return to " in s and _frame(s) is not None:
            rows += 1
    return 6.0 * heads + 2.0 * rows if rows >= 2 or (heads and rows) else 0.0


def parse(lines: List[str], proc: Process) -> None:
    thread = Thread()
    thread.notes.append("x64dbg call stack view")
    messages: List[str] = []
    for line in lines:
        s = line.strip()
        if not s or _HEADER.match(s):
            continue
        f = _frame(s) if "return to " in s else None
        if f is not None:
            thread.frames.append(f)
        else:
            messages.append(s)
    if thread.frames:
        proc.threads.append(thread)
    proc.messages.extend(cap_messages(messages, proc.notes))
