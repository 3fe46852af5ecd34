"""Group threads with identical stacks and decide which groups are idle.

A report of a 300-thread trainer is unreadable unless the 280 identical data-loader or
thread-pool workers collapse into one block ("280 threads like this") and the parked ones are
visually pushed down.  Every renderer uses these groups, so text, Markdown and HTML agree on
what is grouped and what is idle.

The idle rule (documented in docs and used by every format): a group is *idle* when

* none of its threads is named by a finding (``Finding.threads`` or evidence), and
* it holds neither the main thread (tid == pid) nor the current thread (the one that got the
  signal), and
* its innermost meaningful wait is a known "waiting for work" call: an event-loop wait
  (``epoll_wait``, ``select``, ``poll``, ``accept``, ``sigwait``...), a condition-variable / futex
  wait inside a recognisable thread-pool worker loop, or a Python frame such as
  ``queue.Queue.get`` or ``selectors.*.select``.

The lists behind the rule are data (``signatures/lists/``): ``idle_native_waits``,
``condition_waits``, ``worker_loops``, ``idle_python`` and ``python_wait_helpers``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

from hanganalyze.analyze.framelists import in_python_frames, names, pattern
from hanganalyze.names import wait_name
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

#: How many innermost frames the idle rule looks at.
IDLE_DEPTH = 12


def stack_key(thread: Thread) -> Tuple:
    """Identity of a stack inside one process: every field but the thread's own identity."""
    return tuple(
        (f.kind, f.function, f.file, f.line, f.library, f.address, f.marker)
        for f in thread.all_frames()
    )


def finding_tids(snapshot: Snapshot, pindex: int) -> Set[int]:
    """Thread ids named by any finding of process ``pindex`` (threads or evidence)."""
    tids: Set[int] = set()
    for f in snapshot.findings:
        if f.process != pindex:
            continue
        tids.update(t for t in f.threads if t is not None)
        tids.update(e.thread for e in f.evidence if e.thread is not None)
    return tids


def _python_idle(frames: List[Frame]) -> bool:
    """The innermost Python frames (wait helpers skipped) are a known wait-for-work spot."""
    py = [f for f in frames if f.kind == "python" and not f.marker]
    for f in py[:4]:
        if in_python_frames(f, "idle_python"):
            return True
        if not in_python_frames(f, "python_wait_helpers"):
            return False
    return False


def _native_idle(frames: List[Frame]) -> bool:
    top = [f for f in frames[:IDLE_DEPTH] if f.kind == "native" and not f.marker]
    waits = [wait_name(f.function) for f in top]
    if not names("idle_native_waits").isdisjoint(waits[:6]):
        return True
    if not names("condition_waits").isdisjoint(waits[:6]):
        worker_loop = pattern("worker_loops")
        return any(worker_loop.search(f.function or "") for f in frames if f.kind == "native")
    return False


def is_idle_stack(thread: Thread) -> bool:
    """True when the stack alone says "waiting for work" (ignoring findings and main/current)."""
    frames = thread.all_frames()
    if not frames:
        return False
    if any(f.kind == "python" for f in frames):
        # A Python thread is idle only when its Python code says so: a cond wait under a
        # Python-level lock acquire is how every Python deadlock looks natively.
        return _python_idle(frames) or (
            _native_idle(frames) and wait_name(frames[0].function) in names("idle_native_waits")
        )
    return _native_idle(frames)


@dataclass
class ThreadGroup:
    """Threads of one process whose stacks are identical (same frames, same order)."""

    process: int
    threads: List[Thread] = field(default_factory=list)
    idle: bool = False
    in_finding: bool = False
    has_current: bool = False
    has_main: bool = False

    @property
    def frames(self) -> List[Frame]:
        return self.threads[0].all_frames() if self.threads else []

    @property
    def first(self) -> Thread:
        return self.threads[0]

    @property
    def size(self) -> int:
        return len(self.threads)

    def sort_key(self) -> Tuple:
        """Finding threads first, then the current/main thread, busy before idle, big groups first."""
        return (
            0 if self.in_finding else 1,
            0 if (self.has_current or self.has_main) else 1,
            1 if self.idle else 0,
            -self.size,
            self.first.tid if self.first.tid is not None else 0,
        )


def group_threads(snapshot: Snapshot, pindex: int, process: Optional[Process] = None) -> List[ThreadGroup]:
    """Identical-stack groups of one process, ordered for reading (see ``ThreadGroup.sort_key``)."""
    proc = process if process is not None else snapshot.processes[pindex]
    named = finding_tids(snapshot, pindex)
    by_key: Dict[Tuple, ThreadGroup] = {}
    order: List[ThreadGroup] = []
    for t in proc.threads:
        key = stack_key(t) if t.all_frames() else ("empty", t.tid)
        g = by_key.get(key)
        if g is None:
            g = ThreadGroup(process=pindex)
            by_key[key] = g
            order.append(g)
        g.threads.append(t)
        if t.tid in named:
            g.in_finding = True
        if t.current:
            g.has_current = True
        if proc.pid is not None and t.tid == proc.pid:
            g.has_main = True
    for g in order:
        g.idle = not (g.in_finding or g.has_current or g.has_main) and is_idle_stack(g.first)
    order.sort(key=ThreadGroup.sort_key)
    return order


def all_groups(snapshot: Snapshot) -> Iterable[Tuple[int, Process, List[ThreadGroup]]]:
    for i, p in enumerate(snapshot.processes):
        yield i, p, group_threads(snapshot, i, p)
