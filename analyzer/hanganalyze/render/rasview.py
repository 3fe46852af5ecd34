"""The report's "NCCL RAS" section: where the RAS evidence came from and what it says over time.

The verdict of the queries (``analyze/rasprogress.py``) is recomputed from ``Snapshot.nccl_ras``
(pure and cheap), so a snapshot JSON read back renders the same section.  The source is always
said: live queries with the address and the time of each, or the files read; one query is said
to give no time verdict.  Plain text out: each renderer escapes it its own way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

from hanganalyze.analyze.rasprogress import ras_progress
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.ncclras import RasSeries

TITLE = "NCCL RAS"
ONE_QUERY = "one RAS query: counts at one instant cannot tell stuck from slow"
#: The pace of a rank NCCL RAS calls slow: its counts say so whatever the stack samples caught.
SLOW_BY_RAS = "SLOW, not stuck (NCCL RAS: behind in every query, its own count moving)"
#: Communicator sentences shown; the JSON report has every query.
MAX_COMMS = 12
MAX_NAMES = 8


@dataclass(frozen=True)
class RasSection:
    source: str
    verdict: str
    lines: Tuple[str, ...]
    notes: Tuple[str, ...]


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t)) + ".%d" % int((t % 1) * 10)


def _source(s: RasSeries) -> str:
    qs = s.queries
    if s.live is not None:
        if not qs:
            return "live query of %s (no answer)" % s.live
        return "live quer%s of %s at %s UTC" % ("y" if len(qs) == 1 else "ies", s.live,
                                              ", ".join(_clock(q.time_s) if q.time_s is not None else "?"
                                                        for q in qs[:MAX_NAMES]) + (" ..." if len(qs) > MAX_NAMES
                                                                                   else ""))
    names = list(dict.fromkeys("%s%s" % (q.source or "?", " (%s)" % q.timestamp if q.timestamp else "")
                               for q in qs))
    more = " and %d more" % (len(names) - MAX_NAMES) if len(names) > MAX_NAMES else ""
    return "saved RAS output: %s%s" % (", ".join(names[:MAX_NAMES]), more)


def ras_section(snapshot: Snapshot) -> Optional[RasSection]:
    """The section, or None when the run has no RAS query and no RAS note."""
    s = snapshot.nccl_ras
    if s is None:
        return None
    if not s.queries:
        return RasSection(_source(s), "no NCCL RAS answer", (), tuple(s.notes))
    prog = ras_progress(s)
    lines = [c.sentence for c in prog.communicators[:MAX_COMMS]]
    if len(prog.communicators) > MAX_COMMS:
        lines.append("... %d more communicators (the JSON report has every query)" % (len(prog.communicators)
                                                                                     - MAX_COMMS))
    if prog.queries == 1:
        lines.append(ONE_QUERY)
    return RasSection(_source(s), prog.sentence, tuple(lines), tuple(prog.notes))


def ras_text_lines(snapshot: Snapshot) -> List[str]:
    """The section as lines of the text report (empty without RAS)."""
    sec = ras_section(snapshot)
    if sec is None:
        return []
    out = ["", TITLE, "  source: " + sec.source, "  " + sec.verdict]
    out.extend("  - " + line for line in sec.lines)
    out.extend("  note: " + n for n in sec.notes)
    return out
