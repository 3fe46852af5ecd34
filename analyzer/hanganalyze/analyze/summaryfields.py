"""Two compact fields of a node summary (written by ``render/node.py``, read by
``acquire/nodesummary.py``): sets of positions (ranks, processes) as range text, and a finding's
texts (title, fix, cause, references) named by signature id instead of repeated in every node's
summary (the root takes them from the signature database or the triage's constants).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.rules import load_rules
from hanganalyze.analyze.triage import SIGNATURE
from hanganalyze_gdbext.model.job import NodeGroup


def positions_text(positions: Iterable[int]) -> str:
    return compress_ranks(positions)


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


def named_texts(fd: Dict[str, Any], db, cache: Dict[str, Any]) -> List[str]:
    """The texts of a finding's dict that its signature gives (a summary names them in ``by_id``)."""
    texts = _texts(str(fd.get("signature")), db, cache)
    if not texts:
        return []
    return [k for k in BY_ID if k in texts and fd.get(k, _DEFAULTS[k]) == texts[k]]


def restore_texts(groups: Iterable[NodeGroup], db, cache: Dict[str, Any]) -> None:
    """Each group's finding gets back the texts its summary named by signature (``by_id``); a text
    whose signature the root does not know (another signature folder) stays out (the title falls
    back to the signature id)."""
    for g in groups:
        if not g.by_id:
            continue
        texts = _texts(str(g.finding.signature), db, cache) or {}
        for k in g.by_id:
            if k in BY_ID and texts.get(k) is not None:
                setattr(g.finding, k, list(texts[k]) if isinstance(texts[k], list) else texts[k])
        g.by_id = []
