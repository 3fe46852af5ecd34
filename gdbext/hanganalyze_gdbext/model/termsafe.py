"""Text from the inferior made safe for the user's terminal: the one escaper of the project.

Thread names, Python function and file names are written by the debugged program: an ESC in a
thread name could repaint the terminal, set its title or (on some emulators) answer back; a
newline could forge a frame line; a bidi override (U+202E) prints its neighbours backwards
("Trojan Source"), zero-width marks and line/paragraph separators hide or split text.  The gdb
commands print through ``safe``; the analyzer's text, Markdown and HTML reports use ``visible``
(and ``encodable`` last, on the whole report).  Standard library only, Python 3.8 syntax: this
runs inside gdb, and the analyzer imports it (as part of the shared model layer).
"""

import re
from typing import Iterable

#: C0/C1 controls and invisible formatting characters (bidi overrides and isolates, zero-width
#: marks, U+2028/U+2029, BOM).
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\t": "\\t"}
#: Lone surrogates: bytes that were not UTF-8 (decoded with surrogateescape).  No encoder writes
#: them, so a report holding one would fail at the last step.
_SURROGATE = re.compile("[\ud800-\udfff]")


def visible(text: str, keep: str = "") -> str:
    """`text` with every control and invisible character shown: newline and tab as ``\\n`` and
    ``\\t``, the others as ``\\xNN`` / ``\\uNNNN``.  Characters in ``keep`` (the HTML report keeps
    ``"\\t\\n"``) are left alone."""
    if not _HIDDEN.search(text):
        return text

    def show(m) -> str:
        c = m.group(0)
        if c in keep:
            return c
        return _NAMED.get(c) or ("\\x%02x" if ord(c) < 0x100 else "\\u%04x") % ord(c)

    return _HIDDEN.sub(show, text)


def _show_surrogate(m) -> str:
    """A byte that was not UTF-8 (U+DC80-U+DCFF) is shown as ``\\xNN``; any other lone surrogate
    as U+FFFD.  Both are plain characters, so this is safe after HTML/Markdown escaping."""
    c = ord(m.group(0))
    return "\\x%02x" % (c - 0xDC00) if 0xDC80 <= c <= 0xDCFF else "\ufffd"


def encodable(text: str) -> str:
    """`text` with no lone surrogate left, so that it can be written as UTF-8."""
    return _SURROGATE.sub(_show_surrogate, text)


def safe(value: object) -> str:
    """`value` as one line of inert text for a terminal: ``visible``, then ``encodable``."""
    return encodable(visible(str(value)))


def safe_lines(lines: Iterable[str]) -> str:
    """Lines made safe one by one (a newline inside a line is data, not a line break), joined."""
    return "".join(safe(line) + "\n" for line in lines)
