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

from dataclasses import field, fields
from typing import Any, Dict, List, Optional

from .cudakernels import CudaKernels
from .gpustate import GpuState
from .job import JobRankState, JobSummary, NodeSummary
from .ncclras import RasSeries
from .record import Record, recordclass

SCHEMA = "hanganalyze/1"

#: Severities a finding may carry, most serious first (the order reports sort findings in).
#: ``triage`` is the triage's own (``analyze/triage.py``): what the stacks show when no known bug
#: explains them, after every known-bug severity.
SEVERITIES = ("crash", "deadlock", "hang", "error", "warning", "info", "triage")
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
    #: Wake-ups that were the thread's own: ``wakeups`` less those the reads' ptrace stops caused
    #: (measured around each read), so a sleep in a loop is told from a sleep for ever.
    own_wakeups: Optional[int] = None
    involuntary: Optional[int] = None  # involuntary context switches over the window (preempted: it ran)
    syscall: Optional[int] = None  # the system call it was in at the last sample (/proc/.../syscall)
    #: Samples in which the thread was at the place of the last sample (its Python frames, else native).
    place_samples: Optional[int] = None
    #: Which evidence decided ``state``: "never-woke", "woke" (own wake-ups in one place), "frames"
    #: (frames or lines changed), "python-locals", "cpu" (spinning), "same-place" (held, few wake-ups).
    evidence: Optional[str] = None

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
class DistIdentity(Record):
    """``Process.dist``: who the process is in its job besides its rank, as ``acquire/ranks.py``
    read it from the launcher's environment (or less: a text's ``[rankN]`` label, the file's name,
    PyTorch's debug server).  Each key is written only when known, in this order."""

    launcher: Optional[str] = None  # the family that set the rank: "torch", "openmpi", "pmi", "slurm"
    from_: Optional[str] = None  # where it was read: "environ", "core environment", "file name" ...
    rank: Optional[int] = None  # PyTorch's debug-server dump names it here too (``Process.rank`` is the key)
    debug_server_url: Optional[str] = None  # the debug server the dump came from
    world_size: Optional[int] = None
    local_rank: Optional[int] = None
    group_rank: Optional[int] = None
    local_world_size: Optional[int] = None
    host: Optional[str] = None
    master_addr: Optional[str] = None
    master_port: Optional[str] = None  # as the environment spells it
    run_id: Optional[str] = None  # TORCHELASTIC_RUN_ID
    launcher_pid: Optional[int] = None  # the launcher (torchrun, mpirun) the process was found under
    #: The JSON keys in the order they are written, where not the fields' order (never written):
    #: a rank joined from several inputs has always listed the keys of the input merged in first
    #: (``filled_from``), and reports keep their bytes; a document read back keeps its order.
    key_order: Optional[List[str]] = field(default=None, compare=False, repr=False)

    TRANSIENT = ("key_order",)

    def filled_from(self, other: DistIdentity) -> DistIdentity:
        """This identity, its unknown keys taken from ``other`` (one rank read from several inputs);
        the keys written in ``other``'s order first, then this one's others."""
        out = DistIdentity(**{f.name: getattr(other, f.name) if getattr(self, f.name) is None
                              else getattr(self, f.name) for f in fields(self) if f.name != "key_order"})
        first = list(other.to_dict())
        out.key_order = first + [k for k in self.to_dict() if k not in first]
        return out

    def to_dict(self) -> Dict[str, Any]:
        d = super().to_dict()
        if self.key_order is not None:
            rank = {k: i for i, k in enumerate(self.key_order)}
            d = dict(sorted(d.items(), key=lambda kv: rank.get(kv[0], len(rank))))  # stable: new keys last
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> DistIdentity:
        out = super().from_dict(d)
        written = list(out.to_dict())
        if [k for k in d if k in written] != written:
            out.key_order = [k for k in d if k in written]
        return out


@recordclass
class PythonFacts(Record):
    """``Process.python``: the interpreter, as the frame walker found it (``gdbext/facts.py``), or
    just its version where a text names it (``from``: how it was inferred)."""

    version: Optional[str] = None  # "3.11.7"
    summary_error: Optional[str] = None  # the walker's summary failed: the version alone is kept
    version_source: Optional[str] = None  # where the version was read ("Py_Version" ...)
    interpreters: Optional[int] = None
    gil_holder: Optional[int] = None  # LWP
    gc_collecting: Optional[bool] = None
    offsets_checked_against_dwarf: Optional[bool] = None
    free_threading: Optional[bool] = None
    gil_enabled: Optional[bool] = None  # free-threaded builds only
    build: Optional[str] = None  # "shared" (a libpython is mapped) | "static"
    debug_info: Optional[bool] = None  # CPython's DWARF was there to check the offsets against
    runtime: Optional[str] = None  # how ``_PyRuntime`` was found
    from_: Optional[str] = None  # a text's version inferred from its file paths: "file paths"


@recordclass
class MappedFile(Record):
    """A row of ``Process.mapped_files``: a file the core maps, and the one found for it here."""

    path: Optional[str] = None  # in the core
    build_id: Optional[str] = None  # from the core's memory
    found: Optional[str] = None  # the file on the analyzing machine, --sysroot applied
    disk_build_id: Optional[str] = None
    status: Optional[str] = None  # "match" | "mismatch" | "missing" | "present" | "special"

    CONTRACT = ("path", "build_id", "found", "disk_build_id", "status")


@recordclass
class CoreDump(Record):
    """``Process.coredump``: systemd-coredump's record of the core (``--coredumpctl``), each key
    written only when the journal had it."""

    from_: Optional[str] = None  # "coredumpctl"
    pid: Optional[int] = None
    signal: Optional[str] = None
    time: Optional[str] = None
    executable: Optional[str] = None
    cmdline: Optional[str] = None
    hostname: Optional[str] = None
    uid: Optional[int] = None
    storage: Optional[str] = None  # where the core went
    corefile: Optional[str] = None  # coredumpctl's "present", "missing" ...
    dumped: Optional[bool] = None  # True: the tool ran `coredumpctl dump` to get the file


@recordclass
class Samples(Record):
    """``Process.samples``: a live process sampled more than once (``--samples``)."""

    count: int = 0
    window_s: Optional[float] = None  # from the first sample to the last
    interval_s: Optional[float] = None
    seed: Optional[int] = None  # of the jittered intervals (``HANGANALYZE_SAMPLE_SEED`` fixes it)
    #: Why sampling went on past ``--samples`` (the adaptive window), None when it did not.
    extended: Optional[str] = None

    CONTRACT = ("count", "window_s", "interval_s")


@recordclass
class Process(Record):
    source: str = "core"  # "core" | "live" | "text"
    pid: Optional[int] = None
    executable: Optional[str] = None
    argv: Optional[List[str]] = None
    signal: Optional[str] = None  # "SIGABRT" ...
    python: Optional[PythonFacts] = None
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
    #: The rest of the distributed identity (world size, local rank, host ...) and where it was read.
    dist: Optional[DistIdentity] = None
    #: The acquisition of this process failed (gdb timed out, pid gone ...): one line, no threads.
    error: Optional[str] = None
    #: Why no stack was read although the process was (no ptrace permission: its threads and their
    #: kernel state come from /proc only, ``acquire/noptrace.py``); the analysis did not see it whole.
    no_stacks: Optional[str] = None
    #: Collective progress from PyTorch's flight recorder (or watchdog lines): see ``model.collectives``.
    collectives: Optional[Collectives] = None
    #: Every file the core maps, and whether the file found for it here is the same build.
    mapped_files: List[MappedFile] = field(default_factory=list)
    #: Where the core came from, when systemd-coredump stored it (``--coredumpctl``).
    coredump: Optional[CoreDump] = None
    #: Job view: the inputs this rank's state was joined from, e.g. ["stacks", "flight-recorder",
    #: "log"] (``analyze/rankjoin.py``); where they disagree is in ``notes``.
    sources: List[str] = field(default_factory=list)
    #: A live process sampled more than once; each thread's ``progress`` says what moved.  None for
    #: one sample (a core, ``--samples 1``).
    samples: Optional[Samples] = None
    #: asyncio: every event loop, its tasks, their coroutine stacks and awaits (``model.asyncio``).
    asyncio: Optional[AsyncioState] = None
    #: A child of a rank captured as part of that rank (``--job``): the pid of the rank it belongs
    #: to, and what it is for that rank ("dataloader-worker", "compile-worker", "mp-child",
    #: "child"), decided from its frames and command line (``acquire/children.py``).  A child is
    #: never a rank of its own: it lives in its rank's ``children``, not in ``Snapshot.processes``.
    parent: Optional[int] = None
    role: Optional[str] = None
    children: List[Process] = field(default_factory=list)
    #: The kernels its GPUs ran, sampled by cuda-gdb (``--gpu-kernels``) or pasted: ``model.cudakernels``.
    cuda_kernels: Optional[CudaKernels] = None
    #: A live read: seconds the process was held stopped while it was read; the samples take it
    #: out of the time its threads could run (never written: TRANSIENT).
    stopped_s: Optional[float] = None
    #: The input file this process was read from, absolute (node summaries name it; never written).
    input_file: Optional[str] = field(default=None, compare=False, repr=False)

    #: Where this rank is, when its input already says so (a node summary's row: the process has
    #: no stacks to compute it from); the job rules take it instead of ``rankstate.rank_state``.
    #: Never written (TRANSIENT): the report's ``job.states`` shows it.
    rank_state: Optional[JobRankState] = None

    CONTRACT = ("source", "pid", "executable", "argv", "signal", "python", "threads")
    TRANSIENT = ("stopped_s", "input_file", "rank_state")

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
class TriageThread(Record):
    """A thread of the triage (``Triage.threads``): its wait and the frame it is blamed on."""

    tid: Optional[int] = None
    name: Optional[str] = None
    wait: Optional[str] = None  # a wait category's id (``signatures/triage/waits.yaml``)
    waits_in: Optional[str] = None  # the frame that waits
    blame: Optional[str] = None  # the frame it is blamed on
    owner: Optional[int] = None  # LWP holding what it waits for, when known
    #: A forked child's lock wait: "forked" (the fork frames show it) or "likely" (``analyze/forkchild.py``).
    inherited: Optional[str] = None

    CONTRACT = ("tid", "name", "wait", "waits_in", "blame")


@recordclass
class Triage(Record):
    """``Finding.triage`` of the triage finding (``analyze/triage.py``): what the process waits for."""

    wait: Optional[str] = None  # the category's id: "crashed", "runs", "collective" ...
    label: Optional[str] = None  # the category for people
    about: List[Optional[int]] = field(default_factory=list)  # the tids the verdict is about
    blame: Optional[str] = None  # the blame frame (the bucket names it)
    threads: List[TriageThread] = field(default_factory=list)  # at most ``triage.MAX_LISTED``
    from_: Optional[str] = None  # what decided it: "frames", "log", "samples" ...

    CONTRACT = ("wait", "label", "about", "blame", "threads", "from_")


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
    #: The triage finding (signature ``triage``): the wait, the threads, the blame frame.
    triage: Optional[Triage] = None

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
    #: Default scrubbing (``analyze/scrub.py``): {"values": N, "kinds": {kind: n}}, or {"kept": N} with
    #: --no-redact; absent when nothing secret-shaped was found (the report is then unchanged).
    scrubbed: Optional[Dict[str, Any]] = None
    #: GPU state of the job's host(s) (``model/gpustate.py``): saved nvidia-smi output, kernel-log Xid lines.
    gpu: Optional[GpuState] = None
    #: The distinct frames and stacks (``model/stacktable.py``), kept once built (never written).
    stack_table: Optional[StackTable] = field(default=None, compare=False, repr=False)

    #: The node summary of this snapshot (``--format node``): captured from an analyzed node, or
    #: read from summaries (then its processes are rows without stacks).  Never written in the
    #: report (TRANSIENT): ``render/node.py`` writes it as its own format.
    node_summary: Optional[NodeSummary] = None

    CONTRACT = ("processes", "findings", "bucket")
    TRANSIENT = ("stack_table", "node_summary")

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
from .stacktable import StackTable  # noqa: E402 - after Snapshot: model.stacktable imports it
