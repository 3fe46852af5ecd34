"""The job part of a report's view: the first screen of a job report is the answer.

A user who opens the report of a hung 64-rank job wants one sentence first: which rank, where
(function and line), stuck or slow.  Then who is where (one row per rank: host, pid, state,
where, the inputs it was read from, progress when sampled), what every rank has in common said
once, and the merged call tree opened where the ranks part ways.  Everything here is computed
once for every format (text, Markdown, HTML lay it out); strings are raw core data, escaped by
each renderer for its medium.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence, Set, Tuple

from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.rasrules import PROGRESSING_ID, SLOW_ID
from hanganalyze.analyze.rules import load_rules
from hanganalyze.render.gpuview import gpu_cells
from hanganalyze.render.rasview import ONE_QUERY, SLOW_BY_RAS, ras_section
from hanganalyze.render.titles import process_title
from hanganalyze.render.treetext import Divergence, divergences, render_tree_lines
from hanganalyze_gdbext.model import SERIOUS, Finding, Process, Snapshot
from hanganalyze_gdbext.model.job import JobRankProgress, JobRankState, JobSummary

#: Jobs with up to this many ranks get one table row per rank; larger ones one row per rank class.
ROWS_PER_RANK = 16
#: Facts that the rank table shows per rank already, or that say the rank itself.
_PER_RANK_FACTS = ("rank", "pid")


class ShownProcess(Protocol):
    """What the job part reads of each process the report shows (``view.ProcessView``, which
    ``view.build_view`` hands over): its place, the process, its facts and key libraries."""

    index: int
    process: Process
    facts: List[Tuple[str, str]]
    libraries: List[Tuple[str, str]]


@dataclass
class JobClassView:
    ranks: str  # "0-2,4"
    size: int
    state: str  # "waits in all_reduce called from train_step (train.py:12)" / "in load_next_batch (...)"
    process: int  # the process shown for the class


@dataclass
class RankRow:
    """One row of the rank table (a rank, or a rank class of a large job)."""

    ranks: str  # "1", "0-2,4" or "process 3"
    host: str
    pid: str
    state: str  # "device-sync", "elsewhere", "unknown" ...
    where: str  # "in load_next_batch (train.py:80)"
    sources: str  # "stacks, flight-recorder"
    progress: str  # "stuck", "progressing", "spinning", "" (not sampled)
    at_fault: bool = False  # named by the top cross-rank finding
    gpu: str = ""  # its GPU, utilization and what runs there (render/gpuview.py), when GPU state is known


@dataclass
class SharedFacts:
    """Per-process metadata said once: what every process shares, then only what differs."""

    who: str  # "ranks 0-3"
    same: List[Tuple[str, str]]
    #: (fact, [(ranks, value)]): e.g. ("threads", [("0,2", "9"), ("1", "8")]).
    differ: List[Tuple[str, List[Tuple[str, str]]]]


@dataclass(frozen=True)
class JobWords:
    """How a job report speaks of its processes, chosen from the job's kind (``job_words``): ranks
    only for a distributed job; a parent and its workers for a process tree with no rank facts
    (``--job`` of a multiprocessing / concurrent.futures parent); plain processes otherwise."""

    kind: str = "ranks"  # "ranks" | "workers" | "processes"
    unit: str = "rank"  # the table's first column
    units: str = "ranks"  # the tree's branch badges
    group: str = "the ranks"  # "where the ranks diverge"
    classes: str = "rank classes"
    classes_about: str = "ranks in the same place: state, collective, call site, innermost frame"
    none_across: str = "no cross-rank finding"
    every: str = "every rank"
    #: ``workers``: the index of the parent process (the ``--job`` launcher), None when not read.
    parent: Optional[int] = None


RANK_WORDS = JobWords()


def job_words(snapshot: Snapshot, job: JobSummary) -> JobWords:
    """Ranks when the job has rank facts (``JobSummary.key``); else a parent and its workers when
    the processes came from one ``--job`` process tree (the launcher is labelled ``parent``, see
    ``acquire/many.py``); else processes."""
    if job.key == "rank":
        return RANK_WORDS
    about = "processes in the same place: state, call site, innermost frame"
    parent = next((i for i, p in enumerate(snapshot.processes) if p.label == "parent" and p.rank is None), None)
    if parent is not None or any(p.label == "worker" for p in snapshot.processes):
        return JobWords("workers", "process", "processes", "the parent and its workers", "process classes", about,
                        "no finding across the parent and its workers", "every process", parent)
    return JobWords("processes", "process", "processes", "the processes", "process classes", about,
                    "no finding across the processes", "every process")


@dataclass
class JobView:
    """The job's first screen (verdict, rank table, shared facts, divergence) and its section
    (facts, rank classes, the merged call tree)."""

    facts: List[Tuple[str, str]]
    classes: List[JobClassView]
    tree: Optional[Dict[str, Any]]
    tree_lines: List[str]
    failed: List[Tuple[str, str]]  # (process title, error)
    verdict: str = ""
    rows: List[RankRow] = field(default_factory=list)
    #: "" when progress was sampled; else why stuck or slow cannot be told.
    progress_note: str = ""
    #: The rank table has a GPU column (GPU state came in: ``Snapshot.gpu``).
    gpu_column: bool = False
    shared: Optional[SharedFacts] = None
    #: Where the ranks part ways in the merged tree, and what the text form of it is.
    divergences: List[Divergence] = field(default_factory=list)
    divergence_lines: List[str] = field(default_factory=list)
    #: Tree branches where every rank is in the same place (folded on the first screen).
    same_branches: int = 0
    #: ids of the tree nodes the HTML tree opens: the paths down to each divergence.
    open_nodes: Set[int] = field(default_factory=set)
    split_nodes: Set[int] = field(default_factory=set)  # ids of the divergence points
    branch_nodes: Set[int] = field(default_factory=set)  # ids of their diverging children
    #: Process indices whose wait-for graph only holds parked threads (folded away).
    idle_waitgraphs: Set[int] = field(default_factory=set)
    #: How the report speaks of the processes (ranks, a parent and its workers, processes).
    words: JobWords = RANK_WORDS

    def tree_mark(self, node: Any) -> str:
        """For the HTML tree macro: "split" at a point where ranks diverge, "trunk" on the way to
        one (opened, its common frames folded), "branch" for the ways the ranks part there (opened,
        frames shown), "" elsewhere (closed)."""
        if id(node) in self.split_nodes:
            return "split"
        if id(node) in self.open_nodes:
            return "trunk"
        return "branch" if id(node) in self.branch_nodes else ""


def state_text(st: Optional[JobRankState]) -> str:
    """Where a rank is, in words: ``waits in all_reduce (#3) called from train_step (t.py:9)``."""
    state = st.state if st is not None else None
    if st is None:
        return ""
    if state in ("collective", "rendezvous", "device-sync"):
        what = st.op or ("a device sync" if state == "device-sync" else state)
        if state == "device-sync" and st.op:
            what = "the device sync after %s" % st.op
        text = "waits in %s" % what
        if st.seq is not None:
            text += " (#%s)" % st.seq
        if st.call_site:
            text += " called from %s" % st.call_site
        return text
    if state == "elsewhere":
        if st.waits_for:  # its own children: what the DataLoader worker it waits for is doing
            return "in %s, waits for %s" % (st.where or "an unknown place", st.waits_for)
        return "in %s" % (st.where or "an unknown place")
    if state == "no-stack":
        return "no stack (flight-recorder dump only)"
    return str(state or "")


def _who(keys: Sequence[int], by_rank: bool, words: JobWords = RANK_WORDS) -> str:
    if not keys:
        return "no rank" if by_rank else "no process"
    if by_rank:
        return "rank%s %s" % ("s" if len(keys) > 1 else "", compress_ranks(keys))
    if words.kind == "workers":  # process indices: the parent by name, the others as workers
        workers = [k for k in keys if k != words.parent]
        out = ["the parent"] if len(workers) < len(keys) else []
        if workers:
            out.append("worker%s %s" % ("s" if len(workers) > 1 else "", compress_ranks(workers)))
        return " and ".join(out)
    return "process%s %s" % ("es" if len(keys) > 1 else "", compress_ranks(keys))


def _phrases(states: Sequence[JobRankState], by_rank: bool, most: int = 2, words: JobWords = RANK_WORDS) -> str:
    """``rank 1 is in load_next_batch (t.py:8)``, ``ranks 0,2 wait in all_reduce ...``: one phrase
    per place, the ranks there named."""
    places: Dict[str, List[int]] = {}
    for s in states:
        places.setdefault(state_text(s) or "in an unknown place", []).append(_key(s, by_rank))
    out = []
    for text, keys in sorted(places.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))[:most]:
        many = len(set(keys)) > 1
        if text.startswith("waits "):
            text = ("wait " if many else "waits ") + text[len("waits "):]
        else:
            text = ("are " if many else "is ") + text
        out.append("%s %s" % (_who(sorted(set(keys)), by_rank, words), text))
    if len(places) > most:
        out.append("%d more places" % (len(places) - most))
    return "; ".join(out)


def _key(st: JobRankState, by_rank: bool) -> int:
    return st.rank if by_rank and st.rank is not None else st.process


def top_cross_rank(snapshot: Snapshot) -> Optional[Finding]:
    """The finding that names the ranks at fault: the first cross-rank rule's finding."""
    try:
        cross = load_rules().cross_rank
    except Exception:  # noqa: BLE001 - a broken rule file must not cost the report: any ranked finding
        cross = frozenset()
    ranked = [f for f in snapshot.findings if f.ranks]
    return next((f for f in ranked if f.signature in cross), ranked[0] if ranked else None)


def _progress(job: JobSummary) -> Dict[int, JobRankProgress]:
    return {p.process: p for p in job.progress}


def _pace(entries: List[Optional[JobRankProgress]], sampled: bool) -> str:
    """Stuck or slow for the blamed ranks, or an honest "unknown"."""
    states = sorted({str(e.state) for e in entries if e})
    if not states:
        if sampled:
            return "stuck or slow: unknown (seen in one sample only)"
        return "stuck or slow: unknown (one sample)"
    e = next(x for x in entries if x)
    window = " over %.1f s, %s samples" % (e.window_s or 0.0, e.samples)
    if states == ["stuck"]:
        return "STUCK" + window
    if states == ["progressing"]:
        moved = ", ".join(e.changed[:3])
        return "SLOW, not stuck" + window + (": moving through %s" % moved if moved else "")
    if states == ["spinning"]:
        return "SPINNING (busy-waiting)" + window
    return "mixed: " + ", ".join(states) + window


def verdict(snapshot: Snapshot, job: JobSummary, words: JobWords = RANK_WORDS) -> str:
    """One sentence: who, where (function and line), stuck or slow; ranks of unknown state listed,
    never blamed."""
    by_rank = job.key == "rank"
    states = list(job.states)
    progress = _progress(job)
    sampled = any(p.samples for p in snapshot.processes)
    unknown = [s for s in states if s.evidence == "unknown"]
    top = top_cross_rank(snapshot)
    if not snapshot.processes and snapshot.findings:  # saved NCCL RAS output alone: its finding's sentence
        first = top or snapshot.findings[0]
        return "%s [%s]" % (first.summary or first.title, first.signature)
    ras = ras_section(snapshot) if not snapshot.processes else None
    if ras is not None:
        return ras.verdict
    ras_moving = next((f for f in snapshot.findings if f.signature == PROGRESSING_ID), None)
    if ras_moving is not None and (top is None or top.severity not in SERIOUS):  # NCCL's counts moved: no hang
        out = "no hang: %s [%s]" % (ras_moving.summary, ras_moving.signature)
    elif top is not None:
        blamed = [s for s in states if _key(s, by_rank) in set(top.ranks) and s.evidence != "unknown"]
        others = [s for s in states if s not in blamed and s.evidence != "unknown"]
        if blamed:
            out = "%s -- %s" % (_phrases(blamed, by_rank, 3, words), SLOW_BY_RAS if top.signature == SLOW_ID
                                else _pace([progress.get(s.process) for s in blamed], sampled))
            if others:
                out += "; meanwhile " + _phrases(others, by_rank, words=words)
        else:  # the finding names ranks with no stack (a missing rank, a dump only)
            out = "%s: %s" % (_who(top.ranks, by_rank, words), top.title)
        out += " [%s]" % top.signature
    elif snapshot.findings:
        out = "%s; top finding: %s" % (words.none_across, snapshot.findings[0].title)
    else:
        moving = [p for p in job.progress if p.state == "progressing"]
        if states and len(moving) == len(states):
            out = "no hang: %s made progress over the samples" % words.every
        else:
            out = "no known hang: %s are in %d place%s (%s table below)" % (
                words.group, len(job.classes), "s" * (len(job.classes) != 1), words.unit)
    if unknown:
        out += "; state unknown, not blamed: %s" % "; ".join(
            "%s (%s)" % (_who([_key(s, by_rank)], by_rank, words), s.evidence_reason or "no evidence")
            for s in unknown[:4])
        if len(unknown) > 4:
            out += "; %d more" % (len(unknown) - 4)
    return out


def _host(p: Optional[Process]) -> str:
    return (p.dist.host or "") if p is not None and p.dist is not None else ""


def _sources(p: Optional[Process], st: JobRankState) -> str:
    src = list(st.sources) or (list(p.sources) if p is not None else [])
    if not src and p is not None and p.threads:  # one input of this rank: its stacks
        src = ["stacks"]
    return ", ".join(dict.fromkeys(str(s) for s in src))


def _missing_ranks(text: str) -> Set[int]:
    """The ranks of a range text ("1,3-5"), for the at-fault mark of the missing ranks' row."""
    out: Set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()) and int(hi or lo) - int(lo) < 65536:
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _row_state(st: JobRankState) -> str:
    return "unknown" if st.evidence == "unknown" else str(st.state or "")


def rank_rows(snapshot: Snapshot, job: JobSummary, at_fault: Set[int], words: JobWords = RANK_WORDS) -> List[RankRow]:
    """One row per rank (a small job) or per rank class (a large one), in rank order."""
    by_rank = job.key == "rank"
    procs = snapshot.processes
    progress = _progress(job)

    def proc(i: int) -> Optional[Process]:
        return procs[i] if 0 <= i < len(procs) else None

    states = sorted(job.states, key=lambda s: (_key(s, by_rank), s.process))
    if len(states) <= ROWS_PER_RANK:
        rows = []
        for st in states:
            p = proc(st.process)
            prog = progress.get(st.process)
            label = str(st.rank) if by_rank and st.rank is not None else \
                _who([st.process], False, words).replace("the parent", "parent")  # a table cell
            rows.append(RankRow(label, _host(p), str(p.pid) if p is not None and p.pid is not None else "",
                                _row_state(st), state_text(st), _sources(p, st), str(prog.state) if prog else "",
                                _key(st, by_rank) in at_fault))
        if by_rank and job.missing:  # the ranks no input has: a row each says so
            rows.append(RankRow(str(job.missing), "", "", "missing", "no process, core or dump of it in the input",
                                "", "", any(r in at_fault for r in _missing_ranks(job.missing))))
        return rows
    rows = []
    by_proc = {s.process: s for s in states}
    for c in job.classes:
        members = [by_proc[i] for i in c.processes if i in by_proc]
        if not members:
            continue
        hosts = sorted({_host(proc(s.process)) for s in members} - {""})
        pace = sorted({str(progress[s.process]["state"]) for s in members if s.process in progress})
        rows.append(RankRow(str(c.ranks), hosts[0] if len(hosts) == 1 else "%d hosts" % len(hosts) if hosts else "",
                            "%d pids" % len(members) if len(members) > 1 else str(proc(members[0].process).pid or ""),
                            _row_state(members[0]), state_text(members[0]) or str(c.where or ""),
                            ", ".join(sorted({_sources(proc(s.process), s) for s in members})), "/".join(pace),
                            any(_key(s, by_rank) in at_fault for s in members)))
    return rows


def shared_facts(pvs: Sequence[ShownProcess], by_rank: bool, words: JobWords = RANK_WORDS) -> Optional[SharedFacts]:
    """What every shown process has in common, said once, and only the differences per rank."""
    if len(pvs) < 2:
        return None
    keys: List[int] = []
    facts: List[Dict[str, str]] = []
    for pv in pvs:
        p = pv.process
        keys.append(p.rank if by_rank and p.rank is not None else pv.index)
        d = {k: v for k, v in pv.facts if k not in _PER_RANK_FACTS}
        if pv.libraries:  # the same set in another load order is the same libraries
            d["libraries"] = ", ".join(sorted(("%s %s" % lv).strip() for lv in pv.libraries))
        facts.append(d)
    order: List[str] = list(dict.fromkeys(k for d in facts for k in d))
    same, differ = [], []
    for k in order:
        values: Dict[str, List[int]] = {}
        for key, d in zip(keys, facts):
            values.setdefault(d.get(k, "-"), []).append(key)
        if len(values) == 1:
            same.append((k, next(iter(values))))
        else:
            groups = sorted(values.items(), key=lambda kv: min(kv[1]))
            differ.append((k, [(compress_ranks(sorted(set(ks))), v) for v, ks in groups]))
    who = _who(sorted(set(keys)), by_rank, words)
    return SharedFacts(who, same, differ)


def idle_waitgraph(p: Process) -> bool:
    """A wait-for graph with no cycle and no thread that waits on another thread: every thread in
    it is parked on a resource nobody holds (a watchdog's timed condition wait, a queue), which
    says nothing about a hang; folded away on a job's first screen."""
    g = p.waitgraph
    if not g or g.cycles:
        return False
    return not any(e.kind == "held_by" for e in g.edges)


def _job_facts(job: JobSummary) -> List[Tuple[str, str]]:
    facts = [("processes", str(job.processes))]
    if job.world_size is not None:
        facts.append(("world size", str(job.world_size)))
    if job.ranks:
        facts.append(("ranks", str(job.ranks)))
    if job.missing:
        facts.append(("missing ranks", str(job.missing)))
    return facts


def build_job_view(snapshot: Snapshot, pvs: Sequence[ShownProcess] = ()) -> Optional[JobView]:
    """What a job report shows first and in its job section (None for one process); not
    ``calltree.job_view``, which builds the tree and classes this reads from ``Snapshot.job``."""
    job = snapshot.job
    if job is None:
        return None
    states = {s.process: s for s in job.states}
    words = job_words(snapshot, job)
    classes = []
    for c in job.classes:
        members = c.processes
        first = members[0] if members else 0
        label = str(c.ranks)
        if job.key != "rank":
            label = _who(list(members), False, words) if members else "process%s %s" % (
                "es" if len(members) > 1 else "", label)
        classes.append(JobClassView(label, int(c.size), state_text(states.get(first)) or str(c.where or ""), first))
    failed = [(process_title(i, p), p.error or "") for i, p in enumerate(snapshot.processes) if p.error]
    tree = job.tree if isinstance(job.tree, dict) else None
    view = JobView(_job_facts(job), classes, tree, render_tree_lines(tree) if tree else [], failed)
    top = top_cross_rank(snapshot)
    view.words = words
    view.verdict = verdict(snapshot, job, words)
    view.rows = rank_rows(snapshot, job, set(top.ranks) if top is not None else set(), words)
    cells = gpu_cells(snapshot)
    if cells:  # the device side joined to the ranks (render/gpuview.py); "?" where not known
        view.gpu_column = True
        for r in view.rows:
            r.gpu = cells.get(r.pid, "?" if r.pid else "")
    if not any(p.samples for p in snapshot.processes):
        view.progress_note = "progress: one sample (a core, a dump or --samples 1): stuck or slow cannot be told"
    notes = []
    if snapshot.nccl_ras is not None and len(snapshot.nccl_ras.queries) > 1:  # evidence over time: NCCL's counts
        notes.append("%d NCCL RAS queries (NCCL RAS section)" % len(snapshot.nccl_ras.queries))
    elif snapshot.nccl_ras is not None and snapshot.nccl_ras.queries and not snapshot.processes:
        notes.append(ONE_QUERY)
    extended = next((p.samples.extended for p in snapshot.processes if p.samples and p.samples.extended), None)
    if extended:  # the adaptive window (acquire/sampling.py): when and why sampling went on
        notes.append(extended)
    if notes:
        view.progress_note = "progress: " + "; ".join(notes)
    view.shared = shared_facts([pv for pv in pvs if pv.process.threads or pv.process.error], job.key == "rank", words)
    if tree is not None:
        d = divergences(tree)
        view.divergences, view.same_branches, view.open_nodes = d.points, d.same_branches, d.open_nodes
        view.divergence_lines = d.lines()
        view.split_nodes = {id(x.node) for x in d.points}
        view.branch_nodes = {id(b) for x in d.points for b in x.branches}
    view.idle_waitgraphs = {pv.index for pv in pvs if idle_waitgraph(pv.process)}
    return view
