"""NCCL RAS status, as typed records: what one ``VERBOSE STATUS`` query of NCCL's RAS thread says.

Every NCCL >= 2.24 process runs a RAS thread that answers on ``localhost:28028`` (NCCL's
``ncclras`` tool speaks to it) with each communicator's ranks: pid, host, CUDA/NVML device,
init and asynchronous error state, finalize/destroy/abort flags and the number of collectives of
each kind it has launched.  One query is a picture; the change between queries is the evidence of
progress (``analyzer/hanganalyze/analyze/rasprogress.py``), so a series of queries is a record too.

Two forms exist: JSON (NCCL >= 2.28.7, ``SET FORMAT json``) carries every field; the text form
shows counts only for the ranks of a communicator that disagree (the "MISMATCH" warnings), no
timestamp, and a summary row per group of communicators (``RasGroup``).  Fields a form does not
carry stay None / empty and are not written (``record.Record``).

The readers (``acquire/ncclras.py``) check every type once; the records hold checked values.

Runs inside gdb: standard library only, Python 3.8.
"""

from __future__ import annotations

from dataclasses import field
from typing import Dict, List, Optional

from .record import Record, recordclass

JSON = "json"
TEXT = "text"

#: ncclResult_t values that are no error: success and "in progress" (non-blocking init).
NCCL_OK_RESULTS = (0, 7)
#: ncclResult_t names (nccl.h), for sentences.
NCCL_RESULTS = {
    0: "success", 1: "unhandled CUDA error", 2: "system error", 3: "internal error", 4: "invalid argument",
    5: "invalid usage", 6: "remote process error", 7: "in progress", 8: "timeout",
}


@recordclass
class RasRank(Record):
    """One rank of a communicator as RAS saw it."""

    rank: Optional[int] = None
    host: Optional[str] = None
    pid: Optional[int] = None
    cuda_dev: Optional[int] = None
    nvml_dev: Optional[int] = None
    #: ncclResult_t of the communicator's initialisation on this rank (0 = success).
    init_state: Optional[int] = None
    #: ncclResult_t of the communicator's asynchronous error (0 = none).
    async_error: Optional[int] = None
    finalize_called: bool = False
    destroy_flag: bool = False
    abort_flag: bool = False
    #: Collectives launched, by NCCL's name ("AllReduce": 4).  Text form: only the ops the ranks
    #: disagree on.
    counts: Dict[str, int] = field(default_factory=dict)
    #: Text form: "RUNNING" | "INIT" | "FINALIZE" | "ABORT" | "NOCOMM", where the ranks differ.
    status: Optional[str] = None
    #: Text form: the error the rank reported, as NCCL wrote it ("Remote process error").
    init_error: Optional[str] = None
    async_error_text: Optional[str] = None

    CONTRACT = ("rank",)


@recordclass
class RasMissingRank(Record):
    """A rank of a communicator that did not answer for it."""

    rank: Optional[int] = None
    host: Optional[str] = None
    pid: Optional[int] = None
    cuda_dev: Optional[int] = None
    nvml_dev: Optional[int] = None
    #: Its process did not answer the RAS collective at all (not only for this communicator).
    unresponsive: bool = False
    #: RAS considers its process dead (unreachable over the RAS network).
    considered_dead: bool = False

    CONTRACT = ("rank",)


@recordclass
class RasCommunicator(Record):
    """One communicator: its ranks (those that answered) and the ranks missing from it."""

    #: The communicator's hash, "0x" + hex without leading zeros (the JSON's spelling; the text's
    #: zero-padded form is normalised to it, so both forms of one communicator compare equal).
    hash: Optional[str] = None
    secondary_hash: Optional[str] = None  # JSON: "0xhost:0xpid" of the communicator's id
    size: Optional[int] = None  # ranks in the communicator
    ranks_count: Optional[int] = None  # ranks that answered
    missing_ranks_count: Optional[int] = None
    ranks: List[RasRank] = field(default_factory=list)
    missing_ranks: List[RasMissingRank] = field(default_factory=list)
    #: Text form: the sections that named it ("MISMATCH", "ERROR", "INCOMPLETE").
    problems: List[str] = field(default_factory=list)

    CONTRACT = ("hash", "size", "ranks")


@recordclass
class RasGroup(Record):
    """Text form: one row of the summary table (communicators of one size, node count and status)."""

    group: Optional[int] = None
    comms: Optional[int] = None
    nodes_per_comm: Optional[int] = None
    ranks_per_node: Optional[str] = None  # "2" or "1-4"
    ranks_per_comm: Optional[int] = None
    ranks_in_group: Optional[int] = None
    status: Optional[str] = None  # "RUNNING" ...
    errors: Optional[str] = None  # "OK" | "MISMATCH" | "INCOMPLETE,ERROR" ...

    CONTRACT = ("group", "status", "errors")


@recordclass
class RasQuery(Record):
    """One answer of the RAS thread to ``VERBOSE STATUS``."""

    format: Optional[str] = None  # JSON | TEXT
    source: Optional[str] = None  # the file (and query number in it) or "host:port" of a live query
    nccl_version: Optional[str] = None
    cuda_runtime_version: Optional[int] = None
    cuda_driver_version: Optional[int] = None
    #: JSON: the RAS thread's local time, "2026-11-28 02:42:34" (one-second resolution).
    timestamp: Optional[str] = None
    #: Seconds on one clock for every query of a series (a live query: this machine's clock; a
    #: saved JSON: its timestamp read as UTC): only differences mean something.
    time_s: Optional[float] = None
    communicators_count: Optional[int] = None
    communicators: List[RasCommunicator] = field(default_factory=list)
    #: Text form: the summary table.
    groups: List[RasGroup] = field(default_factory=list)
    #: Job-level problems (text form's "INCOMPLETE"/"DEAD"/"TIMEOUT" lines), as NCCL wrote them.
    errors: List[str] = field(default_factory=list)
    collection_time_s: Optional[float] = None
    timeouts_count: Optional[int] = None

    CONTRACT = ("format", "source", "communicators")


@recordclass
class RasSeries(Record):
    """Queries of one job, in time order: the input of the progress analysis."""

    queries: List[RasQuery] = field(default_factory=list)
    #: Seconds between queries when they carry no time (text form) and the user gave it.
    interval_s: Optional[float] = None
    #: What the reader left out or decided ("text queries ignored: the JSON of the same job was given").
    notes: List[str] = field(default_factory=list)
    #: A live query's address ("localhost:28028"); None: saved output read from files.
    live: Optional[str] = None

    CONTRACT = ("queries",)
