"""The analysis steps in order, as pure functions of a Snapshot (no I/O, no gdb).

acquire (elsewhere) -> wait-for graph -> signature matching -> bucket id -> render (elsewhere).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from hanganalyze import __version__
from hanganalyze.gdbext.model import SEVERITIES, Snapshot


def load_signature_db(extra_dirs: Iterable[Path] = (), use_cache: bool = True):
    """Built-in signatures plus user folders; raises SignatureError on an invalid file.  The cache
    (see ``analyse/signatures.py``) only skips the parsing of files validated before."""
    from hanganalyze.analyse.signatures import load_signatures

    return load_signatures(list(extra_dirs), use_cache=use_cache)


def analyse(snapshot: Snapshot, db) -> Snapshot:
    """Fill findings, wait-for graphs and the bucket id of a freshly acquired snapshot."""
    from hanganalyze.analyse.bucket import bucket_id
    from hanganalyze.analyse.match import match_snapshot
    from hanganalyze.analyse.waitfor import annotate_waitgraphs, cycle_findings

    annotate_waitgraphs(snapshot)
    findings = cycle_findings(snapshot) + match_snapshot(snapshot, db)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: (order.get(f.severity, len(order)), -(f.confidence or 0.0)))
    snapshot.findings = findings
    snapshot.bucket = bucket_id(snapshot)
    snapshot.tool = {"name": "hanganalyze", "version": __version__}
    return snapshot
