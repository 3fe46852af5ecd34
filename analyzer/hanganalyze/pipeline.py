"""The analysis steps in order, as functions of a Snapshot (no gdb, no output):

acquire (``acquire/request.py``) -> wait-for graph -> the rules (the objects of
``analyze/registry.py``, in the order of ``signatures/rules/rules.yaml``: per process the wait-for
cycles, asyncio and the signature database, then the job rules, then the triage) -> bucket id ->
redaction -> render (``render/``, written by ``output.py``).

``report`` is one run's whole path up to rendering: the request's inputs acquired while the
signature database loads in a thread, then ``analyze``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

from hanganalyze import __version__
from hanganalyze_gdbext.model import SEVERITIES, Snapshot


def load_signature_db(extra_dirs: Iterable[Path] = (), use_cache: bool = True):
    """Built-in signatures plus user folders; raises SignatureError on an invalid file.  The cache
    (see ``analyze/signatures.py``) only skips the parsing of files validated before."""
    from hanganalyze.analyze.signatures import load_signatures  # on first use (start-up time)

    return load_signatures(list(extra_dirs), use_cache=use_cache)


def analyze(snapshot: Snapshot, db, redact: bool = False, node_summary: bool = False,
            keep_secrets: bool = False) -> Snapshot:
    """Fill findings, wait-for graphs and the bucket id of a freshly acquired snapshot; with
    ``redact``, the result has user names, hosts, IPs and secrets replaced (``analyze/redact.py``);
    with ``node_summary``, the per-rank facts of a node summary are kept for ``--format node``
    (``analyze/nodecapture.py``).  Secret-shaped values are always scrubbed (``analyze/scrub.py``)
    unless ``keep_secrets`` (``--no-redact``).  A snapshot read from node summaries (``acquire/nodesummary.py``)
    has its per-process findings, rank states and triage groups already: the job rules, the order
    and the triage run on them as on any other."""
    from hanganalyze.analyze.bucket import bucket_id  # on first use (start-up time)
    from hanganalyze.analyze.job import analyze_job  # on first use (start-up time)
    from hanganalyze.analyze.registry import run_report_rules  # on first use (start-up time)
    from hanganalyze.analyze.rules import load_rules  # on first use (start-up time)

    rules = load_rules()
    merged = snapshot.node_summary is not None and snapshot.node_summary.level > 0
    if merged:
        from hanganalyze.analyze.summaryfields import restore_texts  # on first use (start-up time)

        cache: dict = {}
        restore_texts(snapshot.node_summary.groups, db, cache)  # the texts a summary names by signature
        restore_texts(snapshot.node_summary.triage, db, cache)
    else:
        _process_rules(snapshot, db, rules, node_summary)
    analyze_job(snapshot, rules)  # the job rules: cross-rank findings, per-rank ones grouped
    order = {s: i for i, s in enumerate(SEVERITIES)}
    cross_rank = rules.cross_rank
    # within a severity, the cross-rank diagnosis (who is at fault) comes before what each rank shows
    snapshot.findings.sort(key=lambda f: (order.get(f.severity, len(order)), f.signature not in cross_rank,
                                          -(f.confidence or 0.0)))
    run_report_rules(snapshot)  # the triage, always an answer: the wait, the blame frame, the next step
    if merged:  # one example rank per class, read back from its file (its stacks in the report)
        from hanganalyze.acquire.nodesummary import fetch_examples  # node summaries only (start-up time)

        fetch_examples(snapshot)
    snapshot.bucket = bucket_id(snapshot)
    snapshot.tool = {"name": "hanganalyze", "version": __version__}
    from hanganalyze.analyze.scrub import scrub  # on first use (start-up time)

    scrub(snapshot, keep=keep_secrets)  # after matching and the bucket id: they see the same text either way
    if redact:  # after matching: signatures see the real paths and messages, the report does not
        from hanganalyze.analyze.redact import redact as redacted  # on first use (start-up time)

        snapshot = redacted(snapshot)
    return snapshot


def _process_rules(snapshot: Snapshot, db, rules, node_summary: bool) -> None:
    """The per-process half of ``analyze``: the processes joined by rank, the wait-for graphs, the
    per-process rules in the rule list's order, the samples' gate, and the node summary's capture
    (before the job rules group and supersede what they found)."""
    from hanganalyze.analyze.intern import intern_snapshot  # on first use (start-up time)
    from hanganalyze.analyze.job import join_flight_recorder  # on first use (start-up time)
    from hanganalyze.analyze.progress import gate_findings  # on first use (start-up time)
    from hanganalyze.analyze.registry import run_process_rules  # on first use (start-up time)
    from hanganalyze.analyze.waitfor import annotate_waitgraphs  # on first use (start-up time)

    join_flight_recorder(snapshot)  # changes process indices: before anything refers to them
    intern_snapshot(snapshot)  # equal stacks share one list of frames: work once per distinct stack
    annotate_waitgraphs(snapshot)
    step_of: Dict[int, int] = {}
    snapshot.findings = run_process_rules(snapshot, db, rules, step_of if node_summary else None)
    gate_findings(snapshot)  # repeated samples: a wait holds only where its thread held (progress.py)
    if node_summary:  # before the job rules group and supersede the per-process findings
        from hanganalyze.analyze.nodecapture import capture  # on first use (start-up time)

        capture(snapshot, step_of, db)


def analyze_many(snapshots: List[Snapshot], db) -> Snapshot:
    """Several acquired snapshots (one per rank, say) analyzed as one job."""
    from hanganalyze_gdbext.model.stacktable import set_table  # on first use (start-up time)

    merged = Snapshot()
    for snap in snapshots:
        merged.processes.extend(snap.processes)
        merged.warnings.extend(snap.warnings)
    tables = {id(t): t for t in (s.stack_table for s in snapshots) if t is not None}
    if len(tables) == 1:  # interned as they came in (one table): not hashed again
        set_table(merged, next(iter(tables.values())))
    return analyze(merged, db)


class BackgroundLoad:
    """The signature database, loaded in a thread once ``start()`` is called, or at the latest in
    ``result()``.  The driver calls ``start`` once gdb has all its work queued: from then on this
    process only waits for gdb, so the load (CPU-bound, above all a full validation) takes the GIL
    from nobody, where starting it earlier slowed the core-notes reading."""

    def __init__(self, extra_dirs: List[Path]) -> None:
        self._dirs = extra_dirs
        self._result: dict = {}
        self._thread = None

    def _work(self) -> None:
        try:
            self._result["db"] = load_signature_db(self._dirs)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread as is
            self._result["error"] = e

    def start(self) -> None:
        if self._thread is None:
            import threading  # only when the database loads in the background

            self._thread = threading.Thread(target=self._work, name="load-signatures", daemon=True)
            self._thread.start()

    def result(self):
        self.start()
        self._thread.join()
        if "error" in self._result:
            raise self._result["error"]
        return self._result["db"]


def report(request, signature_dirs: Iterable[Path] = (), redact: bool = False,
           progress: Optional[Callable[[str], None]] = None, node_summary: bool = False,
           keep_secrets: bool = False) -> Snapshot:
    """One run up to rendering: every input of ``request`` (an ``acquire.request.AcquireRequest``,
    prepared) acquired, then analyzed, and redacted when asked.  When every input is a node summary
    (``acquire/nodesummary.py``), they are read and merged instead, then analyzed the same way: the
    job's verdict from its nodes' summaries."""
    paths = [inp.path for inp in getattr(request, "inputs", None) or []]
    nodes: List[str] = []
    if any(p and str(p).endswith(".json") for p in paths):  # only a .json input can be a node summary
        from hanganalyze.acquire import nodesummary  # not for a live process (start-up time, issue 21)

        nodes = [str(p) for p in paths if nodesummary.is_node_summary(p)]
    if nodes:
        if progress:
            progress("merging %d node summaries" % len(nodes))
        merged = nodesummary.read_node_summaries(nodes)
        if node_summary:  # a summary of summaries: written as read, nothing to analyze
            return merged
        by_id = any(g.by_id for g in merged.node_summary.groups + merged.node_summary.triage)
        return analyze(merged, load_signature_db(list(signature_dirs)) if by_id else None, redact=redact,
                       keep_secrets=keep_secrets)
    db_load = BackgroundLoad(list(signature_dirs))
    snapshot = request.acquire(progress, db_load.start)
    db = db_load.result()
    if progress:
        progress("matching %d thread(s) against signatures" % sum(len(p.threads) for p in snapshot.processes))
    return analyze(snapshot, db, redact=redact, node_summary=node_summary, keep_secrets=keep_secrets)
