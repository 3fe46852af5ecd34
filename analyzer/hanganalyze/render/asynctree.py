"""The asyncio task tree of a process as text lines: per loop (and the thread running it), the
tasks nobody awaits at the top, each task's awaited tasks below it (``await t``, gather
children), each with what it waits on and its coroutine stack, outermost call first, as
``python -m asyncio pstree`` prints it.  Shared by the text report and ``hang-tasks``-like views.

Large programs have thousands of idle tasks: tasks whose stack and wait are the same are folded
into one line with a count, and the tree is cut after ``MAX_LINES`` lines with a note.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Process
from hanganalyze_gdbext.model.asyncio import AsyncLoop, AsyncTask
from hanganalyze_gdbext.model.labels import ThreadStyle, thread_label

MAX_LINES = 400
MAX_DEPTH = 32


def stack_text(t: AsyncTask) -> str:
    """``outer (file:line) > ... > inner (file:line)``: outermost coroutine first."""
    parts = [frame_text(f, FrameStyle.COROUTINE) for f in reversed(t.coroutine_stack)]
    return " > ".join(parts) or "(no coroutine frame: finished or not started)"


def wait_text(t: AsyncTask) -> str:
    if t.state != "pending":
        return t.state or "unknown"
    kinds = [a for a in t.awaits if a.kind != "gather"]
    if not t.awaits:
        return "pending"
    if not kinds:
        return "awaits gather() of %d" % len(t.awaits)
    a = kinds[0]
    out = a.kind
    if a.detail and a.kind not in ("task",):
        out += ": " + a.detail
    return out


def _key(t: AsyncTask) -> Tuple[str, str]:
    return stack_text(t), wait_text(t)


def loop_lines(lp: AsyncLoop, indent: str = "  ") -> List[str]:
    pending = sum(1 for t in lp.tasks if t.state == "pending")
    head = "loop %s%s on %s: %d task%s, %d pending" % (
        lp.id or "?", " (%s)" % lp.type if lp.type else "",
        thread_label(None, ThreadStyle.WHO, tid=lp.thread) if lp.thread is not None else "no running thread",
        len(lp.tasks), "s" * (len(lp.tasks) != 1), pending)
    out = [indent + head]
    by_id: Dict[str, AsyncTask] = {t.id: t for t in lp.tasks}
    children: Dict[str, List[AsyncTask]] = {}
    for t in lp.tasks:
        for a in t.awaits:
            if a.task and a.task in by_id and by_id[a.task] not in children.setdefault(t.id, []):
                children[t.id].append(by_id[a.task])
    roots = [t for t in lp.tasks if not t.awaited_by and t.state == "pending"]
    shown: Set[str] = set()
    cut = [False]

    def emit(line: str) -> None:
        if len(out) >= MAX_LINES:
            cut[0] = True
        else:
            out.append(line)

    def walk(nodes: List[AsyncTask], prefix: str, depth: int) -> None:
        groups: List[Tuple[AsyncTask, int]] = []
        seen_keys: Dict[Tuple[str, str], int] = {}
        for t in nodes:
            k = _key(t)
            if t.id not in children and k in seen_keys:  # fold identical leaves
                i = seen_keys[k]
                groups[i] = (groups[i][0], groups[i][1] + 1)
                shown.add(t.id)
                continue
            if t.id not in children:
                seen_keys[k] = len(groups)
            groups.append((t, 1))
        for i, (t, count) in enumerate(groups):
            last = i == len(groups) - 1
            branch, cont = ("└─ ", "   ") if last else ("├─ ", "│  ")
            again = t.id in shown and count == 1
            name = t.name or t.id
            label = "%s%s [%s]" % (name, " x%d (same stack and wait)" % count if count > 1 else "", wait_text(t))
            if again:
                emit(prefix + branch + "%s (shown above: awaited by several, or a cycle)" % name)
                continue
            shown.add(t.id)
            emit(prefix + branch + label)
            emit(prefix + cont + "   " + stack_text(t))
            if depth < MAX_DEPTH and children.get(t.id):
                walk(children[t.id], prefix + cont, depth + 1)

    walk(roots, indent + "  ", 0)
    rest = [t for t in lp.tasks if t.id not in shown and t.state == "pending"]
    if rest:  # tasks only reached through a cycle
        emit(indent + "  (tasks in an await cycle)")
        walk(rest[:1], indent + "  ", 0)
        rest = [t for t in lp.tasks if t.id not in shown and t.state == "pending"]
        if rest:
            walk(rest, indent + "  ", 0)
    ended = [t for t in lp.tasks if t.state != "pending"]
    if ended:
        emit(indent + "  ended (kept alive by a reference): " + ", ".join(
            "%s [%s]" % (t.name or t.id, t.state) for t in ended[:10]) + (" ..." if len(ended) > 10 else ""))
    if cut[0]:
        out.append(indent + "  ... cut at %d lines (%d tasks in all: JSON has every one)" % (MAX_LINES, len(lp.tasks)))
    return out


def process_lines(p: Process) -> List[str]:
    """Every loop of a process; [] when it has no asyncio state."""
    st = p.asyncio
    if st is None or not st.loops:
        return []
    out: List[str] = []
    for lp in st.loops:
        out.extend(loop_lines(lp))
    for n in st.notes[:5]:
        out.append("  note: " + n)
    return out


def loop_blocks(p: Process) -> List[Tuple[Optional[int], str, str]]:
    """(thread, head line, tree text) per loop, for views that place each loop's tree under the
    thread running it (HTML, Markdown); the text is plain: the caller escapes it."""
    out: List[Tuple[Optional[int], str, str]] = []
    for lp in p.asyncio.loops if p.asyncio else []:
        lines = loop_lines(lp, indent="")
        out.append((lp.thread, lines[0], "\n".join(line.rstrip() for line in lines[1:])))
    return out


def tasks_by_thread(p: Process) -> Dict[Optional[int], List[AsyncLoop]]:
    """Loops keyed by the thread running them (None: not running), for views placed under threads."""
    out: Dict[Optional[int], List[AsyncLoop]] = {}
    for lp in p.asyncio.loops if p.asyncio else []:
        out.setdefault(lp.thread, []).append(lp)
    return out
