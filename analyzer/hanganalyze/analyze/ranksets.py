"""Rank sets: ``[0, 1, 2, 3, 5]`` <-> ``"0-3,5"``, the way MPI tools and STAT print them, and the
bitsets the call tree builds them from.

A 4,096-rank job whose ranks all do the same thing must take a few characters, not 20 KB; and a
rank set read back from a snapshot file may have been written by anyone, so reading one is bounded.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Sequence, Tuple

from hanganalyze_gdbext.model import Process

#: Largest number of ranks ``expand_ranks`` agrees to produce: a rank set comes from JSON that a
#: stranger may have written, and ``"0-999999999999"`` must not eat the machine's memory.
MAX_EXPAND = 1 << 22

_RUN_OF_ONES = re.compile("1+")


def compress_ranks(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5, 7, 8, 9]`` -> ``"0-3,5,7-9"``: the way MPI tools and STAT print rank sets.

    4,096 ranks that all do the same thing must take a few characters, not 20 KB.  Duplicates and
    order do not matter; one pass after the sort.  Negative numbers are refused, because ``-3``
    could not be told from a range."""
    items = sorted(set(ranks))
    if not items:
        return ""
    if items[0] < 0:
        raise ValueError("negative rank %d" % items[0])
    out: List[str] = []
    start = prev = items[0]
    for r in items[1:]:
        if r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else "%d-%d" % (start, prev))
        start = prev = r
    out.append(str(start) if start == prev else "%d-%d" % (start, prev))
    return ",".join(out)


def expand_ranks(text: str, limit: int = MAX_EXPAND) -> List[int]:
    """The inverse of ``compress_ranks``: ``"0-3,5"`` -> ``[0, 1, 2, 3, 5]`` (sorted, unique).

    The text may come from a snapshot file written by anyone, so it is bounded: more than
    ``limit`` ranks in all, a descending range or anything but digits, ``-`` and ``,`` (spaces
    allowed) is a ValueError, never a memory blow-up."""
    if not isinstance(text, str):
        raise ValueError("rank set must be a string, not %s" % type(text).__name__)
    text = text.strip()
    if not text:
        return []
    spans: List[Tuple[int, int]] = []
    total = 0
    for part in text.split(","):
        part = part.strip()
        lo_s, sep, hi_s = part.partition("-")
        lo_s, hi_s = lo_s.strip(), hi_s.strip()
        if not lo_s.isdigit() or (sep and not hi_s.isdigit()) or len(lo_s) > 12 or len(hi_s) > 12:
            raise ValueError("bad rank range %r" % part[:40])
        lo = int(lo_s)
        hi = int(hi_s) if sep else lo
        if hi < lo:
            raise ValueError("descending rank range %r" % part[:40])
        total += hi - lo + 1
        if total > limit:
            raise ValueError("rank set %r has more than %d ranks" % (text[:40], limit))
        spans.append((lo, hi))
    out = set()
    for lo, hi in spans:
        out.update(range(lo, hi + 1))
    return sorted(out)


def default_keys(processes: Sequence[Process]) -> List[int]:
    """The job key of each process: its rank, else its index (then the renderers show ``p<index>``)."""
    return [p.rank if p.rank is not None else i for i, p in enumerate(processes)]


class RankBits:
    """Bitset over dense key positions -> (``"0-3,5"``, count), memoised per distinct set."""

    def __init__(self, sorted_keys: List[int]) -> None:
        self.keys = sorted_keys
        self.memo: Dict[int, Tuple[str, int]] = {}

    def keys_of(self, bits: int) -> List[int]:
        s = bin(bits)[:1:-1]  # bit i at index i
        keys = self.keys
        out: List[int] = []
        for m in _RUN_OF_ONES.finditer(s):
            out.extend(keys[m.start():m.end()])
        return out

    def text(self, bits: int) -> Tuple[str, int]:
        hit = self.memo.get(bits)
        if hit is None:
            keys = self.keys_of(bits)
            hit = self.memo[bits] = (compress_ranks(keys), len(keys))
        return hit
