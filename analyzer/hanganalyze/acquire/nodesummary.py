"""Node summaries as an input: ``hanganalyze-node/1`` documents recognised, read and merged into one
Snapshot, which the job rules then analyze like any other (``pipeline.analyze``).

A job of 131,072 ranks cannot send every rank's stacks to one place.  Each node's capture
(``scripts/capture-node.sh``) therefore also writes a *node summary* (``hanganalyze --format node``,
written by ``render/node.py``): what the job verdict needs of each rank, and the node's merged call
tree, and nothing else.  Summaries merge into a summary (a second level: summaries of summaries),
and ``hanganalyze DIR`` over summaries gives the job report, with the same verdict and tree as
merging every rank's snapshot (``tests/unit/test_job_summary.py`` checks it, groupings included).
The document, compact for 131,072 ranks:

* ``processes``: one row per rank, in input order (``ROW``): rank, pid, where it is (an index into
  ``facts``, ``FACT``: state, op, call site, where, process group, flight-recorder source, evidence
  and its reason, sources), the thread and frame that say so, the flight-recorder sequence facts,
  the input error, the source kind, flags and the file its snapshot is in (relative to the
  summary's folder);
* ``progress``: per row (by position) how its thread moved over repeated samples;
* ``labels`` and ``stacks``: the merged call tree as its distinct normalized stacks (label ids,
  outermost first), each with the rows (a position set, ``"0-7"``) that have it and its thread
  count; the merge unions stacks, so it is associative;
* ``findings``: per-process findings grouped by (signature, severity): the first member's finding,
  the rule step it came from and its members; ``triage``: the triage groups (wait, blame frame);
  a finding's texts that its signature gives are named in ``by_id``, not repeated;
* ``nodes``: the machines summarised (name, ranks, rows), ``world_size``, ``warnings``, ``level``.

Reading keeps rows in input order (so process indices are those of the flat merge of the same
files in the same order), re-interns facts and labels, and unions stacks and finding groups.  The
Snapshot it gives has one process per row without stacks, carrying its ``rank_state`` (the model's
``JobRankState``), and ``Snapshot.node_summary`` (``model/job.py``'s ``NodeSummary``) with the
rest; its per-process findings are the groups' first findings, each holding for its members.
``fetch_examples`` reads one example rank per class back from the file its row names.

Approximations (documented, not part of the verdict): a per-process finding group keeps the first
member's text and evidence; the bucket id of a merged report is computed from the merged findings
and the example ranks only.
"""

from __future__ import annotations

import gc
import json
import os
from array import array
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from hanganalyze.acquire.snapshot_json import read_snapshot
from hanganalyze.errors import HangAnalyzeError, InputError
from hanganalyze_gdbext.model import Finding, Process, Snapshot, Thread, ThreadProgress
from hanganalyze_gdbext.model.job import ONE_SAMPLE_NOTE, JobRankState, NodeGroup, NodeSummary

SCHEMA = "hanganalyze-node/1"
#: Example ranks read back from their files for a merged report (one per class).
MAX_EXAMPLES = 64
#: Largest position or rank a summary may name (a crafted "0-99999999999" is refused).
MAX_POSITION = 1 << 24

#: Row fields, in order (``processes`` rows are lists: compact for 131,072 ranks): the rank state's
#: ``ROW_FIELDS`` (``model/job.py``) of the format's first version, the process's, then any later
#: ``ROW_FIELDS`` (``ROW_LATER``).
ROW = ("rank", "pid", "fact") + JobRankState.ROW_FIELDS[:6] + ("error", "source", "flags", "file")
ROW_LATER = JobRankState.ROW_FIELDS[6:]
#: Fact fields, in order (the part of a rank's state that many ranks share): ``FACT_FIELDS``; those
#: after the first version's nine are ``FACT_LATER``.
FACT = JobRankState.FACT_FIELDS
FACT_LATER = FACT[9:]
F_THREADS = 1  # the process had threads (it is in the call tree)
F_ONE_SAMPLE = 2  # its notes said "one sample (a core) ..."


def is_node_summary(path: Optional[str]) -> bool:
    """Whether the input at ``path`` is a node summary (a ``.json`` file whose schema says so)."""
    if not path or path == "-" or not str(path).endswith(".json"):
        return False
    try:
        with open(str(path), encoding="utf-8", errors="replace") as fh:
            head = fh.read(64).lstrip()
    except OSError:
        return False
    name = SCHEMA.split("/")[0]
    return head.startswith('{"schema":"%s' % name) or head.startswith('{"schema": "%s' % name)


def read_node_summaries(paths: Sequence[str]) -> Snapshot:
    """Summaries read one at a time (in the order given: ``hanganalyze DIR`` sorts them naturally)
    and merged into one Snapshot (see the module doc)."""
    m = _Merge()
    with _no_cycle_collection():
        for p in paths:
            try:
                m.add(_read_doc(p), base=os.path.dirname(p))
            except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
                raise InputError("%s: not a usable node summary: %s" % (p, e)) from None
        return m.snapshot()


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cycle collector paused while a merge builds its objects: 131,072 rows make millions of
    containers, none in a cycle (JSON documents, rows, processes and their states), and each full
    collection walks them all again (3.7 s of the root merge's 5.6 s of building them, measured)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def merge_node_documents(docs: Sequence[Dict[str, Any]]) -> Snapshot:
    """Summaries already parsed (tests, benchmarks), merged as ``read_node_summaries`` does."""
    m = _Merge()
    with _no_cycle_collection():
        for d in docs:
            m.add(d)
        return m.snapshot()


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


def _read_doc(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError("not a %s document" % SCHEMA)
    return doc


def _finding(fd: Dict[str, Any], members: Sequence[int], ranks: Sequence[Optional[int]]) -> NodeGroup:
    """A summary's finding as the analysis takes it: the one place a summary's finding is rebuilt.
    It holds for ``members`` (sorted, distinct), the first of them its ``process``; the texts its
    signature gives (``by_id``) stay for the analysis to fill."""
    f = Finding.from_dict({k: v for k, v in fd.items() if k != "by_id"})
    procs = sorted(set(members))
    f.process = procs[0] if procs else 0
    f.processes = procs
    seen: set = set()
    f.ranks = [r for r in (ranks[i] for i in procs) if r is not None and not (r in seen or seen.add(r))]
    return NodeGroup(finding=f, members=procs, by_id=[str(k) for k in fd.get("by_id") or []])


class _Merge:
    """Node summaries merged in order (``add``), then one Snapshot (``snapshot``)."""

    def __init__(self) -> None:
        self.level = 0
        self.nodes: List[Dict[str, Any]] = []
        self.world: Optional[int] = None
        self.warnings: List[str] = []
        self.facts: List[list] = []
        self._fact_ids: Dict[str, int] = {}
        self.rows: List[list] = []
        self.progress: Dict[int, Dict[str, Any]] = {}
        self.labels: List[Tuple[str, str]] = []
        self._label_ids: Dict[Tuple[str, str], int] = {}
        self.stacks: Dict[Tuple[int, ...], list] = {}  # seq -> [positions, threads]
        self.groups: Dict[Tuple[str, str], list] = {}  # key -> [step, finding, positions]
        self.triage: Dict[Tuple[Any, ...], list] = {}  # key -> [finding, positions]
        self._recent: Dict[str, list] = {}  # recent (list, ids) of ``_mapping``
        self.bases: List[Tuple[int, str]] = []  # (first row, folder) of summaries read from files

    def add(self, doc: Dict[str, Any], base: str = "") -> None:
        """Append one summary (rows after the rows so far).  ``base``: the folder the summary was
        read from (a row's relative file is relative to it; capture writes absolute ones)."""
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError("not a %s document" % SCHEMA)
        off = len(self.rows)
        rows = doc["processes"]
        n = len(rows)
        self.level = max(self.level, int(doc.get("level") or 1))
        self.nodes.extend(dict(x, first=int(x.get("first", 0)) + off) for x in doc.get("nodes") or [])
        ws = doc.get("world_size")
        if isinstance(ws, int) and not isinstance(ws, bool) and 0 < ws < MAX_POSITION:
            self.world = ws if self.world is None else max(self.world, ws)
        self.warnings.extend(str(w) for w in doc.get("warnings") or [])
        fmap = self._mapping("facts", doc["facts"], self._fact_id)
        for r in rows:
            if not isinstance(r, list) or len(r) < len(ROW):  # longer: a later version's (ROW_LATER)
                raise ValueError("a process row must be a list of at least %d values" % len(ROW))
            r = list(r)
            r[2] = fmap[r[2]]
            self.rows.append(r)
        if n:
            self.bases.append((off, base))  # relative files resolved when read (``NodeSummary.file_of``)
        for k, v in (doc.get("progress") or {}).items():
            i = int(k)
            if not 0 <= i < n:
                raise ValueError("progress of row %d: no such row" % i)
            self.progress[i + off] = v
        lmap = self._mapping("labels", doc["labels"], self._label_id)
        for seq, members, threads in doc["stacks"]:
            gseq = tuple(map(lmap.__getitem__, seq))
            pos = parse_positions(members, n, off)
            e = self.stacks.get(gseq)
            if e is None:
                self.stacks[gseq] = [pos, int(threads)]
            else:
                e[0].extend(pos)
                e[1] += int(threads)
        for g in doc.get("findings") or []:
            key = (str(g["key"][0]), str(g["key"][1]))
            pos = parse_positions(g["members"], n, off)
            e = self.groups.get(key)
            if e is None:
                self.groups[key] = [int(g.get("step") or 0), g["finding"], pos]
            else:
                e[2].extend(pos)
        for g in doc.get("triage") or []:
            key = tuple(g["key"])
            pos = parse_positions(g["members"], n, off)
            e = self.triage.get(key)
            if e is None:
                self.triage[key] = [g["finding"], pos]
            else:
                e[1].extend(pos)

    def _mapping(self, what: str, items: list, intern) -> List[int]:
        """Each item's global id (``intern``); a summary whose list equals a recent one's (nodes of
        one job mostly hold the same labels and facts) reuses that mapping: lists compare in C,
        where interning hashes every string again."""
        recent = self._recent.setdefault(what, [])
        for old, ids in recent:
            if old == items:
                return ids
        ids = [intern(x) for x in items]
        recent.insert(0, (items, ids))
        del recent[4:]
        return ids

    def _fact_id(self, fact: Any) -> int:
        if not isinstance(fact, list) or len(fact) < 9:  # a summary before FACT_LATER has nine
            raise ValueError("a fact must be a list of at least 9 values")
        k = json.dumps(fact)
        fi = self._fact_ids.get(k)
        if fi is None:
            fi = self._fact_ids[k] = len(self.facts)
            self.facts.append(fact)
        return fi

    def _label_id(self, lab: Any) -> int:
        key = (str(lab[0]), str(lab[1]))
        li = self._label_ids.get(key)
        if li is None:
            li = self._label_ids[key] = len(self.labels)
            self.labels.append(key)
        return li

    def snapshot(self) -> Snapshot:
        """One process per row (no stacks; its state, error, notes and the progress of the thread
        that says where it is), the groups' findings in rule-step order, and the NodeSummary."""
        # the fields of the format's first version by name (131,072 ranks: one call each), the later
        # ones (FACT_LATER, ROW_LATER) by the model's lists: a new rank fact needs no code here
        facts = [(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], list(f[8] or []),
                  list(zip(FACT_LATER, f[9:len(FACT)]))) for f in self.facts]
        procs: List[Process] = []
        for i, r in enumerate(self.rows):
            (state, op, call_site, where, pg, fr_source, evidence, evidence_reason, sources, later) = facts[r[2]]
            st = JobRankState(process=i, rank=r[0], state=state, op=op, call_site=call_site, where=where, seq=r[5],
                              evidence=evidence, evidence_reason=evidence_reason, sources=sources, thread=r[3],
                              frame=r[4], pg=pg, fr_completed=r[6], last_enqueued=r[7], last_completed=r[8],
                              pid=r[1], fr_source=fr_source)
            for k, v in later + list(zip(ROW_LATER, r[len(ROW):])) if ROW_LATER or later else ():
                setattr(st, k, v)
            p = Process(source=r[10] or "core", pid=r[1], rank=r[0], error=r[9], rank_state=st,
                        notes=[ONE_SAMPLE_NOTE] if r[11] & F_ONE_SAMPLE else [])
            prog = self.progress.get(i)
            if prog is not None:
                p.threads = [Thread(tid=r[3], progress=ThreadProgress.from_dict(prog))]
            procs.append(p)
        ranks = [r[0] for r in self.rows]
        groups = []
        for step, fd, members in sorted(self.groups.values(), key=lambda e: e[0]):  # stable within a step
            g = _finding(fd, members, ranks)
            g.step = step
            groups.append(g)
        summary = NodeSummary(
            level=self.level, nodes=self.nodes, world_size=self.world, warnings=list(self.warnings),
            labels=self.labels, stacks=self.stacks, live=[i for i, r in enumerate(self.rows) if r[11] & F_THREADS],
            files=[r[12] for r in self.rows], bases=self.bases, groups=groups,
            triage=[_finding(fd, members, ranks) for fd, members in self.triage.values()])
        return Snapshot(processes=procs, findings=[g.finding for g in groups], warnings=list(self.warnings),
                        node_summary=summary)


def fetch_examples(snap: Snapshot, limit: int = MAX_EXAMPLES) -> None:
    """Each class's first rank of a snapshot read from summaries, read back from the file its row
    names (when reachable): the report shows its stacks; the others stay rows without stacks."""
    summary = snap.node_summary
    if summary is None or snap.job is None:
        return
    for c in snap.job.classes[:limit]:
        i = c.processes[0]
        path = summary.file_of(i)
        if not path or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                got = read_snapshot(fh.read())
        except (OSError, HangAnalyzeError):
            continue
        row = snap.processes[i]
        want = row.rank
        p = next((x for x in got.processes if x.rank == want), got.processes[0] if got.processes else None)
        if p is None:
            continue
        p.rank, p.pid = want, row.pid if row.pid is not None else p.pid
        p.label = p.label or ("rank %d" % want if want is not None else None)
        p.notes = list(p.notes) + ["stacks read from %s (the class's example rank)" % path]
        p.rank_state = row.rank_state
        snap.processes[i] = p
