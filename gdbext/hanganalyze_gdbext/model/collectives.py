"""``Process.collectives``: a rank's collective progress, as typed records.

Two readers fill it: a PyTorch flight-recorder dump (``source`` "flight-recorder": every entry
has all its fields, and the call site) and the NCCL watchdog's lines in a log (``source``
"watchdog-log": only what the lines say).  The job view compares them across ranks; typed
records let it read attributes instead of re-checking every value of a dict that came from an
untrusted file (the readers check the types once, ``snapshot_json`` checks a re-read snapshot).

The JSON is the ``hanganalyze/1`` shape these facts always had, so saved snapshots read back:
which keys are written even when empty depends on the source (``FlightRecorderEntry`` writes
every field, a watchdog entry only what a line gave; a watchdog fact names its ``rank``).

Runs inside gdb: standard library only, Python 3.8.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, List, Optional

from . import Frame
from .record import Record, recordclass

FLIGHT_RECORDER = "flight-recorder"
WATCHDOG_LOG = "watchdog-log"


@recordclass
class CollectiveGroup(Record):
    """A process group's progress: the last collectives this rank enqueued, started, completed."""

    name: Optional[str] = None  # pg_config's name (the GUID in watchdog lines)
    desc: Optional[str] = None  # "default_pg" ...
    ranks: Optional[List[int]] = None  # the group's members, when the dump lists them
    last_enqueued: Optional[int] = None
    last_started: Optional[int] = None
    last_completed: Optional[int] = None
    #: "entries" when the progress was worked out from the entries (a dump without pg_status).
    derived: Optional[str] = None

    CONTRACT = ("name", "desc", "ranks", "last_enqueued", "last_started", "last_completed")


@recordclass
class CollectiveEntry(Record):
    """One collective this rank enqueued: a flight-recorder entry or a watchdog line's timed-out work.

    The fields are declared in the order both sources write them (a dump: seq .. user_frame; a
    watchdog line: seq, pg, op, state, optype, timeout_ms, numel_in, numel_out, ran_ms).
    """

    seq: Optional[int] = None  # collective (or p2p) sequence number within the group
    pg: Optional[str] = None  # the group's key in ``Collectives.groups``
    op: Optional[str] = None  # "all_reduce" ...
    profiling_name: Optional[str] = None  # "nccl:all_reduce"
    state: Optional[str] = None  # "scheduled" | "started" | "completed" | "timed_out"
    p2p: bool = False
    sizes: List[List[int]] = field(default_factory=list)  # input tensor shapes
    dtypes: List[Optional[str]] = field(default_factory=list)
    optype: Optional[str] = None  # WorkNCCL's OpType as the watchdog printed it ("ALLREDUCE")
    timeout_ms: Optional[int] = None
    numel_in: Optional[int] = None
    numel_out: Optional[int] = None
    ran_ms: Optional[int] = None  # how long the work ran before the watchdog gave up
    time_created_ns: Optional[int] = None
    call_site: List[Frame] = field(default_factory=list)  # innermost first
    user_frame: Optional[str] = None  # "train_step (train.py:8)": the innermost frame outside torch

    CONTRACT = ("seq", "pg", "op", "state")


@recordclass
class FlightRecorderEntry(CollectiveEntry):
    """An entry of a flight-recorder dump: every field is written, known or not."""

    CONTRACT = ("seq", "pg", "op", "profiling_name", "state", "p2p", "sizes", "dtypes", "timeout_ms",
                "time_created_ns", "call_site", "user_frame")


@recordclass
class Collectives(Record):
    """A rank's collective facts: its groups' progress and its last collectives, oldest first."""

    source: Optional[str] = None  # FLIGHT_RECORDER | WATCHDOG_LOG
    file: Optional[str] = None  # the dump's path as messages show it
    version: Optional[str] = None  # the dump format's version ("2.10")
    comm_lib_version: Optional[str] = None  # NCCL's ("2.28.9")
    groups: Dict[str, CollectiveGroup] = field(default_factory=dict)  # by pg id
    entries: List[CollectiveEntry] = field(default_factory=list)
    #: Watchdog lines: the rank they were read for (None when no line names one).
    rank: Optional[int] = None
    #: Watchdog lines: the other ranks the log has lines of (not read).
    other_ranks: List[int] = field(default_factory=list)

    CONTRACT = ("source", "file", "version", "comm_lib_version", "groups", "entries")

    def to_dict(self) -> Dict[str, Any]:
        d = super().to_dict()
        d["groups"] = {k: g.to_dict() for k, g in self.groups.items()}
        if self.source == WATCHDOG_LOG and "rank" not in d:  # written even when unknown, before other_ranks
            others = d.pop("other_ranks", None)
            d["rank"] = None
            if others is not None:
                d["other_ranks"] = others
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Collectives:
        if not isinstance(d, dict):
            raise TypeError("Collectives: expected an object, got %s" % type(d).__name__)
        groups = d.get("groups") or {}
        entries = d.get("entries") or []
        if not isinstance(groups, dict):
            raise TypeError("collectives.groups: expected an object, got %s" % type(groups).__name__)
        if not isinstance(entries, list):
            raise TypeError("collectives.entries: expected a list, got %s" % type(entries).__name__)
        out = super().from_dict({k: v for k, v in d.items() if k not in ("groups", "entries")})
        entry = FlightRecorderEntry if d.get("source") == FLIGHT_RECORDER else CollectiveEntry
        out.groups = {str(k): CollectiveGroup.from_dict(g) for k, g in groups.items()}
        out.entries = [entry.from_dict(e) for e in entries]
        return out

    def main_group(self) -> Optional[str]:
        """The group the job view follows: the default group ("0"), else the first by name."""
        if not self.groups:
            return None
        return "0" if "0" in self.groups else sorted(self.groups)[0]
