"""What every report shows, computed once: summary facts, findings with their evidence, thread groups.

Renderers (text, Markdown, HTML) only lay this out; deciding *what* to show (grouping, idle
threads, which frames matched, which libraries matter) happens here so the formats agree.
All strings here are raw core data: each renderer escapes them for its own medium.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from hanganalyze.analyze.framelists import is_interpreter_frame, is_runtime_frame, pattern
from hanganalyze.analyze.grouping import ThreadGroup, group_threads
from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze.libversions import drop_shadowed, static_name, static_where
from hanganalyze.loglines import CHILDREN_NOTE
from hanganalyze.render.jobview import JobView, build_job_view
from hanganalyze.render.titles import process_title
from hanganalyze_gdbext.model import DistIdentity, Finding, Frame, Process, Snapshot, Thread, waitgraph
from hanganalyze_gdbext.model.labels import ThreadStyle, thread_label

#: Only these URL schemes become links in a report.
SAFE_URL = re.compile(r"^https?://[^\s<>\"'`]+$", re.IGNORECASE)


def safe_url(url: Any) -> Optional[str]:
    """An http(s) URL from a signature, or None: ``javascript:``, ``data:`` and friends never link."""
    if isinstance(url, str) and SAFE_URL.match(url.strip()):
        return url.strip()
    return None


def _base(path: Optional[str]) -> str:
    return (path or "").rsplit("/", 1)[-1]


@dataclass
class FrameView:
    index: int
    frame: Frame
    text: str
    matched: bool = False
    placed: bool = True  # False for Python frames that could not be merged (Thread.python_frames)

    @property
    def python(self) -> bool:
        return self.frame.kind == "python"

    @property
    def interpreter(self) -> bool:
        """A native frame of the CPython interpreter itself: shown dimmed, the Python frames carry the story."""
        return self.frame.kind == "native" and is_interpreter_frame(self.frame)


@dataclass
class GroupView:
    group: ThreadGroup
    frames: List[FrameView]
    anchor: str  # HTML id of the block
    default_os_name: Optional[str] = None

    @property
    def threads(self) -> List[Thread]:
        return self.group.threads

    @property
    def size(self) -> int:
        return self.group.size

    @property
    def idle(self) -> bool:
        return self.group.idle

    @property
    def label(self) -> str:
        return thread_label(self.group.first, ThreadStyle.REPORT, default_os_name=self.default_os_name)

    @property
    def hint(self) -> str:
        """Where the thread is, for a collapsed group: the innermost frame of its own code (Python
        first, else a native frame outside libc and the interpreter), e.g. ``in fetch (loader.py:130)``."""
        frames = [f for f in self.group.first.all_frames() if not f.marker]
        pick = next((f for f in frames if f.kind == "python"), None)
        if pick is None:
            pick = next((f for f in frames if f.function and f.function != "??" and not is_runtime_frame(f)
                         and not is_interpreter_frame(f)), None)
        if pick is None:
            return ""
        return "in " + frame_text(pick, FrameStyle.HINT)

    def tids(self, most: int, more: str = "...") -> str:
        """The group's thread ids, the first ``most`` of them, and how many there are in all."""
        text = ", ".join(str(t.tid) for t in self.threads[:most])
        return text + (", %s (%d in all)" % (more, self.size) if self.size > most else "")

    def badges(self) -> List[str]:
        out = []
        if self.group.in_finding:
            out.append("in finding")
        if self.group.has_current:
            out.append("current")
        if self.group.has_main:
            out.append("main")
        if self.group.idle:
            out.append("idle")
        waits = self.group.first.waits
        if waits and waits.kind:
            out.append("waits: %s" % waits.kind)
        return out


@dataclass
class EvidenceView:
    tid: Optional[int]
    thread: str
    frame: Optional[str]
    rule: str
    text: str
    anchor: Optional[str]


@dataclass
class FindingView:
    finding: Finding
    links: List[str]
    other_refs: List[str]
    evidence: List[EvidenceView]
    process_label: str
    #: The finding's labelled text fields that carry something, in ``DETAIL_FIELDS`` order: (key,
    #: label, text).  Every renderer writes these rows in its own markup, so a new text field of a
    #: finding is its model field plus one line of ``DETAIL_FIELDS``.
    details: List[Tuple[str, str, str]] = field(default_factory=list)


#: A finding's labelled text fields, as every format shows them: (attribute, key in the text report,
#: label in Markdown and HTML).
DETAIL_FIELDS: Tuple[Tuple[str, str, str], ...] = (
    ("cause", "cause", "Cause"),
)


def finding_details(f: Finding) -> List[Tuple[str, str, str]]:
    """(key, label, text) for each of ``DETAIL_FIELDS`` the finding fills."""
    return [(key, label, getattr(f, attr)) for attr, key, label in DETAIL_FIELDS if getattr(f, attr)]


@dataclass
class FileRow:
    """One row of the mapped-file table (a core's NT_FILE entry and what this machine has)."""

    path: str
    status: str  # match | mismatch | missing | present | special
    build_id: str  # from the core's memory ("" when the core lacks the file's first page)
    found: str  # the file on this machine ("" when none; the same as path unless --sysroot etc.)
    disk_build_id: str


@dataclass
class ProcessView:
    index: int
    process: Process
    title: str
    facts: List[Tuple[str, str]]
    libraries: List[Tuple[str, str]]
    groups: List[GroupView]
    thread_count: int
    idle_threads: int
    waitgraph_cycles: List[str] = field(default_factory=list)
    #: Every mapped file, the doubtful ones (mismatch, missing) first.
    files: List[FileRow] = field(default_factory=list)

    @property
    def files_line(self) -> str:
        """``24 mapped files: 20 match, 1 mismatch, 3 missing`` ("" without a table)."""
        return files_summary(self.files) if self.files else ""


@dataclass
class ReportView:
    snapshot: Snapshot
    headline: str
    bucket: Optional[str]
    findings: List[FindingView]
    processes: List[ProcessView]
    warnings: List[str]
    tool: str
    #: Warnings that put the stacks themselves in doubt (another build of the executable or a
    #: library than the one that ran): shown first, so the report is never read as sound without them.
    doubts: List[str] = field(default_factory=list)
    job: Optional[JobView] = None  # render/jobview.py
    #: Processes not shown because another of the same rank class is (large jobs).
    hidden_processes: int = 0


#: Our own wording (acquire.corefile, gdb's warning) for "these stacks may not be the real ones"
#: or "part of them is missing" (a truncated core).
_DOUBT = re.compile(r"may be wrong|may not match|does not match|core truncated:", re.I)


def doubts(warnings: List[str]) -> List[str]:
    """The warnings that question the stacks' correctness, in order."""
    return [w for w in warnings if _DOUBT.search(str(w))]


def default_os_name(p: Process) -> Optional[str]:
    """The comm name threads inherit: the executable's basename cut to 15 bytes, as Linux does."""
    base = _base(p.executable)
    return base[:15] if base else None


def matched_frames(snapshot: Snapshot) -> Dict[Tuple[int, Optional[int]], Set[int]]:
    """(process index, tid) -> indices into ``Thread.all_frames()`` named by finding evidence."""
    out: Dict[Tuple[int, Optional[int]], Set[int]] = {}
    for f in snapshot.findings:
        for e in f.evidence:
            if e.frame is not None and e.thread is not None:
                out.setdefault((f.process, e.thread), set()).add(e.frame)
    return out


def frame_views(t: Thread, matched: Set[int]) -> List[FrameView]:
    views = []
    n = len(t.frames)
    for i, f in enumerate(t.all_frames()):
        views.append(FrameView(i, f, frame_text(f, FrameStyle.REPORT, index=i), matched=i in matched, placed=i < n))
    return views


def library_version(base: str, version: Optional[str]) -> str:
    """A version worth showing: ``libnccl.so.2.21.5`` -> 2.21.5, but not an ABI number such as
    ``libc.so.6`` -> 6 or ``libpython3.12.so.1.0`` -> 1.0 (the Python version is shown on its own)."""
    if not version:
        return ""
    if base.endswith(".so." + version) and version.count(".") < 2:
        return ""
    return version


def key_libraries(p: Process) -> List[Tuple[str, str]]:
    """The libraries worth naming in a summary (``signatures/lists/key_libraries.yaml``), with versions."""
    key_library = pattern("key_libraries")
    seen = set()
    out = []

    for lib in drop_shadowed(list(p.libraries)):  # older snapshots may still list both
        static = static_name(lib.path)
        base = _base(lib.path) if static is None else static
        if not key_library.search(base) or base in seen:
            continue
        seen.add(base)
        version = library_version(base, lib.version)
        if static is not None:  # linked into another file: "libnccl.so 2.27.3 (static) in libfoo.so"
            where = static_where(lib.path)
            out.append((base, "%s (static)%s" % ((version or "").strip(), " in %s" % where if where else "")))
            continue
        if version and base.endswith(".so." + version):
            base = base[: -len(version) - 1]  # "libnccl.so 2.26.5", not "libnccl.so.2.26.5 2.26.5"
        out.append((base, version))
    return out


#: Order of the mapped-file table: what puts the stacks in doubt first.
FILE_STATUS_ORDER = ("mismatch", "missing", "match", "present", "special")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def file_rows(p: Process) -> List[FileRow]:
    """The mapped-file table of a core (``Process.mapped_files``), doubtful rows first."""
    rows = []
    for r in p.mapped_files:
        if not r.path:
            continue
        rows.append(FileRow(r.path, _text(r.status) or "?", _text(r.build_id), _text(r.found),
                            _text(r.disk_build_id)))
    order = {s: i for i, s in enumerate(FILE_STATUS_ORDER)}
    return sorted(rows, key=lambda row: order.get(row.status, len(order)))  # stable: core order within


def files_summary(rows: List[FileRow]) -> str:
    """``24 mapped files: 20 match, 1 mismatch, 3 missing``."""
    counts: Dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    order = list(FILE_STATUS_ORDER) + sorted(k for k in counts if k not in FILE_STATUS_ORDER)
    parts = ["%d %s" % (counts[k], k) for k in order if counts.get(k)]
    return "%d mapped file%s: %s" % (len(rows), "s" * (len(rows) != 1), ", ".join(parts))


def coredump_facts(p: Process) -> List[Tuple[str, str]]:
    """What systemd-coredump recorded (``--coredumpctl``): when and where, the command line."""
    cd = p.coredump
    if cd is None:
        return []
    bits = []
    if cd.time:
        bits.append(cd.time)
    if cd.hostname:
        bits.append("on host %s" % cd.hostname)
    bits.append("by systemd-coredump")
    who = [x for x in ("pid %s" % cd.pid if cd.pid is not None else "", _text(cd.signal)) if x]
    if who:
        bits.append("(%s)" % ", ".join(who))
    facts = [("dumped", " ".join(bits))]
    cmdline = _text(cd.cmdline)
    if cmdline and cmdline != " ".join(str(a) for a in p.argv or []):
        facts.append(("cmdline", cmdline))
    if cd.storage:
        facts.append(("stored", cd.storage))
    return facts


def process_facts(p: Process) -> List[Tuple[str, str]]:
    facts = [("source", p.source)]
    if p.rank is not None:
        dist = p.dist or DistIdentity()
        bits = ["%s" % p.rank]
        if dist.world_size is not None:
            bits.append("of %s" % dist.world_size)
        if dist.local_rank is not None:
            bits.append("(local %s)" % dist.local_rank)
        if dist.host:
            bits.append("on %s" % dist.host)
        facts.append(("rank", " ".join(bits)))
    if p.error:
        facts.append(("error", p.error))
    if p.pid is not None:
        facts.append(("pid", str(p.pid)))
    if p.executable:
        facts.append(("executable", p.executable))
    if p.argv:
        facts.append(("argv", " ".join(str(a) for a in p.argv)))
    facts.append(("signal", p.signal or "none"))
    py = p.python.version if p.python is not None else None
    facts.append(("python", py or "not detected"))
    facts.append(("threads", str(len(p.threads))))
    kids = next((n for n in p.notes if n.startswith(CHILDREN_NOTE)), None)
    if kids:  # a parent read alone: its children and the option that reads them too, seen at once
        facts.append(("children", kids[len(CHILDREN_NOTE):]))
    facts.extend(coredump_facts(p))
    rows = file_rows(p)
    if rows:
        summary = files_summary(rows).replace(" mapped files", " files").replace(" mapped file", " file")
        facts.append(("mapped", summary))
    return facts


def _cycles(p: Process) -> List[str]:
    """Deadlock cycles (then the chains blocked behind them) in words."""
    return waitgraph.describe(p) if p.waitgraph else []


#: Jobs up to this many processes show every process; larger ones one process per rank class.
SHOW_ALL_PROCESSES = 16


def shown_processes(snapshot: Snapshot) -> Set[int]:
    """Every process, or for a large job the first of each rank class plus those that failed."""
    n = len(snapshot.processes)
    job = snapshot.job
    if n <= SHOW_ALL_PROCESSES or job is None or not job.classes:
        return set(range(n))
    keep = {i for i, p in enumerate(snapshot.processes) if not p.threads}
    for c in job.classes:
        if c.processes and isinstance(c.processes[0], int):
            keep.add(c.processes[0])
    for f in snapshot.findings:
        keep.add(f.process)
    return {i for i in keep if 0 <= i < n}


def headline(snapshot: Snapshot) -> str:
    if snapshot.findings:
        f = snapshot.findings[0]
        more = len(snapshot.findings) - 1
        extra = " (+%d more finding%s)" % (more, "s" * (more > 1)) if more else ""
        return "%s: %s%s" % (f.severity.upper(), f.title, extra)
    sigs = [p.signal for p in snapshot.processes if p.signal]
    if sigs:
        return "No known bug matched; the process stopped with %s" % sigs[0]
    if any(p.no_stacks for p in snapshot.processes):  # acquire/noptrace.py: not "nothing matched" of a whole read
        return "No stack read (ptrace not permitted): threads and kernel state from /proc only, low confidence"
    return "No known bug matched"


def build_view(snapshot: Snapshot) -> ReportView:
    matched = matched_frames(snapshot)
    procs: List[ProcessView] = []
    anchors: Dict[Tuple[int, Optional[int]], str] = {}
    shown = shown_processes(snapshot)
    for i, p in enumerate(snapshot.processes):
        if i not in shown:
            continue
        groups = []
        for gi, g in enumerate(group_threads(snapshot, i, p)):
            anchor = "p%d-g%d" % (i, gi)
            for t in g.threads:
                if t.tid is not None:
                    anchors[(i, t.tid)] = anchor
            # frames are identical within a group: highlight what evidence matched in any member
            hit: Set[int] = set()
            for t in g.threads:
                hit |= matched.get((i, t.tid), set())
            groups.append(GroupView(g, frame_views(g.first, hit), anchor, default_os_name(p)))
        procs.append(
            ProcessView(
                index=i,
                process=p,
                title=process_title(i, p),
                facts=process_facts(p),
                libraries=key_libraries(p),
                groups=groups,
                thread_count=len(p.threads),
                idle_threads=sum(g.size for g in groups if g.idle),
                waitgraph_cycles=_cycles(p),
                files=file_rows(p),
            )
        )
    findings = []
    for f in snapshot.findings:
        proc = snapshot.processes[f.process] if 0 <= f.process < len(snapshot.processes) else None
        evs = []
        for e in f.evidence:
            tid = e.thread
            pi = e.process if e.process is not None else f.process
            if 0 <= pi < len(snapshot.processes):
                eproc: Optional[Process] = snapshot.processes[pi]
            else:
                pi, eproc = f.process, proc
            # evidence without a tid is process-level (a log line): never pin it on a tid-less thread
            t = eproc.thread_by_tid(tid) if eproc is not None and tid is not None else None
            frame_str = None
            if t is not None and e.frame is not None:
                frames = t.all_frames()
                if 0 <= e.frame < len(frames):
                    frame_str = frame_text(frames[e.frame], FrameStyle.REPORT, index=e.frame)
            if t is not None and eproc is not None:
                who = thread_label(t, ThreadStyle.REPORT, default_os_name=default_os_name(eproc))
            else:
                who = thread_label(None, ThreadStyle.REPORT, tid=tid) if tid is not None else "process"
            if len(snapshot.processes) > 1 and eproc is not None:
                who = "%s: %s" % (process_title(pi, eproc).split(" · ")[0], who)
            evs.append(
                EvidenceView(
                    tid=tid,
                    thread=who,
                    frame=frame_str,
                    rule=str(e.rule or ""),
                    text=str(e.text or ""),
                    anchor=anchors.get((pi, tid)),
                )
            )
        links = [u for u in (safe_url(r) for r in f.references) if u]
        others = [str(r) for r in f.references if not safe_url(r)]
        label = process_title(f.process, proc) if proc is not None else ""
        if f.ranks:
            label = "rank%s %s" % ("s" if len(f.ranks) > 1 else "", compress_ranks(f.ranks))
        elif len(f.processes) > 1:
            label = "%d processes" % len(f.processes)
        findings.append(FindingView(f, links, others, evs, label, finding_details(f)))
    tool = snapshot.tool or {}
    warnings = list(snapshot.warnings) + [n for p in snapshot.processes for n in p.notes
                                          if not n.startswith(CHILDREN_NOTE)]  # a fact of its process
    return ReportView(
        job=build_job_view(snapshot, procs),
        hidden_processes=len(snapshot.processes) - len(shown),
        snapshot=snapshot,
        headline=headline(snapshot),
        bucket=snapshot.bucket,
        findings=findings,
        processes=procs,
        warnings=warnings,
        tool="%s %s" % (tool.get("name", "hanganalyze"), tool.get("version", "")),
        doubts=doubts(warnings),
    )
