"""Refuse signature regexes that can backtrack catastrophically, when the signature is loaded.

Python's ``re`` cannot be interrupted: one ``re.search`` of ``^(a+)+$`` over a 35-character log
line runs for minutes while holding the GIL, so no timeout can stop it and the whole analysis
hangs.  User signature folders (``--signatures``) and pasted logs are both untrusted, so the shape
of each regex is checked once, statically, on the parsed pattern (``re._parser``), and the two
classic exponential shapes are rejected with an explanation:

* an unbounded repeat inside an unbounded repeat (``(a+)+``, ``(\\w+\\s?)*``, ``(.*,)*``), the
  "star height 2" patterns; possessive repeats and atomic groups (3.11+) are safe and allowed;
* an unbounded repeat over alternatives that can start with the same character (``(a|ab)*``,
  ``(\\w|\\d)+``): each repetition can split the text in two ways.

Polynomial cases (``.*a.*b``) are left to the input caps (message lines are cut at 20,000
characters).  The check errs on the side of refusing: a refused pattern can always be rewritten
without nesting (``(?:foo\\d+)*`` is refused although unambiguous; write it as ``(?:foo\\d+)*+``
or match the parts separately).
"""

from __future__ import annotations

from typing import Any, FrozenSet, List, Optional, Tuple, Union

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

#: Longest pattern accepted: signature regexes are short; a huge one is a mistake or an attack.
MAX_PATTERN = 4000
#: A bounded repeat above this many iterations is treated as unbounded (``(a+){1,10000}``).
BIG_REPEAT = 100

_ANY = "any"  # first-character set that may be anything
First = Union[FrozenSet[int], str]

_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT}
_POSSESSIVE = getattr(_c, "POSSESSIVE_REPEAT", None)
_ATOMIC = getattr(_c, "ATOMIC_GROUP", None)


def _unbounded(hi: int) -> bool:
    return hi is _c.MAXREPEAT or hi == _c.MAXREPEAT or hi > BIG_REPEAT


def _items(sub: Any) -> List[Tuple[Any, Any]]:
    return list(sub.data) if hasattr(sub, "data") else list(sub)


def _first(items: List[Tuple[Any, Any]]) -> First:
    """Characters a match of `items` can start with (``_ANY`` when unknown or possibly empty)."""
    for op, av in items:
        if op is _c.LITERAL:
            return frozenset([av])
        if op is _c.AT:
            continue  # ^, $, \b: zero-width, look at what follows
        if op is _c.SUBPATTERN:
            return _first(_items(av[-1]))
        if op is _c.BRANCH:
            out: set = set()
            for alt in av[1]:
                f = _first(_items(alt))
                if f == _ANY:
                    return _ANY
                out |= f
            return frozenset(out)
        if op in _REPEATS or op is _POSSESSIVE:
            lo, _hi, sub = av
            if lo == 0:
                return _ANY
            return _first(_items(sub))
        return _ANY
    return _ANY


def _has_unbounded_repeat(items: List[Tuple[Any, Any]]) -> bool:
    for op, av in items:
        if op in _REPEATS:
            lo, hi, sub = av
            if _unbounded(hi):
                return True
            if _has_unbounded_repeat(_items(sub)):
                return True
        elif op is _c.SUBPATTERN:
            if _has_unbounded_repeat(_items(av[-1])):
                return True
        elif op is _c.BRANCH:
            if any(_has_unbounded_repeat(_items(alt)) for alt in av[1]):
                return True
        # possessive repeats and atomic groups never backtrack into: not counted
    return False


def _overlapping_branch(items: List[Tuple[Any, Any]]) -> bool:
    """True when some alternation directly in `items` has two branches with a common first char."""
    for op, av in items:
        if op is _c.SUBPATTERN:
            if _overlapping_branch(_items(av[-1])):
                return True
        elif op is _c.BRANCH:
            seen: set = set()
            for alt in av[1]:
                f = _first(_items(alt))
                if f == _ANY or seen & f:
                    return True
                seen |= f
    return False


def _walk(items: List[Tuple[Any, Any]]) -> Optional[str]:
    for op, av in items:
        if op in _REPEATS:
            lo, hi, sub = av
            inner = _items(sub)
            if _unbounded(hi):
                if _has_unbounded_repeat(inner):
                    return "nested unbounded repeats (like (a+)+) can backtrack exponentially"
                if _overlapping_branch(inner):
                    return "a repeated alternation whose branches can start alike (like (a|ab)*) can backtrack " \
                           "exponentially"
            why = _walk(inner)
            if why:
                return why
        elif op is _c.SUBPATTERN:
            why = _walk(_items(av[-1]))
            if why:
                return why
        elif op is _c.BRANCH:
            for alt in av[1]:
                why = _walk(_items(alt))
                if why:
                    return why
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            why = _walk(_items(av[1]))
            if why:
                return why
        # possessive repeats and atomic groups: no backtracking into them
    return None


def risky_regex(pattern: str) -> Optional[str]:
    """Why `pattern` could take exponential time on a hostile line, or None when its shape is safe.

    The pattern must already compile (``re.compile`` reports syntax errors better).
    """
    if len(pattern) > MAX_PATTERN:
        return "pattern of %d characters (at most %d)" % (len(pattern), MAX_PATTERN)
    try:
        parsed = _p.parse(pattern)
    except Exception:  # noqa: BLE001 - re.compile is where syntax errors are reported
        return None
    return _walk(_items(parsed))
