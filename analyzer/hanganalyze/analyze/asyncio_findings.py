"""asyncio findings from ``Process.asyncio`` (``pyasync`` read it): tasks that await each other
in a cycle, waits no live task or thread will complete, and a loop thread blocked inside a
coroutine.  Ids and texts are data (``signatures/rules/rules.yaml``: ``asyncio-await-cycle``,
``asyncio-orphan-wait``, ``asyncio-loop-blocked``); the decisions are here.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set

from hanganalyze.analyze.findings import from_rule
from hanganalyze.analyze.ruledecl import rule
from hanganalyze.analyze.rules import load_rules
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Evidence, Finding, Process, Snapshot, Thread
from hanganalyze_gdbext.model.asyncio import AsyncLoop, AsyncTask

CYCLE, ORPHAN, BLOCKED = "asyncio-await-cycle", "asyncio-orphan-wait", "asyncio-loop-blocked"
MAX_CYCLES = 16
MAX_EVIDENCE = 20
#: Waits only another task can complete (a producer put()s, someone set()s): orphaned when the
#: program has no other pending task at all and no other thread runs Python code.  A bare future
#: is not among them: I/O callbacks (a socket's data, a server's close) complete those.
_COMPLETED_BY_TASKS = ("queue-get", "queue-put", "event", "condition", "lock", "semaphore")
#: Innermost native frames of a loop thread that is waiting for I/O (idle), not blocked: the
#: selector's own waits (select()/poll() are not among them: time.sleep uses select before 3.11).
_IDLE_NATIVE = re.compile(r"epoll_wait|epoll_pwait|kevent")
_SELECTOR_FILES = ("selectors.py", "base_events.py")


@rule(CYCLE, ORPHAN, BLOCKED, stage="process",
      reads="Process.asyncio (event loops, tasks and what each awaits), the loop thread's frames")
def asyncio_findings(snapshot: Snapshot, db=None) -> List[Finding]:
    rules = load_rules()
    out: List[Finding] = []
    for pi, p in enumerate(snapshot.processes):
        if p.asyncio is None:
            continue
        for lp in p.asyncio.loops:
            out.extend(_cycles(pi, p, lp, rules.by_id(CYCLE)))
            out.extend(_orphans(pi, p, lp, rules.by_id(ORPHAN)))
            blocked = _blocked(pi, p, lp, rules.by_id(BLOCKED))
            if blocked is not None:
                out.append(blocked)
    return out


def _where(t: AsyncTask) -> str:
    fr = t.coroutine_stack[0] if t.coroutine_stack else None
    if fr is None:
        return ""
    return " at " + frame_text(fr, FrameStyle.TASK_WAIT)


def _label(t: AsyncTask) -> str:
    return "task %s" % (t.name or t.id)


def _cycles(pi: int, p: Process, lp: AsyncLoop, rule) -> List[Finding]:
    """Cycles of the task -> awaited-task graph (``await t`` and gather children)."""
    succ: Dict[str, List[str]] = {t.id: [a.task for a in t.awaits if a.task] for t in lp.tasks if t.state == "pending"}
    found: List[List[str]] = []
    seen_cycles: Set[frozenset] = set()
    done: Set[str] = set()
    for start in succ:
        if start in done or len(found) >= MAX_CYCLES:
            continue
        path: List[str] = []
        on_path: Dict[str, int] = {}
        stack = [(start, iter(succ.get(start, ())))]
        on_path[start] = 0
        path.append(start)
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                on_path.pop(node, None)
                done.add(node)
                continue
            if nxt in on_path:
                cyc = path[on_path[nxt]:]
                key = frozenset(cyc)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    found.append(cyc)
            elif nxt not in done and nxt in succ:
                on_path[nxt] = len(path)
                path.append(nxt)
                stack.append((nxt, iter(succ.get(nxt, ()))))
    out = []
    for cyc in found:
        tasks = [lp.task_by_id(i) for i in cyc]
        names = [_label(t) for t in tasks if t is not None]
        ev = [Evidence(thread=lp.thread, rule=CYCLE, text="%s awaits %s%s" % (
            _label(t), names[(k + 1) % len(names)], _where(t))) for k, t in enumerate(tasks) if t is not None]
        out.append(from_rule(rule, pi, " -> ".join(names + names[:1]), ev, 1.0, title=rule.text("title") % len(cyc),
                             threads=[lp.thread] if lp.thread is not None else []))
    return out


def _other_python_threads(p: Process, loop_tid: Optional[int]) -> List[Thread]:
    """Threads other than the loop's that run Python code (they may complete a wait through
    ``call_soon_threadsafe``), idle executor workers excepted."""
    out = []
    for t in p.threads:
        if t.tid == loop_tid:
            continue
        py = [f for f in t.all_frames() if f.kind == "python"]
        if py and not all((f.file or "").endswith(("threading.py", "futures/thread.py", "queue.py")) for f in py):
            out.append(t)
    return out


def _orphans(pi: int, p: Process, lp: AsyncLoop, rule) -> List[Finding]:
    """Tasks whose wait only another task could complete while no other task can run: every
    pending task of the loop waits on a queue, event, condition, lock or semaphore (or on such a
    task), none is scheduled, sleeping, in an executor or on a future I/O completes, and no other
    thread runs Python code."""
    pending = [t for t in lp.tasks if t.state == "pending"]
    if not pending:
        return []
    kinds = {a.kind for t in pending for a in t.awaits}
    live = kinds - set(_COMPLETED_BY_TASKS) - {"task", "gather"}
    if live or _other_python_threads(p, lp.thread):
        return []
    stuck = [t for t in pending if any(a.kind in _COMPLETED_BY_TASKS for a in t.awaits)]
    if not stuck:
        return []
    ev = []
    for t in stuck[:MAX_EVIDENCE]:  # 10,000 parked tasks make one finding, not 10,000 lines
        a = next(a for a in t.awaits if a.kind in _COMPLETED_BY_TASKS)
        ev.append(Evidence(thread=lp.thread, rule=ORPHAN, text="%s waits: %s%s" % (_label(t), a.detail or a.kind,
                                                                                  _where(t))))
    mutual = _mutual_wait(stuck)
    if mutual:
        return [_mutual_finding(pi, lp, rule, mutual, ev)]
    finished = [t for t in lp.tasks if t.state in ("finished", "cancelled")]
    summary = "%d task(s) wait on queues, events or futures, and no other task or thread can complete them" % len(
        stuck)
    if finished:
        summary += "; %d task(s) already ended (a producer that raised or returned?): %s" % (
            len(finished), ", ".join(_label(t) for t in finished[:5]))
    return [from_rule(rule, pi, summary, ev, 0.8, threads=[lp.thread] if lp.thread is not None else [])]


def _mutual_wait(stuck: List[AsyncTask]) -> List[AsyncTask]:
    """A cycle of stuck tasks where each waits on a resource the next one holds in its locals
    (``AsyncAwait.referenced_by``: the task that would set the event, put into the queue), or []:
    tasks waiting for each other's signals, not for a producer that ended."""
    by_id = {t.id: t for t in stuck}
    succ: Dict[str, List[str]] = {}
    for t in stuck:
        a = next(a for a in t.awaits if a.kind in _COMPLETED_BY_TASKS)
        succ[t.id] = [r for r in a.referenced_by if r in by_id and r != t.id]
    for start in succ:
        path, seen, node = [start], {start}, start
        while succ.get(node):
            node = succ[node][0]
            if node == start:
                return [by_id[i] for i in path]
            if node in seen:
                break
            seen.add(node)
            path.append(node)
    return []


def _resource_text(t: AsyncTask) -> str:
    a = next(a for a in t.awaits if a.kind in _COMPLETED_BY_TASKS)
    what = a.kind.split("-")[0]
    return "%s %s" % (what, a.name or a.resource or "?")


def _mutual_finding(pi: int, lp: AsyncLoop, rule, cycle: List[AsyncTask], ev: List[Evidence]) -> Finding:
    """The orphan rule's finding for tasks that wait for each other (its ``*_mutual`` texts)."""
    steps = ["%s waits on %s, held by %s" % (_label(t), _resource_text(t), _label(cycle[(k + 1) % len(cycle)]))
             for k, t in enumerate(cycle)]
    summary = "%d tasks wait for each other: %s" % (len(cycle), "; ".join(steps))
    return from_rule(rule, pi, summary, ev, 0.8, threads=[lp.thread] if lp.thread is not None else [],
                     title=rule.text("title_mutual"), cause=rule.text("cause_mutual"),
                     fix=[rule.text("fix_mutual"), rule.text("fix_timeout")])


def _blocked(pi: int, p: Process, lp: AsyncLoop, rule) -> Optional[Finding]:
    """The loop's thread is inside a task step (``Handle._run`` / the task's coroutine) and its
    innermost frames are a blocking call, not the selector's wait for I/O."""
    th = p.thread_by_tid(lp.thread)
    if th is None:
        return None
    frames = th.all_frames()
    py = [f for f in frames if f.kind == "python"]
    if not any(f.function in ("Handle._run", "_run") and (f.file or "").endswith("events.py") for f in py):
        return None  # not running a callback or a task step: idle or starting
    inner_py = py[0] if py else None
    if inner_py is not None and (inner_py.file or "").endswith(_SELECTOR_FILES):
        return None
    native = [f for f in frames[:4] if f.kind == "native"]
    if any(_IDLE_NATIVE.search(f.function or "") for f in native):
        return None
    if th.progress is not None and th.progress.state in ("progressing", "spinning"):
        return None  # samples say it moves: busy, not blocked
    running = lp.task_by_id(lp.current) if lp.current else None
    call = (native[0].function if native else None) or "??"
    where = frame_text(inner_py, FrameStyle.CALLER) if inner_py else "??"
    text = "the loop's thread %d is blocked in %s called from %s" % (th.tid, call, where)
    if running is not None:
        text += ", inside %s" % _label(running)
    waiting = sum(1 for t in lp.tasks if t.state == "pending") - (1 if running is not None else 0)
    ev = [Evidence(thread=th.tid, frame=frames.index(inner_py) if inner_py else None, rule=BLOCKED, text=text,
                   function=inner_py.function if inner_py else None)]
    return from_rule(rule, pi, text + "; %d other pending task(s) cannot run meanwhile" % max(waiting, 0), ev, 0.9,
                     threads=[th.tid])
