"""``python -m asyncio ps PID`` and ``python -m asyncio pstree PID`` (CPython 3.14+) -> ``Process.asyncio``.

``ps`` prints one row per (task, awaiter) in fixed-width columns (narrowed here), innermost coroutine first::

    tid        task id              task name            coroutine stack    awaiter chain  awaiter name   awaiter id
    -----------------------------------------------------------------------------------------------------------------
    5616       0x7fb1a65185f0       Task-2               in_executor        main           Task-1         0x7fb1a6518410

``pstree`` prints the await tree, outermost first, with files and lines but no task ids or threads::

    └── (T) Task-1
        └──  main /app/m.py:108
            ├── (T) Task-2
            │   └──  in_executor /app/m.py:61

and refuses an await cycle (``ERROR: await-graph contains cycles``, then ``cycle: Task-2 → Task-3 →
Task-2``): the cycle's tasks are all it says, and all that is read.  Tasks become one loop per
thread id (ps) or one loop on an unknown thread (pstree); a task's ``awaits`` are the tasks that
name it as their awaiter, or, for a task awaiting no task, a kind guessed from its innermost
coroutine (``Queue.get`` -> queue-get, ``Event.wait`` -> event, ``sleep`` ...; else ``other``), so
the asyncio findings and the task tree come out as they do for a core.  A cut or mangled paste
gives the tasks it has; lines that are neither are messages.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process
from hanganalyze_gdbext.model.asyncio import AsyncAwait, AsyncioState, AsyncLoop, AsyncTask

from .common import cap_messages, python_frame, to_int

NAME = "asyncio"

_PS_TITLES = ("tid", "task id", "task name", "coroutine stack", "awaiter chain", "awaiter name", "awaiter id")
_PS_HEAD = re.compile(r"^tid\s+task id\s+task name\s+coroutine (?:stack|chain)\b")
_PS_ROW = re.compile(r"^(\d{1,10})\s+(0x[0-9a-fA-F]{1,16})\s+(.*?)\s*$")
_HEX = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
_RULE = re.compile(r"^-{40,}$")
_TREE = re.compile(r"^((?:[ │]{4})*)([└├])── (.*)$")
_CYCLE_ERR = "ERROR: await-graph contains cycles"
_CYCLE = re.compile(r"^cycle: (.+)$")
_COR = re.compile(r"^(\S+)(?: (.+):(\d{1,9}))?$")
MAX_TASKS = 200000
MAX_DEPTH = 256

#: Innermost coroutine -> what the task waits on (``AsyncAwait.kind``), for tasks awaiting no task.
_LEAF_KINDS = {
    "Queue.get": "queue-get", "Queue.put": "queue-put", "Queue.join": "condition",
    "Event.wait": "event", "Lock.acquire": "lock", "Semaphore.acquire": "semaphore",
    "BoundedSemaphore.acquire": "semaphore", "Condition.wait": "condition", "Condition.wait_for": "condition",
    "sleep": "sleep",
}


def score(lines: List[str]) -> float:
    out = 0.0
    tree_tasks = tree_cors = 0
    for line in lines:
        s = line.strip()
        if _PS_HEAD.match(s):
            out += 50
        elif s.startswith(_CYCLE_ERR):
            out += 50
        elif _PS_ROW.match(s):
            toks = s.split()
            if len(toks) >= 4 and _HEX.match(toks[-1]):
                out += 5
        else:
            m = _TREE.match(line.rstrip())
            if m:
                if m.group(3).startswith("(T) "):
                    tree_tasks += 1
                else:
                    tree_cors += 1
    if tree_tasks:
        out += 10 * tree_tasks + 2 * tree_cors
    return out


class _Tasks:
    """Tasks by id, in first-seen order, with the edges between them."""

    def __init__(self) -> None:
        self.by_id: Dict[str, AsyncTask] = {}
        self.thread: Dict[str, Optional[int]] = {}

    def get(self, tid: str, name: Optional[str], thread: Optional[int] = None) -> Optional[AsyncTask]:
        t = self.by_id.get(tid)
        if t is None:
            if len(self.by_id) >= MAX_TASKS:
                return None
            t = self.by_id[tid] = AsyncTask(id=tid, name=name or None, state="pending")
            self.thread[tid] = thread
        elif thread is not None and self.thread.get(tid) is None:
            self.thread[tid] = thread
        return t

    def edge(self, parent: AsyncTask, child: AsyncTask) -> None:
        if not any(a.task == child.id for a in parent.awaits):
            parent.awaits.append(AsyncAwait(kind="task", task=child.id))
        if parent.id not in child.awaited_by:
            child.awaited_by.append(parent.id)


def _stack_names(text: str) -> List[Frame]:
    """``sleep -> napper`` (innermost first, as ps prints it) -> frames, innermost first."""
    return [python_frame(n.strip(), None, None) for n in text.split(" -> ") if n.strip()]


def _ps_columns(head: str) -> Optional[List[int]]:
    starts = []
    for title in _PS_TITLES:
        i = head.find(title, starts[-1] + 1 if starts else 0)
        if i < 0:
            return None
        starts.append(i)
    return starts


def _split_ps(line: str, starts: Optional[List[int]]) -> Optional[Tuple[str, str, str, str, str, str, str]]:
    """One row's seven fields: by the header's columns while they line up (a field wider than its
    column pushes the rest right: its end is the next space not inside ``" -> "``), else by words."""
    m = _PS_ROW.match(line.strip())
    if not m:
        return None
    toks = line.split()
    if len(toks) < 4 or not _HEX.match(toks[-1]):
        return None
    if starts is not None and line[starts[1]:starts[1] + 2] == "0x" and line[:starts[1]].strip() == m.group(1):
        fields = [m.group(1), m.group(2)]
        cur = starts[2]
        for k in range(2, 6):
            end = cur + (starts[k + 1] - starts[k] - 1)
            if end >= len(line) or line[end] == " ":
                fields.append(line[cur:end].strip())
                cur = end + 1
                continue
            j = end
            while j < len(line):  # overflowed: up to the next space that does not join " -> "
                if line[j] == " " and line[j - 2:j + 1] != " ->" and line[j:j + 4] != " -> ":
                    break
                j += 1
            fields.append(line[cur:j].strip())
            cur = j + 1
        rest = line[cur:].strip()
        if _HEX.match(rest):
            return (fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], rest)
    # by words: name, stack and chain are joined by " -> ", the awaiter name is what is left
    mid = toks[2:-1]
    name = mid.pop(0) if mid else ""
    groups: List[str] = []
    while mid and len(groups) < 2:
        part = [mid.pop(0)]
        while len(mid) >= 2 and mid[0] == "->":
            part += [mid.pop(0), mid.pop(0)]
        groups.append(" ".join(part))
    stack = groups[0] if groups else ""
    if toks[-1] == "0x0" and not mid and len(groups) < 2:
        return (toks[0], toks[1], name, stack, "", "", toks[-1])
    chain = groups[1] if len(groups) > 1 else ""
    return (toks[0], toks[1], name, stack, chain, " ".join(mid), toks[-1])


def _parse_ps(lines: List[str], tasks: _Tasks, used: List[bool]) -> int:
    starts: Optional[List[int]] = None
    rows = 0
    for i, line in enumerate(lines):
        s = line.rstrip()
        if _PS_HEAD.match(s.strip()):
            starts = _ps_columns(s.lstrip())
            used[i] = True
            continue
        if _RULE.match(s.strip()):
            used[i] = True
            continue
        if not _PS_ROW.match(s.strip()):
            continue
        row = _split_ps(s.strip() if starts is None else s.lstrip(), starts)
        if row is None:
            continue
        used[i] = True
        rows += 1
        thread, task_id, name, stack, chain, awaiter_name, awaiter_id = row
        t = tasks.get(task_id, name, to_int(thread))
        if t is None:
            break
        if not t.coroutine_stack:
            t.coroutine_stack = _stack_names(stack)
        if awaiter_id not in ("0x0", ""):
            parent = tasks.get(awaiter_id, awaiter_name if awaiter_name != "Unknown" else None, to_int(thread))
            if parent is None:
                break
            if not parent.coroutine_stack and chain:
                parent.coroutine_stack = _stack_names(chain)
            tasks.edge(parent, t)
    return rows


def _parse_tree(lines: List[str], tasks: _Tasks, used: List[bool]) -> int:
    """pstree: tasks keyed by name (it prints no ids); a task's stack is the first path of
    coroutine frames below it (outermost first), as far as its first awaited task."""
    nodes = 0
    # (depth, nearest task, frames from that task down to here, outermost first)
    path: List[Tuple[int, Optional[AsyncTask], List[Frame]]] = []
    for i, line in enumerate(lines):
        m = _TREE.match(line.rstrip())
        if not m:
            if line.strip():
                path = []  # a tree line never follows a foreign line: a new tree (or a cut)
            continue
        used[i] = True
        nodes += 1
        depth = len(m.group(1)) // 4
        label = m.group(3)
        while path and path[-1][0] >= depth:
            path.pop()
        if len(path) >= MAX_DEPTH:
            continue
        owner, frames = (path[-1][1], path[-1][2]) if path else (None, [])
        if label.startswith("(T) "):
            name = label[4:].strip()
            t = tasks.get("task " + name, name)
            if t is None:
                break
            if owner is not None:
                tasks.edge(owner, t)
                if not owner.coroutine_stack and frames:
                    owner.coroutine_stack = list(reversed(frames))
            path.append((depth, t, []))
            continue
        c = _COR.match(label.strip())
        if c is None:
            f = python_frame(label.strip() or None, None, None)
        else:
            f = python_frame(c.group(1), c.group(2), to_int(c.group(3)))
        frames = frames + [f]
        if owner is not None and not any(a.kind == "task" for a in owner.awaits):
            have = list(reversed(owner.coroutine_stack))
            if len(frames) > len(have) and frames[:len(have)] == have:
                owner.coroutine_stack = list(reversed(frames))
        path.append((depth, owner, frames))
    return nodes


def _parse_cycles(lines: List[str], tasks: _Tasks, used: List[bool], notes: List[str]) -> int:
    found = 0
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith(_CYCLE_ERR):
            used[i] = True
            notes.append("python -m asyncio pstree refused an await cycle: only the cycle's tasks are known")
            continue
        m = _CYCLE.match(s)
        if not m:
            continue
        names = [n.strip() for n in re.split(r" (?:→|->) ", m.group(1)) if n.strip()]
        if len(names) < 2:
            continue
        used[i] = True
        found += 1
        chain = [tasks.get("task " + n, n) for n in names]
        for a, b in zip(chain, chain[1:]):
            if a is not None and b is not None:
                tasks.edge(a, b)
    return found


def _leaf_kinds(t: AsyncTask) -> None:
    if t.awaits:
        return
    inner = t.coroutine_stack[0].function if t.coroutine_stack else None
    kind = _LEAF_KINDS.get(inner or "")
    if kind is None and inner and inner.endswith(".acquire") and "Semaphore" in inner:
        kind = "semaphore"
    if kind is not None:
        t.awaits.append(AsyncAwait(kind=kind, detail=inner if kind != "sleep" else "asyncio.sleep()"))
    elif t.coroutine_stack:
        t.awaits.append(AsyncAwait(kind="other", detail="%s (what it awaits is not in the paste)" % inner))


def parse(lines: List[str], proc: Process) -> None:
    tasks = _Tasks()
    used = [False] * len(lines)
    notes: List[str] = []
    ps_rows = _parse_ps(lines, tasks, used)
    if ps_rows:
        notes.append("tasks from python -m asyncio ps: coroutine names only (no files or lines)")
        by_name = _Tasks()  # a pstree pasted with it gives files and lines
        if _parse_tree(lines, by_name, used):
            for t in tasks.by_id.values():
                other = by_name.by_id.get("task %s" % t.name)
                if other is not None and [f.function for f in other.coroutine_stack] == [
                        f.function for f in t.coroutine_stack]:
                    t.coroutine_stack = other.coroutine_stack
    else:
        if _parse_tree(lines, tasks, used):
            notes.append("tasks from python -m asyncio pstree: tasks are known by name (no ids), "
                         "the thread running the loop is not printed")
        _parse_cycles(lines, tasks, used, notes)
    if tasks.by_id:
        loops: Dict[Optional[int], AsyncLoop] = {}
        for t in tasks.by_id.values():
            _leaf_kinds(t)
            th = tasks.thread.get(t.id)
            if th not in loops:
                loops[th] = AsyncLoop(thread=th, type="python -m asyncio %s" % ("ps" if ps_rows else "pstree"))
            loops[th].tasks.append(t)
        proc.asyncio = AsyncioState(loops=list(loops.values()), notes=notes, tasks_total=len(tasks.by_id))
        if len(tasks.by_id) >= MAX_TASKS:
            proc.asyncio.notes.append("cut at %d tasks" % MAX_TASKS)
    messages = [line.strip() for line, u in zip(lines, used) if not u and line.strip()]
    proc.messages.extend(cap_messages(messages, proc.notes))
