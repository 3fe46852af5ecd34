"""Line numbers from CPython's per-code-object tables, one decoder per format.

Pure functions over ``bytes`` so they are unit-tested against real interpreters' tables:
  * 3.8/3.9 ``co_lnotab``: (addr delta u8, line delta i8) pairs; ``lasti`` is a byte offset.
  * 3.10 ``co_linetable``: (addr delta u8, line delta i8) pairs; -128 means "no line" for that
    range; ``lasti`` there is an instruction index (byte offset = 2 * f_lasti).
  * 3.11+ location table: variable-length entries in code units (2 bytes), see ``_locations``.
"""

from typing import Iterator, Optional, Tuple


def lnotab_line(lnotab: bytes, firstlineno: int, lasti: int) -> int:
    """3.8/3.9: the line of byte offset ``lasti`` (-1 before the first instruction)."""
    line = firstlineno
    addr = 0
    for i in range(0, len(lnotab) - 1, 2):
        addr += lnotab[i]
        if addr > lasti:
            break
        delta = lnotab[i + 1]
        line += delta - 256 if delta >= 128 else delta
    return line


def linetable310_line(table: bytes, firstlineno: int, byte_offset: int) -> Optional[int]:
    """3.10: the line of the instruction at ``byte_offset``; None where the range has no line."""
    if byte_offset < 0:
        return firstlineno
    line = firstlineno
    end = 0
    for i in range(0, len(table) - 1, 2):
        start = end
        end = start + table[i]
        ldelta = table[i + 1]
        if ldelta != 0x80:
            line += ldelta - 256 if ldelta >= 128 else ldelta
        if start <= byte_offset < end:
            return None if ldelta == 0x80 else line
    return None


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    shift = 0
    val = 0
    while pos < len(data):
        b = data[pos]
        pos += 1
        val |= (b & 63) << shift
        shift += 6
        if not b & 64:
            break
    return val, pos


def _svarint(data: bytes, pos: int) -> Tuple[int, int]:
    v, pos = _varint(data, pos)
    return (-(v >> 1) if v & 1 else v >> 1), pos


def _locations(table: bytes, firstlineno: int) -> Iterator[Tuple[int, int, Optional[int]]]:
    """3.11+: yield (start unit, end unit, line or None) for each location entry."""
    pos = 0
    unit = 0
    line = firstlineno
    n = len(table)
    while pos < n:
        first = table[pos]
        pos += 1
        if not first & 0x80:  # not an entry start: corrupt table
            return
        code = (first >> 3) & 15
        length = (first & 7) + 1
        this: Optional[int]
        if code == 15:  # no location
            this = None
        elif code == 14:  # long form: line delta, end line, column, end column
            delta, pos = _svarint(table, pos)
            line += delta
            _, pos = _varint(table, pos)
            _, pos = _varint(table, pos)
            _, pos = _varint(table, pos)
            this = line
        elif code == 13:  # no column info
            delta, pos = _svarint(table, pos)
            line += delta
            this = line
        elif code >= 10:  # one-line form: line delta code-10, two column bytes
            line += code - 10
            pos += 2
            this = line
        else:  # short form: same line, one column byte
            pos += 1
            this = line
        yield unit, unit + length, this
        unit += length


def location_line(table: bytes, firstlineno: int, unit_index: int) -> Optional[int]:
    """3.11+: the line of the code unit ``unit_index`` (negative: before the first instruction,
    which 3.11/3.12 ``prev_instr`` can be, is reported as ``firstlineno``)."""
    if unit_index < 0:
        return firstlineno
    for start, end, line in _locations(table, firstlineno):
        if start <= unit_index < end:
            return line
    return None
