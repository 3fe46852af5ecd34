"""C/C++ symbol-name helpers shared by the text parsers and the signature matcher."""

from __future__ import annotations

from typing import Optional


def last_group_start(text: str) -> Optional[int]:
    """Index of the ``(`` that opens the final balanced parenthesised group of ``text``, or None.

    C++ names carry parameter lists of their own and gdb adds its argument list after them
    (``std::terminate() ()``), so only a walk back from the end finds the last group; it is linear.
    """
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return i
    return None
