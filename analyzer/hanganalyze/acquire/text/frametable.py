"""A stack copied out of a table - a crash reporter's web page, a telemetry dashboard or a spreadsheet
pasted into an issue, which GitHub turns into a Markdown table: one row a frame, innermost first,
under a header that names the module and the function (and often the offset).

::

    n | Module | Function | Offset
    -- | -- | -- | --
    0 | python38.dll | PyDict_SetItem | 0x000000000000001C
    1 | pythoncom38.dll | PyCom_IsGatewayRegistered | 0x000000000000017C
    3 | propsys.pyd |   | 0x0000000000009EF8

Cells are split on ``|`` (Markdown) or tabs (a spreadsheet); an empty function cell is a frame
without a symbol.  An "Offset" column is relative to its module or function, not an address: it is
checked (a hexadecimal number) but not kept, so that no rule reads 0x1C as a call into the null
page; an "Address" / "PC" column is kept as the frame's address.
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "frametable"

_SEPARATOR = re.compile(r"^:?-{2,}:?$")
_HEX = re.compile(r"^(?:0[xX])?([0-9A-Fa-f]{1,16})$")
_MODULE = ("module", "image", "library", "dll", "binary")
_FUNCTION = ("function", "symbol", "method", "frame function")
_OFFSET = ("offset", "address", "addr", "pc", "ip")
#: The columns whose number is an absolute address (the others are offsets within a module).
_ABSOLUTE = ("address", "addr", "pc", "ip")


def _cells(line: str) -> Optional[List[str]]:
    s = line.strip()
    if "|" in s:
        cells = [c.strip() for c in s.strip("|").split("|")]
    elif "\t" in s:
        cells = [c.strip() for c in s.split("\t")]
    else:
        return None
    return cells if 3 <= len(cells) <= 12 else None


def _column(header: Sequence[str], names: Sequence[str]) -> Optional[int]:
    low = [h.lower() for h in header]
    return next((i for i, h in enumerate(low) if h in names), None)


def _layout(line: str) -> Optional[tuple]:
    """(number of cells, module column, function column, offset column or None, whether that column
    holds absolute addresses) of a header row."""
    cells = _cells(line)
    if cells is None:
        return None
    mod, fun = _column(cells, _MODULE), _column(cells, _FUNCTION)
    if mod is None or fun is None:
        return None
    off = _column(cells, _OFFSET)
    return len(cells), mod, fun, off, off is not None and cells[off].lower() in _ABSOLUTE


def _frame(line: str, layout: tuple) -> Optional[Frame]:
    n, mod, fun, off, absolute = layout
    cells = _cells(line)
    if cells is None or len(cells) != n or all(_SEPARATOR.match(c) for c in cells if c):
        return None
    module, function = cells[mod], cells[fun]
    address = None
    if off is not None:
        m = _HEX.match(cells[off])
        if m is None:
            return None
        address = to_int(m.group(1), 16) if absolute else None
    if not module and not function and off is None:
        return None
    return Frame(kind="native", function=function or None, library=module or None, address=address)


def score(lines: List[str]) -> float:
    layout = None
    rows = 0
    for line in lines[:400]:
        if layout is None:
            layout = _layout(line)
        elif _frame(line, layout) is not None:
            rows += 1
    return 6.0 + 2.0 * rows if layout is not None and rows >= 2 else 0.0


def parse(lines: List[str], proc: Process) -> None:
    thread = Thread()
    thread.notes.append("a stack copied from a table (module, function, offset)")
    messages: List[str] = []
    layout = None
    for line in lines:
        s = line.strip()
        if layout is None:
            layout = _layout(s)
            if layout is None and s:
                messages.append(s)
            continue
        cells = _cells(s)
        if cells is not None and all(_SEPARATOR.match(c) for c in cells if c):
            continue
        f = _frame(s, layout)
        if f is not None:
            thread.frames.append(f)
        elif s:
            messages.append(s)
    if thread.frames:
        proc.threads.append(thread)
    proc.messages.extend(cap_messages(messages, proc.notes))
