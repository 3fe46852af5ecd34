"""Node summaries: the job view of one machine, mergeable into the job view of the whole cluster.

A job of 131,072 ranks cannot send every rank's stacks to one place.  Each node's capture
(``scripts/capture-node.sh``) therefore also writes a *node summary* (``hanganalyze --format node``,
schema ``hanganalyze-node/1``): what the job verdict needs of each rank, and the node's merged call
tree, and nothing else.  Summaries merge into a summary (a second level: summaries of summaries),
and ``hanganalyze DIR`` over summaries gives the job report, with the same verdict and tree as
merging every rank's snapshot (``tests/unit/test_job_summary.py`` checks it, groupings included):

* ``processes``: one row per rank, in input order: rank, pid, where it is (an index into ``facts``:
  state, op, call site, where, process group, flight-recorder source, evidence and its reason,
  sources), the thread and frame that say so, the flight-recorder sequence facts, the input error,
  the source kind, flags and the file its snapshot is in (relative to the summary's folder);
* ``progress``: per row (by position) how its thread moved over repeated samples;
* ``labels`` and ``stacks``: the merged call tree as its distinct normalized stacks (label ids,
  outermost first), each with the rows (a position set, ``"0-7"``) that have it and its thread
  count.  ``tree_of(doc)`` gives the nested tree; the merge unions stacks, so it is associative;
* ``findings``: per-process findings grouped by (signature, severity): the first member's finding,
  the rule step it came from and its members; ``triage``: the triage groups (wait, blame frame);
* ``nodes``: the machines summarised (name, ranks, rows), ``world_size``, ``warnings``, ``level``.

The merge keeps rows in input order (so process indices are those of the flat merge of the same
files in the same order), re-interns facts and labels, and unions stacks and finding groups.  The
job rules then run once, at the root, on the rank states rebuilt from the rows
(``Merged.analyze``).  Rank stacks are not in a summary: the report shows one example rank per
class, read on demand from the file its row names (when that file is reachable).

Approximations (documented, not part of the verdict): a per-process finding group keeps the first
member's text and evidence; the bucket id of a merged report is computed from the merged findings
and the example ranks only.
"""

from __future__ import annotations

import json
import os
from collections import Counter, OrderedDict
from dataclasses import replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from hanganalyze.analyze.summaryfields import parse_positions, positions_text, restore, slim
from hanganalyze_gdbext.model import Finding, Process, Snapshot, Thread, ThreadProgress

SCHEMA = "hanganalyze-node/1"
#: Example ranks read back from their files for a merged report (one per class).
MAX_EXAMPLES = 64
#: Largest position or rank a summary may name (a crafted "0-99999999999" is refused).
MAX_POSITION = 1 << 24

#: Row fields, in order (``processes`` rows are lists: compact for 131,072 ranks).
ROW = ("rank", "pid", "fact", "thread", "frame", "seq", "fr_completed", "last_enqueued", "last_completed",
       "error", "source", "flags", "file")
_FACT = ("state", "op", "call_site", "where", "pg", "fr_source", "evidence", "evidence_reason", "sources")
F_THREADS = 1  # the process had threads (it is in the call tree)
F_ONE_SAMPLE = 2  # its notes said "one sample (a core) ..."


def _group(findings: Sequence[Finding], step_of: Dict[int, int], db=None) -> List[Dict[str, Any]]:
    groups: OrderedDict[Tuple[str, str], Dict[str, Any]] = OrderedDict()
    cache: Dict[str, Any] = {}
    for f in findings:
        g = groups.get((f.signature, f.severity))
        if g is None:
            groups[(f.signature, f.severity)] = {"step": step_of.get(id(f), 0), "key": [f.signature, f.severity],
                                                 "finding": slim(f.to_dict(), db, cache), "members": [f.process]}
        elif f.process not in g["members"]:
            g["members"].append(f.process)
    return list(groups.values())


def capture(snapshot: Snapshot, step_of: Dict[int, int], db=None) -> None:
    """Called by ``pipeline.analyze(node_summary=True)`` once the per-process findings are made
    (before the job rules group them): the node summary, kept on the snapshot for ``render_node``."""
    from hanganalyze.analyze.job import world_size
    from hanganalyze.analyze.progress import ONE_SAMPLE_NOTE, thread_progress
    from hanganalyze.analyze.rankjoin import source_kind
    from hanganalyze.analyze.rankstate import rank_state
    from hanganalyze.analyze.stacks import Stacks, scan_threads
    from hanganalyze.analyze.triage import triage_process

    procs = snapshot.processes
    if len(procs) == 1 and procs[0].rank is not None and not procs[0].sources:
        procs[0].sources = [source_kind(procs[0])]  # as joining it with other ranks would say
    facts: Dict[str, int] = {}
    rows: List[list] = []
    progress: Dict[str, Any] = {}
    stacks = Stacks()
    agg: OrderedDict[int, list] = OrderedDict()
    rank_memo: Dict[tuple, tuple] = {}
    for i, p in enumerate(procs):
        s = rank_state(i, p, rank_memo)
        fact = (s.state, s.op, s.call_site, s.where, s.pg, s.fr_source, s.evidence, s.evidence_reason,
                list(s.sources or []))
        fi = facts.setdefault(json.dumps(fact), len(facts))
        flags = (F_THREADS if p.threads else 0) | (F_ONE_SAMPLE if ONE_SAMPLE_NOTE in p.notes else 0)
        rows.append([s.rank, s.pid, fi, s.thread, s.frame, s.seq, s.fr_completed, s.last_enqueued, s.last_completed,
                     p.error, p.source, flags, p.input_file])
        prog = thread_progress(p, s.thread)
        if prog is not None:
            progress[str(i)] = prog.to_dict()
        if p.threads:
            sel, _ = scan_threads(p, "all", stacks, False)
            for sid in sel:
                e = agg.get(sid)
                if e is None:
                    agg[sid] = [[i], 1]
                else:
                    if e[0][-1] != i:
                        e[0].append(i)
                    e[1] += 1
    triage: OrderedDict[tuple, Dict[str, Any]] = OrderedDict()
    memo: Dict[tuple, tuple] = {}
    for i, p in enumerate(procs):
        f = triage_process(i, p, memo)
        if f is None:
            continue
        key = (f.triage.wait, f.triage.blame)  # type: ignore[union-attr]
        if key in triage:
            triage[key]["members"].append(i)
        else:
            triage[key] = {"key": list(key), "finding": f.to_dict(), "members": [i]}
    hosts = sorted({p.dist.host for p in procs if p.dist is not None and p.dist.host})
    doc = {
        "schema": SCHEMA, "level": 1,
        "nodes": [{"name": ",".join(hosts) or os.uname().nodename, "rows": len(procs),
                   "ranks": positions_text(sorted(p.rank for p in procs if p.rank is not None))}],
        "world_size": world_size(procs),
        "warnings": list(snapshot.warnings),
        "facts": [json.loads(k) for k in facts],
        "processes": rows,
        "progress": progress,
        "labels": [[lab, kind] for lab, kind in zip(stacks.labels, stacks.kinds)],
        "stacks": [[list(stacks.seqs[sid]), positions_text(e[0]), e[1]] for sid, e in agg.items()],
        "findings": [dict(g, members=positions_text(g["members"])) for g in _group(snapshot.findings, step_of, db)],
        "triage": [dict(g, finding=slim(g["finding"], db, {}), members=positions_text(g["members"]))
                   for g in triage.values()],
    }
    snapshot.__dict__["_node_summary"] = doc


def render_node(snapshot: Snapshot) -> str:
    """``--format node``: the node summary of an analyzed snapshot (or of merged summaries)."""
    doc = snapshot.__dict__.get("_node_summary")
    if doc is None:
        raise ValueError("no node summary: the snapshot was not analyzed with node_summary=True")
    return json.dumps(doc, separators=(",", ":")) + "\n"


# --------------------------------------------------------------------------------------------
# Merge
# --------------------------------------------------------------------------------------------


def looks_like_node_summary(head: str) -> bool:
    return head.lstrip().startswith('{"schema":"%s' % SCHEMA.split("/")[0]) or \
        head.lstrip().startswith('{"schema": "%s' % SCHEMA.split("/")[0])


def node_inputs(paths: Sequence[Optional[str]]) -> List[str]:
    """The node summaries among the inputs (a folder where ``capture-node.sh`` wrote rank
    snapshots and each node's summary: the summaries stand for the rank files), else []."""
    out = []
    for p in paths:
        if not p or p == "-" or not str(p).endswith(".json"):
            continue
        try:
            with open(str(p), encoding="utf-8", errors="replace") as fh:
                head = fh.read(64)
        except OSError:
            continue
        if looks_like_node_summary(head):
            out.append(str(p))
    return out


class Merged:
    """Node summaries merged in order (``add``); ``to_doc`` is their summary (a summary of
    summaries), ``analyze`` the job's report."""

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
        self.stacks: OrderedDict[Tuple[int, ...], list] = OrderedDict()  # seq -> [positions, threads]
        self.groups: OrderedDict[Tuple[str, str], list] = OrderedDict()  # key -> [step, finding, positions]
        self.triage: OrderedDict[Tuple[Any, Any], list] = OrderedDict()  # key -> [finding, positions]
        self._recent: Dict[str, list] = {}  # recent (list, ids) of ``_mapping``
        self.by_id = False  # some finding's texts are named by its signature (``slim``)
        self._bases: List[Tuple[int, str]] = []  # (first row, folder) of summaries whose files are relative

    # ----- reading -------------------------------------------------------------------------
    def add(self, doc: Dict[str, Any], base: str = "") -> Merged:
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
            if not isinstance(r, list) or len(r) != len(ROW):
                raise ValueError("a process row must be a list of %d values" % len(ROW))
            r = list(r)
            r[2] = fmap[r[2]]
            self.rows.append(r)
        if n:
            self._bases.append((off, base))  # relative files resolved when read (``example_file``)
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
            self.by_id = self.by_id or "by_id" in g["finding"]
            e = self.groups.get(key)
            if e is None:
                self.groups[key] = [int(g.get("step") or 0), g["finding"], pos]
            else:
                e[2].extend(pos)
        for g in doc.get("triage") or []:
            key = tuple(g["key"])
            pos = parse_positions(g["members"], n, off)
            self.by_id = self.by_id or "by_id" in g["finding"]
            e = self.triage.get(key)
            if e is None:
                self.triage[key] = [g["finding"], pos]
            else:
                e[1].extend(pos)
        return self

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
        if not isinstance(fact, list) or len(fact) != len(_FACT):
            raise ValueError("a fact must be a list of %d values" % len(_FACT))
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

    # ----- writing -------------------------------------------------------------------------
    def to_doc(self) -> Dict[str, Any]:
        """The merged summary: itself mergeable (``level`` one more than its inputs')."""
        groups = sorted(self.groups.items(), key=lambda kv: kv[1][0])  # stable: first appearance within a step
        return {
            "schema": SCHEMA, "level": self.level + 1, "nodes": self.nodes, "world_size": self.world,
            "warnings": self.warnings, "facts": self.facts,
            "processes": [r if not r[12] or self.example_file(i) == r[12] else r[:12] + [self.example_file(i)]
                          for i, r in enumerate(self.rows)] if any(b for _, b in self._bases) else self.rows,
            "progress": {str(k): v for k, v in self.progress.items()},
            "labels": [list(x) for x in self.labels],
            "stacks": [[list(seq), positions_text(sorted(e[0])), e[1]] for seq, e in self.stacks.items()],
            "findings": [{"step": e[0], "key": list(k), "finding": e[1], "members": positions_text(e[2])}
                         for k, e in groups],
            "triage": [{"key": list(k), "finding": e[0], "members": positions_text(e[1])}
                       for k, e in self.triage.items()],
        }

    def to_doc_snapshot(self) -> Snapshot:
        """A Snapshot that ``render(..., "node")`` writes as this merged summary."""
        snap = Snapshot()
        snap.__dict__["_node_summary"] = self.to_doc()
        return snap

    # ----- the job's verdict ---------------------------------------------------------------
    def states(self) -> list:
        from hanganalyze.analyze.rankstate import RankState

        out = []
        for i, r in enumerate(self.rows):
            f = self.facts[r[2]]
            out.append(RankState(process=i, rank=r[0], state=f[0], op=f[1], call_site=f[2], where=f[3], thread=r[3],
                                 frame=r[4], seq=r[5], pg=f[4], fr_completed=r[6], last_enqueued=r[7],
                                 last_completed=r[8], pid=r[1], fr_source=f[5], evidence=f[6],
                                 evidence_reason=f[7], sources=list(f[8]) or None))
        return out

    def skeleton(self) -> List[Process]:
        """One Process per row with what the job rules read of it (no stacks)."""
        from hanganalyze.analyze.progress import ONE_SAMPLE_NOTE

        out = []
        for i, r in enumerate(self.rows):
            p = Process(source=r[10] or "core", pid=r[1], rank=r[0], error=r[9],
                        notes=[ONE_SAMPLE_NOTE] if r[11] & F_ONE_SAMPLE else [])
            prog = self.progress.get(i)
            if prog is not None:
                p.threads = [Thread(tid=r[3], progress=ThreadProgress.from_dict(prog))]
            out.append(p)
        return out

    def keys(self) -> Tuple[List[int], str]:
        ranks = [r[0] for r in self.rows]
        if ranks and all(isinstance(x, int) for x in ranks) and len(set(ranks)) == len(ranks):
            return list(ranks), "rank"
        return list(range(len(self.rows))), "process"

    def tree(self, keys: Sequence[int]) -> Optional[dict]:
        from hanganalyze.analyze.calltree import tree_from_items
        from hanganalyze.analyze.stacks import Stacks

        live = [i for i, r in enumerate(self.rows) if r[11] & F_THREADS]
        if not live:
            return None
        sorted_keys = sorted({keys[i] for i in live})
        position = {k: j for j, k in enumerate(sorted_keys)}
        st = Stacks()
        lids = [st.label_id(lab, kind) for lab, kind in self.labels]
        items = []
        nbytes = (len(sorted_keys) + 8) // 8
        for seq, (pos, threads) in self.stacks.items():
            buf = bytearray(nbytes)
            for x in pos:
                b = position[keys[x]]
                buf[b >> 3] |= 1 << (b & 7)
            items.append((tuple(lids[x] for x in seq), int.from_bytes(bytes(buf), "little"), threads))
        return tree_from_items(items, sorted_keys, st)

    def analyze(self, redact: bool = False, examples: bool = True, db=None) -> Snapshot:
        """The job's report from the merged summaries: the job rules on the rows' rank states, the
        per-process groups superseded and grouped as ``job.group_findings`` does, the triage groups,
        ``Snapshot.job`` with the classes and the tree, and one example rank per class."""
        from hanganalyze import __version__
        from hanganalyze.analyze.bucket import bucket_id
        from hanganalyze.analyze.job import JOB_STEPS, _key_label, _rank_suffix, state_classes
        from hanganalyze.analyze.progress import job_findings, rank_facts
        from hanganalyze.analyze.ranksets import compress_ranks
        from hanganalyze.analyze.rules import load_rules
        from hanganalyze.analyze.triage import KNOWN_BUG
        from hanganalyze_gdbext.model import SEVERITIES
        from hanganalyze_gdbext.model.job import JobFailure, JobRankState, JobSummary

        rules = load_rules()
        if self.by_id and db is None:  # the texts the summaries name by their signature's id
            from hanganalyze.analyze.signatures import load_signatures

            db = load_signatures(use_cache=True)
        texts: Dict[str, Any] = {}
        snap = Snapshot(processes=self.skeleton(), warnings=list(self.warnings))
        states = self.states()
        world = self.world
        ranked = [r[0] for r in self.rows if r[0] is not None]
        dup = sorted(x for x, n in Counter(ranked).items() if n > 1)
        if dup:
            snap.warnings.append("%s came in more than once: the job view keys processes by index" % _key_label(dup))
        found: List[Finding] = []
        for step in rules.steps("job"):
            found.extend(JOB_STEPS[step](snap, states, world))
        found = job_findings(snap, states, found)
        over: Dict[str, set] = {}
        for f in found:
            rule = next((r for r in rules.rules if r.id == f.signature and r.code), None)
            for sid in rule.supersedes if rule is not None else ():
                over.setdefault(sid, set()).update(f.processes or [f.process])
        grouped: List[Finding] = []
        for (sig, _sev), (_step, fd, members) in sorted(self.groups.items(), key=lambda kv: kv[1][0]):
            procs = sorted(set(m for m in members if m not in over.get(sig, ())))
            if not procs:
                continue
            first = Finding.from_dict(restore(fd, db, texts))
            first.process = procs[0]
            if len(procs) > 1:
                ranks = sorted({self.rows[i][0] for i in procs if self.rows[i][0] is not None})
                first.processes, first.ranks = procs, ranks
                first.summary = (first.summary or first.title) + _rank_suffix(ranks, procs)
                first.evidence = [replace(e, process=m) for m in procs for e in first.evidence][:256]
            else:
                first.processes = procs
                if self.rows[procs[0]][0] is not None:
                    first.ranks = [self.rows[procs[0]][0]]
            grouped.append(first)
        snap.findings = found + grouped
        keys, key_kind = self.keys()
        seen = sorted(ranked)
        seen_set = set(seen)
        missing = [r for r in range(world) if r not in seen_set] if world is not None and seen else []
        snap.job = JobSummary(
            processes=len(self.rows), key=key_kind, world_size=world, ranks=compress_ranks(seen),
            missing=compress_ranks(missing),
            failed=[JobFailure(process=i, rank=r[0], error=r[9]) for i, r in enumerate(self.rows) if r[9]],
            states=[JobRankState(process=s.process, rank=s.rank, state=s.state, op=s.op, call_site=s.call_site,
                                 where=s.where, seq=s.seq, evidence=s.evidence, evidence_reason=s.evidence_reason,
                                 sources=list(s.sources or [])) for s in states],
            classes=state_classes(states, keys), tree=self.tree(keys), progress=rank_facts(snap, states))
        order = {s: i for i, s in enumerate(SEVERITIES)}
        cross_rank = rules.cross_rank
        snap.findings.sort(key=lambda f: (order.get(f.severity, len(order)), f.signature not in cross_rank,
                                          -(f.confidence or 0.0)))
        tri = []
        for fd, members in self.triage.values():
            f = Finding.from_dict(restore(fd, db, texts))
            procs = sorted(set(members))
            f.process = procs[0]
            f.processes = procs
            f.ranks = [self.rows[i][0] for i in procs if self.rows[i][0] is not None]
            if len(procs) > 1:
                f.summary += " (in %d processes%s)" % (len(procs), ", ranks %s" % compress_ranks(f.ranks)
                                                       if f.ranks else "")
            tri.append(f)
        known = any(f.severity in KNOWN_BUG for f in snap.findings)
        snap.findings = (snap.findings + tri) if known else (tri + snap.findings)
        if examples:
            self.fetch_examples(snap)
        snap.bucket = bucket_id(snap)
        snap.tool = {"name": "hanganalyze", "version": __version__}
        snap.job.__dict__["nodes"] = self.nodes
        if redact:
            from hanganalyze.analyze.redact import redact as redacted

            snap = redacted(snap)
        return snap

    def example_file(self, process: int) -> Optional[str]:
        """The file row ``process`` names, relative to the folder of the summary it came from."""
        r = self.rows[process] if 0 <= process < len(self.rows) else None
        if r is None or not r[12] or os.path.isabs(r[12]):
            return r[12] if r is not None else None
        from bisect import bisect_right

        j = bisect_right(self._bases, (process, "\uffff")) - 1
        base = self._bases[j][1] if j >= 0 else ""
        return os.path.normpath(os.path.join(base, r[12])) if base else r[12]

    def fetch_examples(self, snap: Snapshot, limit: int = MAX_EXAMPLES) -> None:
        """Each class's first rank, read back from the file its row names (when reachable): the
        report shows its stacks; the others stay rows without stacks."""
        from hanganalyze.acquire.snapshot_json import read_snapshot
        from hanganalyze.errors import HangAnalyzeError

        for c in (snap.job.classes if snap.job else [])[:limit]:
            i = c.processes[0]
            path = self.example_file(i)
            if not path or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    got = read_snapshot(fh.read())
            except (OSError, HangAnalyzeError):
                continue
            want = self.rows[i][0]
            p = next((x for x in got.processes if x.rank == want), got.processes[0] if got.processes else None)
            if p is None:
                continue
            p.rank, p.pid = want, self.rows[i][1] if self.rows[i][1] is not None else p.pid
            p.label = p.label or ("rank %d" % want if want is not None else None)
            p.notes = list(p.notes) + ["stacks read from %s (the class's example rank)" % path]
            snap.processes[i] = p


def read_doc(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError("%s: not a %s document" % (path, SCHEMA))
    return doc


def merge_files(paths: Sequence[str]) -> Merged:
    """Summaries read one at a time (in the order given: ``hanganalyze DIR`` sorts them naturally)
    and merged."""
    from hanganalyze.errors import InputError

    m = Merged()
    for p in paths:
        try:
            m.add(read_doc(p), base=os.path.dirname(p))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            raise InputError("%s: not a usable node summary: %s" % (p, e)) from None
    return m


def merge_docs(docs: Iterable[Dict[str, Any]]) -> Merged:
    m = Merged()
    for d in docs:
        m.add(d)
    return m


def tree_of(doc: Dict[str, Any]) -> Optional[dict]:
    """The nested call tree of a summary (``calltree.build_call_tree``'s shape)."""
    m = merge_docs([doc])
    return m.tree(m.keys()[0])
