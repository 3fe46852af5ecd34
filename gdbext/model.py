"""The snapshot model shared by gdbext (inside gdb) and the analyzer.

This is the single definition of the `hanganalyze/1` JSON contract.  It lives in gdbext
because gdb's embedded Python has only the standard library and may be as old as 3.8; the
analyzer imports it as ``hanganalyze.gdbext.model`` so both sides serialise the same shape.

Contract keys are always written (``None`` where unknown).  Extra keys are written only when
they carry information, so snapshots stay small and diff-friendly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

SCHEMA = "hanganalyze/1"

#: Severities a finding may carry, most serious first (used for exit codes and ordering).
SEVERITIES = ("crash", "deadlock", "hang", "error", "info")

#: Wait kinds a thread may report in ``Thread.waits["kind"]``.
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


def _drop_empty(d: Dict[str, Any], keep: tuple) -> Dict[str, Any]:
    """Keep contract keys always; drop extra keys whose value is None/empty/False."""
    return {k: v for k, v in d.items() if k in keep or (v is not None and v != [] and v != {} and v is not False)}


#: Function name of the marker frame that ends a stack the unwinder could not read further.
UNREADABLE_MARKER = "<stack unreadable>"


@dataclass
class Frame:
    """One frame, native or Python.  Lists of frames are innermost first, as gdb prints them."""

    kind: str  # "native" | "python"
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

    CONTRACT = ("kind", "function", "file", "line", "library", "address")

    def to_dict(self) -> Dict[str, Any]:
        d = {
            "kind": self.kind,
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "library": self.library,
            "address": self.address,
            "module": self.module,
            "inlined": self.inlined,
            "note": self.note,
            "marker": self.marker,
        }
        return _drop_empty(d, self.CONTRACT)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Frame:
        return cls(
            kind=d.get("kind", "native"),
            function=d.get("function"),
            file=d.get("file"),
            line=d.get("line"),
            library=d.get("library"),
            address=d.get("address"),
            module=d.get("module"),
            inlined=bool(d.get("inlined", False)),
            note=d.get("note"),
            marker=bool(d.get("marker", False)),
        )


@dataclass
class ThreadState:
    gil: Optional[str] = None  # "held" | "waiting" | "no" | None (unknown)
    gc: Optional[bool] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"gil": self.gil, "gc": self.gc}

    @classmethod
    def from_dict(cls, d: Optional[Dict[str, Any]]) -> ThreadState:
        d = d or {}
        return cls(gil=d.get("gil"), gc=d.get("gc"))


@dataclass
class Thread:
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
    #: What this thread is blocked on (see WAIT_KINDS):
    #: {"kind", "resource": "0x..", "name": str|None, "owner_tid": int|None, "frame": int|None,
    #:  "detail": str}
    waits: Optional[Dict[str, Any]] = None
    notes: List[str] = field(default_factory=list)

    CONTRACT = ("tid", "name", "state", "frames")

    def to_dict(self) -> Dict[str, Any]:
        d = {
            "tid": self.tid,
            "name": self.name,
            "state": self.state.to_dict(),
            "frames": [f.to_dict() for f in self.frames],
            "os_name": self.os_name,
            "python_name": self.python_name,
            "pthread_id": self.pthread_id,
            "current": self.current,
            "merge": self.merge,
            "python_frames": [f.to_dict() for f in self.python_frames],
            "waits": self.waits,
            "notes": self.notes,
        }
        return _drop_empty(d, self.CONTRACT)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Thread:
        return cls(
            tid=d.get("tid"),
            name=d.get("name"),
            state=ThreadState.from_dict(d.get("state")),
            frames=[Frame.from_dict(f) for f in d.get("frames") or []],
            os_name=d.get("os_name"),
            python_name=d.get("python_name"),
            pthread_id=d.get("pthread_id"),
            current=bool(d.get("current", False)),
            merge=d.get("merge"),
            python_frames=[Frame.from_dict(f) for f in d.get("python_frames") or []],
            waits=d.get("waits"),
            notes=list(d.get("notes") or []),
        )

    def all_frames(self) -> List[Frame]:
        """Frames to match against: merged frames plus any Python frames that could not be placed."""
        return list(self.frames) + list(self.python_frames)


@dataclass
class Library:
    path: str
    build_id: Optional[str] = None
    version: Optional[str] = None  # from the file name, e.g. libnccl.so.2.26.5 -> "2.26.5"

    def to_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "build_id": self.build_id, "version": self.version}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Library:
        return cls(path=d["path"], build_id=d.get("build_id"), version=d.get("version"))


@dataclass
class Process:
    source: str  # "core" | "live" | "text"
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
    #: Wait-for graph: {"nodes": [{"id","kind":"thread"|"resource","label"}],
    #: "edges": [{"src","dst","kind":"waits"|"held_by","label"}], "cycles": [[node ids]],
    #: "chains": [[node ids]]}
    waitgraph: Optional[Dict[str, Any]] = None
    label: Optional[str] = None  # e.g. "rank3" for multi-process pastes
    notes: List[str] = field(default_factory=list)
    #: Distributed rank (torch.distributed / MPI RANK), when known: the job view's key.
    rank: Optional[int] = None
    #: The rest of the distributed identity: {"local_rank", "world_size", "group_rank",
    #: "local_world_size", "host", "master_addr", "master_port", "from": where it was read}.
    dist: Optional[Dict[str, Any]] = None
    #: The acquisition of this process failed (gdb timed out, pid gone ...): one line, no threads.
    error: Optional[str] = None
    #: Collective progress from PyTorch's flight recorder (or watchdog lines):
    #: {"source", "file", "version", "comm_lib_version", "groups": {pg: {"last_enqueued",
    #:  "last_started", "last_completed", "ranks", "desc"}}, "entries": [{"seq", "pg", "op",
    #:  "state", "sizes", "call_site": [frame dicts, innermost first]}]}
    collectives: Optional[Dict[str, Any]] = None
    #: Every file the core maps: [{"path", "build_id" (from the core's memory), "found" (the file
    #: on the analyzing machine, --sysroot applied), "disk_build_id", "status": "match" |
    #: "mismatch" | "missing" | "present" | "special"}].
    mapped_files: List[Dict[str, Any]] = field(default_factory=list)
    #: Where the core came from, when systemd-coredump stored it (``--coredumpctl``): {"pid",
    #: "signal", "time", "executable", "cmdline", "hostname", "uid", "storage", "from"}.
    coredump: Optional[Dict[str, Any]] = None

    CONTRACT = ("source", "pid", "executable", "argv", "signal", "python", "threads")

    def to_dict(self) -> Dict[str, Any]:
        d = {
            "source": self.source,
            "pid": self.pid,
            "executable": self.executable,
            "argv": self.argv,
            "signal": self.signal,
            "python": self.python,
            "threads": [t.to_dict() for t in self.threads],
            "libraries": [lib.to_dict() for lib in self.libraries],
            "messages": self.messages,
            "waitgraph": self.waitgraph,
            "label": self.label,
            "notes": self.notes,
            "rank": self.rank,
            "dist": self.dist,
            "error": self.error,
            "collectives": self.collectives,
            "mapped_files": self.mapped_files,
            "coredump": self.coredump,
        }
        return _drop_empty(d, self.CONTRACT)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Process:
        return cls(
            source=d.get("source", "core"),
            pid=d.get("pid"),
            executable=d.get("executable"),
            argv=d.get("argv"),
            signal=d.get("signal"),
            python=d.get("python"),
            threads=[Thread.from_dict(t) for t in d.get("threads") or []],
            libraries=[Library.from_dict(x) for x in d.get("libraries") or []],
            messages=list(d.get("messages") or []),
            waitgraph=d.get("waitgraph"),
            label=d.get("label"),
            notes=list(d.get("notes") or []),
            rank=d.get("rank"),
            dist=d.get("dist"),
            error=d.get("error"),
            collectives=d.get("collectives"),
            mapped_files=list(d.get("mapped_files") or []),
            coredump=d.get("coredump"),
        )

    def thread_by_tid(self, tid: Optional[int]) -> Optional[Thread]:
        for t in self.threads:
            if t.tid == tid:
                return t
        return None


@dataclass
class Finding:
    signature: str
    title: str
    severity: str  # one of SEVERITIES
    process: int  # index into Snapshot.processes
    threads: List[int] = field(default_factory=list)  # tids
    summary: str = ""
    fix: List[str] = field(default_factory=list)
    references: List[str] = field(default_factory=list)
    #: Why it matched: [{"thread": tid, "frame": index, "rule": str, "text": str}, ...]
    evidence: List[Dict[str, Any]] = field(default_factory=list)
    # extras
    confidence: Optional[float] = None
    cause: Optional[str] = None
    #: Job view: the ranks at fault (cross-rank findings), or the ranks a per-rank finding holds for.
    ranks: List[int] = field(default_factory=list)
    #: Job view: every process index the finding holds for (``process`` is the first of them).
    processes: List[int] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        d = {
            "signature": self.signature,
            "title": self.title,
            "severity": self.severity,
            "process": self.process,
            "threads": self.threads,
            "summary": self.summary,
            "fix": self.fix,
            "references": self.references,
            "evidence": self.evidence,
            "confidence": self.confidence,
            "cause": self.cause,
            "ranks": self.ranks,
            "processes": self.processes,
        }
        keep = ("signature", "title", "severity", "process", "threads", "summary", "fix", "references", "evidence")
        return _drop_empty(d, keep)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Finding:
        return cls(
            signature=d["signature"],
            title=d.get("title", d["signature"]),
            severity=d.get("severity", "info"),
            process=int(d.get("process", 0)),
            threads=list(d.get("threads") or []),
            summary=d.get("summary", ""),
            fix=list(d.get("fix") or []),
            references=list(d.get("references") or []),
            evidence=list(d.get("evidence") or []),
            confidence=d.get("confidence"),
            cause=d.get("cause"),
            ranks=list(d.get("ranks") or []),
            processes=list(d.get("processes") or []),
        )


@dataclass
class Snapshot:
    processes: List[Process] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    bucket: Optional[str] = None
    # extras
    tool: Optional[Dict[str, Any]] = None  # {"name": "hanganalyze", "version": "..."}
    warnings: List[str] = field(default_factory=list)
    #: The job view, when several processes came in: {"world_size", "ranks", "missing",
    #: "classes": [{"ranks", "processes", "where"}], "tree": call tree (analyze/calltree.py)}.
    job: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        d = {
            "schema": SCHEMA,
            "processes": [p.to_dict() for p in self.processes],
            "findings": [f.to_dict() for f in self.findings],
            "bucket": self.bucket,
            "tool": self.tool,
            "warnings": self.warnings,
            "job": self.job,
        }
        return _drop_empty(d, ("schema", "processes", "findings", "bucket"))

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Snapshot:
        if d.get("schema") != SCHEMA:
            raise ValueError("not a %s snapshot (schema=%r)" % (SCHEMA, d.get("schema")))
        return cls(
            processes=[Process.from_dict(p) for p in d.get("processes") or []],
            findings=[Finding.from_dict(f) for f in d.get("findings") or []],
            bucket=d.get("bucket"),
            tool=d.get("tool"),
            warnings=list(d.get("warnings") or []),
            job=d.get("job"),
        )
