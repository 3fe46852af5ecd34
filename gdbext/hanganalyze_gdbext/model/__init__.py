"""The snapshot model shared by gdbext (inside gdb) and the analyzer.

This is the single definition of the `hanganalyze/1` JSON contract.  It lives in gdbext
because gdb's embedded Python has only the standard library and may be as old as 3.8; the
analyzer imports it as ``hanganalyze_gdbext.model`` so both sides serialise the same shape.
The wait-for graph built from it (``model.waitgraph``) is shared the same way: the analyzer
imports nothing else from gdbext.

Contract keys (each class's ``CONTRACT``) are always written (``None`` where unknown).  Extra
keys are written only when they carry information, so snapshots stay small and diff-friendly
(see ``record.Record``).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, List, Optional

from .job import JobSummary
from .ncclras import RasSeries
from .record import Record, recordclass

SCHEMA = "hanganalyze/1"

#: Severities a finding may carry, most serious first (the order reports sort findings in).
#: ``triage`` is the triage's own (``analyze/triage.py``): what the stacks show when no known bug
#: explains them, after every known-bug severity.
SEVERITIES = ("crash", "deadlock", "hang", "error", "info", "triage")
#: The severities of a known bug: one of them makes the exit status 1 and puts the triage last.
SERIOUS = SEVERITIES[:4]
#: The triage finding's severity.
TRIAGE = "triage"

#: Wait kinds a thread may report in ``Thread.waits.kind``.
WAIT_KINDS = (
    "mutex",  # pthread_mutex_t / std::mutex; owner from __owner
    "rwlock",  # pthread_rwlock_t writer
    "join",  # pthread_join / std::thread::join; owner = target thread
    "gil",  # waiting for the GIL; owner = GIL holder
    "pylock",  # threading.Lock: no owner is recorded by CPython
    "rlock",  # threading.RLock: owner from the lock object
    "pyjoin",  # threading.Thread.join; owner = joined thread
    "condvar",  # condition variable: no owner
    "futex",  # raw futex wait: no owner
)

#: Function name of the marker frame that ends a stack the unwinder could not read further.
UNREADABLE_MARKER = "<stack unreadable>"


@recordclass
class Frame(Record):
    """One frame, native or Python.  Lists of frames are innermost first, as gdb prints them."""

    kind: str = "native"  # "native" | "python"
    function: Optional[str] = None
    file: Optional[str] = None
    line: Optional[int] = None
    library: Optional[str] = None  # shared object path for native frames
    address: Optional[int] = None  # pc for native frames
    # extras
    module: Optional[str] = None  # Python: module name when known
    inlined: bool = False
    note: Optional[str] = None  # e.g. marker frames: "python frame chain corrupt: cycle"
    marker: bool = False  # True for synthetic frames that explain a gap, never matched
    #: How an unwinder without CFI for the callee found this frame: "fp" (frame-pointer chain) or
    #: "scan" (a return address found on the stack); None where CFI or gdb found it.
    unwind: Optional[str] = None
    #: A Python frame's source line as the paste printed it (a traceback's or py-bt's line under
    #: the frame), stripped: what the line does tells the wait when no native frame shows it
    #: (``analyze/sourcewait.py``).  In memory only: the file and line are what is written.
    source: Optional[str] = None

    CONTRACT = ("kind", "function", "file", "line", "library", "address")
    TRANSIENT = ("source",)


@recordclass
class ThreadState(Record):
    gil: Optional[str] = None  # "held" | "waiting" | "no" | None (unknown)
    gc: Optional[bool] = None

    CONTRACT = ("gil", "gc")


@recordclass
class Wait(Record):
    """What a thread is blocked on (``Thread.waits``), as ``locks.annotate_waits`` found it."""

    kind: Optional[str] = None  # one of WAIT_KINDS
    resource: Optional[str] = None  # "0x..": the lock object, futex word or thread handle
    name: Optional[str] = None  # its symbol or Python name ("ledger", "Account._lock", "GIL")
    owner_tid: Optional[int] = None  # LWP holding it; None when unknown or not recorded
    frame: Optional[int] = None  # index into ``Thread.frames`` of the frame that waits
    detail: Optional[str] = None  # one line for people: how it was found, who holds it
    #: How the owner was inferred from the holder's source where memory records none (a plain
    #: ``threading.Lock``): "`with lock_a:` at /x/app.py:12"; None when memory recorded it.
    owner_inferred: Optional[str] = None

    CONTRACT = ("kind", "resource", "name", "owner_tid", "frame", "detail")


#: What repeated samples of a live thread say (``Thread.progress.state``).
PROGRESS_STATES = ("stuck", "progressing", "spinning", "unknown")


@recordclass
class ThreadProgress(Record):
    """How a live thread moved over repeated samples (``--samples``): one snapshot cannot tell a hung
    thread from a busy one, several can.  Absent for a core (one sample)."""

    state: str = "unknown"  # one of PROGRESS_STATES
    samples: int = 1  # samples this thread was seen in
    window_s: Optional[float] = None  # seconds from its first sample to its last
    cpu_s: Optional[float] = None  # CPU time (utime + stime) it used over the window
    #: Frames (innermost first) seen in an earlier sample that differ from the last one: what moved.
    changed: List[str] = field(default_factory=list)
    held: Optional[int] = None  # outermost frames identical in every sample
    wakeups: Optional[int] = None  # voluntary context switches over the window
    os_state: Optional[str] = None  # the kernel's state letter in the last sample ("S", "R" ...)
    wchan: Optional[str] = None  # kernel wait channel in the last sample, when the kernel shows it

    CONTRACT = ("state", "samples", "window_s", "cpu_s", "changed")


@recordclass
class Thread(Record):
    tid: Optional[int] = None  # LWP
    name: Optional[str] = None  # best known: Python threading name, else OS name
    state: ThreadState = field(default_factory=ThreadState)
    frames: List[Frame] = field(default_factory=list)
    # extras
    os_name: Optional[str] = None
    python_name: Optional[str] = None
    pthread_id: Optional[int] = None
    current: bool = False  # thread gdb selected: the one that got the signal in a core
    #: "merged" | "unmerged" | "native-only" | "python-only"; "unmerged" means the Python frames
    #: could not be placed with certainty and are in ``python_frames`` instead of ``frames``.
    merge: Optional[str] = None
    python_frames: List[Frame] = field(default_factory=list)
    #: What this thread is blocked on (see WAIT_KINDS).
    waits: Optional[Wait] = None
    notes: List[str] = field(default_factory=list)
    #: Why the native unwind ended before the thread's outermost frame (or main), when it did,
    #: e.g. "no CFI for pc 0x7f.. in libcuda.so.1 and no valid frame pointer or return address ...".
    unwind_stop: Optional[str] = None
    #: Repeated samples of a live thread: stuck, progressing or spinning (None: one sample).
    progress: Optional[ThreadProgress] = None
    #: A live sample's fingerprint of the thread's Python frames and fast locals
    #: (``pylocks.PyLocks.activity``), compared across samples: never written (TRANSIENT).
    py_activity: Optional[str] = None

    CONTRACT = ("tid", "name", "state", "frames")
    TRANSIENT = ("py_activity",)

    def all_frames(self) -> List[Frame]:
        """Frames to match against: merged frames plus any Python frames that could not be placed."""
        return list(self.frames) + list(self.python_frames)


@recordclass
class Library(Record):
    path: str
    build_id: Optional[str] = None
    version: Optional[str] = None  # from the file name, e.g. libnccl.so.2.26.5 -> "2.26.5"

    CONTRACT = ("path", "build_id", "version")


@recordclass
class WaitNode(Record):
    """A node of the wait-for graph: a thread (``t<tid>``) or a resource (``r:<kind>:<address>``)."""

    id: str
    kind: Optional[str] = None  # "thread" | "resource"
    label: Optional[str] = None

    CONTRACT = ("id", "kind", "label")


@recordclass
class WaitEdge(Record):
    """thread --waits--> resource, or resource --held_by--> thread."""

    src: str
    dst: str
    kind: Optional[str] = None  # "waits" | "held_by"
    label: Optional[str] = None

    CONTRACT = ("src", "dst", "kind", "label")


@recordclass
class WaitGraph(Record):
    """``Process.waitgraph``: built by ``model.waitgraph.build`` from the threads' waits."""

    nodes: List[WaitNode] = field(default_factory=list)
    edges: List[WaitEdge] = field(default_factory=list)
    cycles: List[List[str]] = field(default_factory=list)  # node ids, each from its smallest thread
    chains: List[List[str]] = field(default_factory=list)  # node ids, from a thread nobody waits behind

    CONTRACT = ("nodes", "edges", "cycles", "chains")


@recordclass
class Process(Record):
    source: str = "core"  # "core" | "live" | "text"
    pid: Optional[int] = None
    executable: Optional[str] = None
    argv: Optional[List[str]] = None
    signal: Optional[str] = None  # "SIGABRT" ...
    python: Optional[Dict[str, Any]] = None  # {"version": "3.11.7", ...}
    threads: List[Thread] = field(default_factory=list)
    # extras
    libraries: List[Library] = field(default_factory=list)
    #: Log/message lines that came with the input (text pastes), for message-level signatures.
    messages: List[str] = field(default_factory=list)
    #: Wait-for graph of the threads' waits (None when no thread waits).
    waitgraph: Optional[WaitGraph] = None
    label: Optional[str] = None  # e.g. "rank3" for multi-process pastes
    notes: List[str] = field(default_factory=list)
    #: Distributed rank (torch.distributed / MPI RANK), when known: the job view's key.
    rank: Optional[int] = None
    #: The rest of the distributed identity: {"local_rank", "world_size", "group_rank",
    #: "local_world_size", "host", "master_addr", "master_port", "from": where it was read}.
    dist: Optional[Dict[str, Any]] = None
    #: The acquisition of this process failed (gdb timed out, pid gone ...): one line, no threads.
    error: Optional[str] = None
    #: Collective progress from PyTorch's flight recorder (or watchdog lines): see ``model.collectives``.
    collectives: Optional[Collectives] = None
    #: Every file the core maps: [{"path", "build_id" (from the core's memory), "found" (the file
    #: on the analyzing machine, --sysroot applied), "disk_build_id", "status": "match" |
    #: "mismatch" | "missing" | "present" | "special"}].
    mapped_files: List[Dict[str, Any]] = field(default_factory=list)
    #: Where the core came from, when systemd-coredump stored it (``--coredumpctl``): {"pid",
    #: "signal", "time", "executable", "cmdline", "hostname", "uid", "storage", "from"}.
    coredump: Optional[Dict[str, Any]] = None
    #: Job view: the inputs this rank's state was joined from, e.g. ["stacks", "flight-recorder",
    #: "log"] (``analyze/rankjoin.py``); where they disagree is in ``notes``.
    sources: List[str] = field(default_factory=list)
    #: A live process sampled more than once: {"count", "window_s", "interval_s"}; each thread's
    #: ``progress`` says what moved.  None for one sample (a core, ``--samples 1``).
    samples: Optional[Dict[str, Any]] = None
    #: asyncio: every event loop, its tasks, their coroutine stacks and awaits (``model.asyncio``).
    asyncio: Optional[AsyncioState] = None
    #: A live read: seconds the process was held stopped while it was read; the samples take it
    #: out of the time its threads could run (never written: TRANSIENT).
    stopped_s: Optional[float] = None

    CONTRACT = ("source", "pid", "executable", "argv", "signal", "python", "threads")
    TRANSIENT = ("stopped_s",)

    def thread_by_tid(self, tid: Optional[int]) -> Optional[Thread]:
        for t in self.threads:
            if t.tid == tid:
                return t
        return None


@recordclass
class Evidence(Record):
    """Why a finding matched: a frame of a thread, a thread, a log line or a library version."""

    #: Job findings: the rank the item is about (None when the job has no ranks).
    rank: Optional[int] = None
    thread: Optional[int] = None  # tid; None for process-level evidence (a log line, a library)
    frame: Optional[int] = None  # index into that thread's ``all_frames()``
    message: Optional[int] = None  # index into ``Process.messages``
    rule: Optional[str] = None  # the signature rule (or analysis) that matched
    text: str = ""  # what matched, for people
    function: Optional[str] = None  # the matched frame's function ("??" when unknown)
    stripped: bool = False  # matched by a rule's no-symbols pattern
    #: Index into ``Snapshot.processes`` when not the finding's ``process`` (job findings, and
    #: per-process findings merged across ranks).
    process: Optional[int] = None

    CONTRACT = ("thread", "frame", "rule", "text")

    def to_dict(self) -> Dict[str, Any]:
        d = super().to_dict()
        if "rank" in d and "process" in d:  # a cross-rank item: rank and process lead
            d = dict([("rank", d.pop("rank")), ("process", d.pop("process"))] + list(d.items()))
        return d


@recordclass
class Finding(Record):
    signature: str
    title: str
    severity: str  # one of SEVERITIES
    process: int  # index into Snapshot.processes
    threads: List[int] = field(default_factory=list)  # tids
    summary: str = ""
    fix: List[str] = field(default_factory=list)
    references: List[str] = field(default_factory=list)
    #: Why it matched.
    evidence: List[Evidence] = field(default_factory=list)
    # extras
    confidence: Optional[float] = None
    cause: Optional[str] = None
    #: Job view: the ranks at fault (cross-rank findings), or the ranks a per-rank finding holds for.
    ranks: List[int] = field(default_factory=list)
    #: Job view: every process index the finding holds for (``process`` is the first of them).
    processes: List[int] = field(default_factory=list)
    #: The triage finding (signature ``triage``): {"wait", "label", "about": [tids], "blame",
    #: "threads": [{"tid", "name", "wait", "waits_in", "blame", "owner"}], "from"}.
    triage: Optional[Dict[str, Any]] = None

    CONTRACT = ("signature", "title", "severity", "process", "threads", "summary", "fix", "references", "evidence")

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Finding:
        d = dict(d, process=int(d.get("process", 0)))
        d.setdefault("title", d["signature"])
        d.setdefault("severity", "info")
        return super().from_dict(d)


@recordclass
class Snapshot(Record):
    processes: List[Process] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    bucket: Optional[str] = None
    # extras
    tool: Optional[Dict[str, Any]] = None  # {"name": "hanganalyze", "version": "..."}
    warnings: List[str] = field(default_factory=list)
    #: The job view, when several processes came in (``model/job.py``).
    job: Optional[JobSummary] = None
    #: NCCL RAS queries of the job (``model/ncclras.py``): saved RAS output or a live query.
    nccl_ras: Optional[RasSeries] = None

    CONTRACT = ("processes", "findings", "bucket")

    def to_dict(self) -> Dict[str, Any]:
        d = {"schema": SCHEMA}
        d.update(super().to_dict())
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Snapshot:
        if d.get("schema") != SCHEMA:
            raise ValueError("not a %s snapshot (schema=%r)" % (SCHEMA, d.get("schema")))
        return super().from_dict(d)


# After Frame and Process: model.collectives imports Frame, and Process's annotation names Collectives.
from .asyncio import AsyncioState  # noqa: E402, I001 - after Frame: model.asyncio imports it
from .collectives import Collectives  # noqa: E402
