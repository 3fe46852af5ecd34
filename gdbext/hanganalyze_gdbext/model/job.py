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

from dataclasses import field
from typing import Any, Dict, List, Optional

from .record import Record, recordclass


@recordclass
class JobRankState(Record):
    """Where one process of the job is (``analyze/rankstate.py`` decides)."""

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

    CONTRACT = ("process", "rank", "state", "op", "call_site", "where", "seq")


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

    CONTRACT = ("processes", "key", "world_size", "ranks", "missing", "failed", "states", "classes", "tree")

    def state_of(self, process: int) -> Optional[JobRankState]:
        """The state of process index ``process``, if the job view has one."""
        return next((s for s in self.states if s.process == process), None)
