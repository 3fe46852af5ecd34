"""Two compact fields of a node summary (``summary.py``): sets of positions (ranks, processes) as
range text, and a finding's texts (title, fix, cause, references) named by signature id instead of
repeated in every node's summary (the root takes them from the signature database or rule list).
"""

from __future__ import annotations

from array import array
from typing import Any, Dict, Iterable, Optional

from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.rules import load_rules
from hanganalyze.analyze.triage import SIGNATURE

# --------------------------------------------------------------------------------------------
# Position sets
# --------------------------------------------------------------------------------------------


def positions_text(positions: Iterable[int]) -> str:
    return compress_ranks(positions)


def parse_positions(text: Any, limit: int, offset: int = 0) -> array:
    """``"0-3,7"`` -> positions (plus ``offset``); a ValueError for anything else or a position >=
    ``limit``."""
    out = array("l")
    if not isinstance(text, str):
        raise ValueError("a position set must be a string, not %s" % type(text).__name__)
    if not text:
        return out
    for part in text.split(","):
        a, _, b = part.partition("-")
        lo, hi = int(a), int(b) if b else int(a)
        if not 0 <= lo <= hi < limit:
            raise ValueError("position set %r out of range (%d rows)" % (part[:40], limit))
        out.extend(range(lo + offset, hi + offset + 1))
    return out


# --------------------------------------------------------------------------------------------
# Capture: one node's summary from its analyzed snapshot
# --------------------------------------------------------------------------------------------


#: A finding's fixed texts: a summary names them (``"by_id"``) when they are those of its signature
#: (the signature database) or of the triage, and the root takes them from there.
BY_ID = ("title", "fix", "cause", "references")
_DEFAULTS = {"title": None, "fix": [], "cause": None, "references": []}


def _texts(sig: str, db, cache: Dict[str, Optional[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    if sig in cache:
        return cache[sig]

    out: Optional[Dict[str, Any]] = None
    if sig == SIGNATURE:
        out = {"cause": load_rules().by_id(SIGNATURE).cause}
    elif db is not None:
        s = db.by_id(sig)
        if s is not None:
            out = {"title": s.title, "fix": s.fix_lines(), "cause": s.cause, "references": list(s.references)}
    cache[sig] = out
    return out


def slim(fd: Dict[str, Any], db, cache: Dict[str, Any]) -> Dict[str, Any]:
    """The finding's dict without the texts its signature gives (named in ``by_id``)."""
    texts = _texts(str(fd.get("signature")), db, cache)
    if not texts:
        return fd
    dropped = [k for k in BY_ID if k in texts and fd.get(k, _DEFAULTS[k]) == texts[k]]
    if dropped:
        fd = {k: v for k, v in fd.items() if k not in dropped}
        fd["by_id"] = dropped
    return fd


def restore(fd: Dict[str, Any], db, cache: Dict[str, Any]) -> Dict[str, Any]:
    """``slim``'s inverse; a text whose signature the root does not know (another signature folder)
    stays out (the title falls back to the signature id)."""
    dropped = fd.get("by_id")
    if not dropped:
        return fd
    texts = _texts(str(fd.get("signature")), db, cache) or {}
    out = {k: v for k, v in fd.items() if k != "by_id"}
    for k in dropped:
        if k in BY_ID and texts.get(k) is not None:
            out[k] = list(texts[k]) if isinstance(texts[k], list) else texts[k]
    return out


