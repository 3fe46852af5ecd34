"""The analysis steps in order, as pure functions of a Snapshot (no I/O, no gdb).

acquire (elsewhere) -> wait-for graph -> signature matching -> bucket id -> render (elsewhere).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, List

from hanganalyze import __version__
from hanganalyze.gdbext.model import SEVERITIES, Snapshot


def load_signature_db(extra_dirs: Iterable[Path] = (), use_cache: bool = True):
    """Built-in signatures plus user folders; raises SignatureError on an invalid file.  The cache
    (see ``analyze/signatures.py``) only skips the parsing of files validated before."""
    from hanganalyze.analyze.signatures import load_signatures

    return load_signatures(list(extra_dirs), use_cache=use_cache)


def analyze(snapshot: Snapshot, db) -> Snapshot:
    """Fill findings, wait-for graphs and the bucket id of a freshly acquired snapshot."""
    from hanganalyze.analyze.bucket import bucket_id
    from hanganalyze.analyze.job import CROSS_RANK, analyze_job, join_flight_recorder
    from hanganalyze.analyze.match import match_snapshot
    from hanganalyze.analyze.waitfor import annotate_waitgraphs, cycle_findings

    join_flight_recorder(snapshot)  # changes process indices: before anything refers to them
    annotate_waitgraphs(snapshot)
    snapshot.findings = cycle_findings(snapshot) + match_snapshot(snapshot, db)
    analyze_job(snapshot)  # several ranks: cross-rank findings, per-rank ones grouped
    order = {s: i for i, s in enumerate(SEVERITIES)}
    # within a severity, the cross-rank diagnosis (who is at fault) comes before what each rank shows
    snapshot.findings.sort(key=lambda f: (order.get(f.severity, len(order)), f.signature not in CROSS_RANK,
                                          -(f.confidence or 0.0)))
    snapshot.bucket = bucket_id(snapshot)
    snapshot.tool = {"name": "hanganalyze", "version": __version__}
    return snapshot


def analyze_many(snapshots: List[Snapshot], db) -> Snapshot:
    """Several acquired snapshots (one per rank, say) analyzed as one job."""
    merged = Snapshot()
    for snap in snapshots:
        merged.processes.extend(snap.processes)
        merged.warnings.extend(snap.warnings)
    return analyze(merged, db)
