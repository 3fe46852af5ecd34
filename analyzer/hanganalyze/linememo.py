"""Whole-text answers about one list of lines, computed once per content.

Why: a pasted text is asked the same questions from several places while it is read (which
wrapper every line shares, how many known log lines it holds: ``parse_text``'s unwrap, its
refusal path, its message joiner).  On a paste of a few hundred lines that costs nothing; on a
50 MB log (600,000 lines) each question is seconds, and asking it five times made a refusal take
the better part of a minute.  Only long texts are kept (short ones are cheaper to recount than to
hash), a few at a time, and ``forget`` drops them when the text is read.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Dict, List, Sequence, Tuple, TypeVar

T = TypeVar("T")

#: texts shorter than this are recounted (hashing them costs about as much)
MIN_LINES = 2000
#: texts kept at once: the lines, a few unwrap layers of them
KEEP = 6

_CACHES: List[OrderedDict[Tuple[str, ...], object]] = []


def by_content(fn: Callable[[Sequence[str]], T]) -> Callable[[Sequence[str]], T]:
    """``fn(lines)`` once per content of ``lines`` (a long text's); the result is shared, so a
    caller that changes it must copy it first."""
    cache: OrderedDict[Tuple[str, ...], object] = OrderedDict()
    _CACHES.append(cache)

    def wrapper(lines: Sequence[str]) -> T:
        if len(lines) < MIN_LINES:
            return fn(lines)
        key = tuple(lines)
        if key in cache:
            cache.move_to_end(key)
            return cache[key]  # type: ignore[return-value]
        value = fn(lines)
        cache[key] = value
        while len(cache) > KEEP:
            cache.popitem(last=False)
        return value

    wrapper.__doc__ = fn.__doc__
    wrapper.__name__ = getattr(fn, "__name__", "by_content")
    return wrapper


def forget() -> None:
    """Drop every kept answer (a text is read: its lines need not stay in memory)."""
    for cache in _CACHES:
        cache.clear()


def stats() -> Dict[str, int]:
    """How many texts are kept now (for tests)."""
    return {"texts": sum(len(c) for c in _CACHES)}
