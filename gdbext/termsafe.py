"""Text from the inferior made safe for the user's terminal.

Thread names, Python function and file names are written by the debugged program: an ESC in a
thread name could repaint the terminal, set its title or (on some emulators) answer back; a
newline could forge a frame line; a bidi override (U+202E) prints its neighbours backwards.
Every command that prints such text passes it through ``safe`` (the analyzer's text report
applies the same rule).  Standard library only, Python 3.8 syntax: this runs inside gdb.
"""

import re
from typing import Iterable

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_INVISIBLE = re.compile("[\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _control(m) -> str:
    c = m.group(0)
    return {"\n": "\\n", "\t": "\\t"}.get(c) or "\\x%02x" % ord(c)


def _surrogate(m) -> str:
    c = ord(m.group(0))
    return "\\x%02x" % (c - 0xDC00) if 0xDC80 <= c <= 0xDCFF else "\ufffd"


def safe(value: object) -> str:
    """`value` as one line of inert text: controls as ``\\xNN``/``\\n``, invisible formatting
    characters as ``\\uNNNN``, undecodable bytes (lone surrogates) as ``\\xNN``."""
    text = _CONTROL.sub(_control, str(value))
    text = _INVISIBLE.sub(lambda m: "\\u%04x" % ord(m.group(0)), text)
    return _SURROGATE.sub(_surrogate, text)


def safe_lines(lines: Iterable[str]) -> str:
    """Lines made safe one by one (a newline inside a line is data, not a line break), joined."""
    return "".join(safe(line) + "\n" for line in lines)
