"""``JobSummary``: the job view of a snapshot (``Snapshot.job``), as typed records.

Written by the analyzer's ``analyze/job.py`` when several processes (or ranks) came in, read by the
renderers.  Every key is part of the JSON contract (written even when empty: a reader tells "no
missing rank" from "not known" by ``missing == ""`` and ``world_size: null``), so each record's
``CONTRACT`` names all its fields, in the order the JSON has always had them.  The merged call tree
stays a plain nested dict (``analyze/calltree.py`` documents its nodes): it is built and rendered
as such, and typing 10,000 nodes would only cost time.

Runs inside gdb: standard library only, Python 3.8.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from dataclasses import field
from typing import Any, Dict, List, Optional, Tuple

from .record import Record, recordclass

#: The note of a process read once (a core): a node summary's row keeps it as a flag and its reader
#: gives it back (``analyze/progress.py`` adds it and reads it).
ONE_SAMPLE_NOTE = ("one sample (a core): stuck or slow cannot be told; a second core of the same job or a "
                   "flight-recorder dump adds the evidence")

#: The states of a rank that waits for other ranks (``JobRankState.waiting``).
WAITING = ("collective", "rendezvous", "device-sync", "ipc-wait")


@recordclass
class JobRankState(Record):
    """Where one process of the job is: the one shape of a rank's state.  ``analyze/rankstate.py``
    makes it from a process's stacks, a node summary's reader (``acquire/nodesummary.py``) from a
    row; the job rules read it, ``Snapshot.job.states`` shows it.  The facts after ``sources`` are
    what the rules read beside it; the report never wrote them (TRANSIENT), a node summary keeps
    them in its rows."""

    process: int = 0
    rank: Optional[int] = None
    #: "collective", "device-sync", "rendezvous", "ipc-wait", "elsewhere", "no-stack"
    state: Optional[str] = None
    op: Optional[str] = None
    call_site: Optional[str] = None
    where: Optional[str] = None
    seq: Optional[int] = None
    #: How sure the job view is of ``state``: "waiting", "elsewhere" (positive evidence of being
    #: outside the collective) or "unknown" (never blamed); written only when known (additive).
    evidence: Optional[str] = None
    evidence_reason: Optional[str] = None
    #: Where this rank's state came from: "stacks", "flight-recorder", "log" (``analyze/rankjoin.py``).
    sources: List[str] = field(default_factory=list)
    thread: Optional[int] = None  # tid of the thread that says where it is
    frame: Optional[int] = None  # index in that thread's all_frames()
    pg: Optional[str] = None  # flight recorder: the process group of ``seq``
    fr_completed: Optional[bool] = None  # flight recorder: the last enqueued collective completed
    last_enqueued: Optional[int] = None
    last_completed: Optional[int] = None
    pid: Optional[int] = None
    fr_source: Optional[str] = None  # "flight-recorder" | "watchdog-log"
    #: What this rank waits for among its own children, in its words: "DataLoader worker 4242,
    #: which is in decode_sample (data.py:14)" (``analyze/childwait.py``); written only when set.
    #: Not in a node summary's facts (their lists keep the first version's shape).
    waits_for: Optional[str] = None

    CONTRACT = ("process", "rank", "state", "op", "call_site", "where", "seq")
    TRANSIENT = ("thread", "frame", "pg", "fr_completed", "last_enqueued", "last_completed", "pid", "fr_source")
    #: How a node summary stores it (``acquire/nodesummary.py``): ``process`` is the row's position,
    #: ``rank`` and ``pid`` lead the row, ``FACT_FIELDS`` are written once per distinct combination
    #: (the ranks of a job share a few), ``ROW_FIELDS`` in each rank's row.  A new field goes at the
    #: end of one of the two: a summary written before it reads it as its default.
    FACT_FIELDS = ("state", "op", "call_site", "where", "pg", "fr_source", "evidence", "evidence_reason", "sources")
    ROW_FIELDS = ("thread", "frame", "seq", "fr_completed", "last_enqueued", "last_completed")

    @property
    def waiting(self) -> bool:
        """Waiting for other ranks (a collective, its device sync, the rendezvous, an IPC wait)."""
        return self.state in WAITING

    def collective_key(self) -> Tuple[Optional[str], Optional[str]]:
        return (self.op, self.call_site)


@recordclass
class JobRankClass(Record):
    """Processes in the same place (state, collective, call site, innermost frame)."""

    ranks: str = ""  # the keys as a rank set ("0-3,5")
    keys: List[int] = field(default_factory=list)
    processes: List[int] = field(default_factory=list)
    size: int = 0
    state: Optional[str] = None
    where: Optional[str] = None

    CONTRACT = ("ranks", "keys", "processes", "size", "state", "where")


@recordclass
class JobFailure(Record):
    """A process of the job that could not be analyzed."""

    process: int = 0
    rank: Optional[int] = None
    error: Optional[str] = None

    CONTRACT = ("process", "rank", "error")


@recordclass
class JobRankProgress(Record):
    """How the thread that says where one rank is moved over the samples (``JobSummary.progress``,
    written by ``analyze/progress.py``'s ``rank_facts`` from that thread's ``ThreadProgress``)."""

    process: int = 0
    rank: Optional[int] = None
    thread: Optional[int] = None  # tid
    state: str = "unknown"  # one of ``model.PROGRESS_STATES``
    window_s: Optional[float] = None
    samples: int = 1
    cpu_s: Optional[float] = None
    changed: List[str] = field(default_factory=list)  # the first frames that moved, at most 4

    CONTRACT = ("process", "rank", "thread", "state", "window_s", "samples", "cpu_s", "changed")


@recordclass
class JobSummary(Record):
    """World size, the ranks seen and missing, each process's state, the rank classes, the call tree."""

    processes: int = 0
    key: str = "process"  # what the classes' and tree's keys are: "rank" or "process" (index)
    world_size: Optional[int] = None
    ranks: str = ""
    missing: str = ""
    failed: List[JobFailure] = field(default_factory=list)
    states: List[JobRankState] = field(default_factory=list)
    classes: List[JobRankClass] = field(default_factory=list)
    tree: Optional[Dict[str, Any]] = None
    #: Live ranks sampled more than once: per rank, how the thread that says where it is moved
    #: (``analyze/progress.py``: state, window, samples, CPU, what changed); empty for one sample.
    progress: List[JobRankProgress] = field(default_factory=list)
    #: Merged node summaries: the machines summarised ({"name", "ranks", "rows", "first"}); kept in
    #: memory for the caller, not written (a 16,384-node job would repeat them in every report).
    nodes: List[Dict[str, Any]] = field(default_factory=list)

    CONTRACT = ("processes", "key", "world_size", "ranks", "missing", "failed", "states", "classes", "tree")
    TRANSIENT = ("nodes",)

    def state_of(self, process: int) -> Optional[JobRankState]:
        """The state of process index ``process``, if the job view has one."""
        return next((s for s in self.states if s.process == process), None)


@recordclass
class NodeGroup(Record):
    """A finding of a node summary with every process it holds for: the per-process findings of one
    (signature, severity), or the processes of one triage group (wait, blame frame).  ``finding``
    is the first member's (a ``Finding``: typed loosely because ``model/__init__`` imports this
    module before it defines ``Finding``)."""

    finding: Any = None
    members: List[int] = field(default_factory=list)  # process indices, in order
    step: int = 0  # index of the per-process rule (in the rule list's order) that made it
    #: Texts the finding takes from its signature (title, fix, cause, references): a summary names
    #: them instead of repeating them in every node's summary; the analysis fills them back.
    by_id: List[str] = field(default_factory=list)


@recordclass
class NodeSummary(Record):
    """What a node summary (``hanganalyze-node/1``) holds beyond its processes, in memory: made by
    the capture of an analyzed node (``analyze/nodecapture.py``) or by reading and merging
    summaries (``acquire/nodesummary.py``), written by ``render/node.py``.  Each process of the
    snapshot carries its ``rank_state``; the processes read from summaries have no stacks, so the
    call tree is here as its distinct stacks."""

    level: int = 0  # the deepest summary merged (0: captured from stacks)
    nodes: List[Dict[str, Any]] = field(default_factory=list)  # {"name", "rows", "ranks"[, "first"]}
    world_size: Optional[int] = None
    warnings: List[str] = field(default_factory=list)  # as captured, before the job rules add theirs
    labels: List[Tuple[str, str]] = field(default_factory=list)  # (label, kind) per label id
    #: The call tree's distinct stacks: label ids (outermost first) -> [process indices, threads].
    stacks: Dict[Tuple[int, ...], list] = field(default_factory=dict)
    live: List[int] = field(default_factory=list)  # the processes that had threads (in the tree)
    #: Per process: the file its snapshot is in (relative to its summary's folder, see ``bases``).
    files: List[Optional[str]] = field(default_factory=list)
    bases: List[Tuple[int, str]] = field(default_factory=list)  # (first process, folder) per summary read
    groups: List[NodeGroup] = field(default_factory=list)  # per-process findings, in rule-step order
    triage: List[NodeGroup] = field(default_factory=list)

    def file_of(self, process: int) -> Optional[str]:
        """The file process ``process`` names, relative to the folder of the summary it came from."""
        f = self.files[process] if 0 <= process < len(self.files) else None
        if not f or os.path.isabs(f) or not self.bases:
            return f
        j = bisect_right(self.bases, (process, "\uffff")) - 1
        base = self.bases[j][1] if j >= 0 else ""
        return os.path.normpath(os.path.join(base, f)) if base else f
