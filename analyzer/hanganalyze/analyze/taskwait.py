"""What a process's asyncio tasks wait for, where no thread stack is in the input.

Why: asyncio's own prints of its tasks (``Task.print_stack``, ``python -m asyncio ps/pstree``) hold
the tasks and what each awaits but no thread: the triage, which reads threads, said nothing ("no
stack and no known line") though each task names its wait.  A task awaiting another task waits for
what that one waits for; the pending tasks' waits map onto the triage's categories (``_CATEGORY``)
and the most telling one (``waits.yaml``'s rank) answers, as a thread's would.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from hanganalyze.analyze.triagetable import Category, table
from hanganalyze_gdbext.model import Process
from hanganalyze_gdbext.model.asyncio import AsyncTask

#: ``AsyncAwait.kind`` -> the triage category (``waits.yaml``) of that wait.
_CATEGORY = {
    "future": "future", "executor": "future", "sleep": "sleep",
    "queue-get": "queue", "queue-put": "queue", "event": "condition", "condition": "condition",
    "lock": "lock", "semaphore": "lock",
}
#: Awaited tasks followed, at most (an await chain through gather()s).
MAX_CHAIN = 64


def _leaf_kinds(t: AsyncTask, by_id: Dict[str, AsyncTask]) -> List[str]:
    """The await kinds at the ends of ``t``'s await chain (another task's wait is this one's)."""
    out: List[str] = []
    todo, seen = [t], set()
    while todo and len(seen) < MAX_CHAIN:
        cur = todo.pop()
        if cur.id in seen:
            continue
        seen.add(cur.id)
        for a in cur.awaits:
            nxt = by_id.get(a.task) if a.task else None
            if nxt is not None:
                todo.append(nxt)
            elif a.kind in _CATEGORY:
                out.append(a.kind)
    return out


def tasks_wait(proc: Process) -> Optional[Tuple[Category, str]]:
    """(the category the pending tasks' most telling wait is, a one-line summary); None when the
    process has no asyncio task that waits on something known."""
    if proc.asyncio is None:
        return None
    tasks = [t for t in proc.asyncio.all_tasks() if t.state == "pending"]
    by_id = {t.id: t for t in proc.asyncio.all_tasks()}
    counts: Dict[str, int] = {}
    for t in tasks:
        for k in set(_leaf_kinds(t, by_id)):
            counts[_CATEGORY[k]] = counts.get(_CATEGORY[k], 0) + 1
    cats = {c.id: c for c in table().categories}
    known = sorted((cats[c].rank, c) for c in counts if c in cats)
    if not known:
        return None
    cat = cats[known[0][1]]
    waits = ", ".join("%d %s" % (counts[c], c) for _r, c in known)
    return cat, ("its asyncio tasks wait for %s (%d pending task(s): %s; no thread stack in the input)"
                 % (cat.label, len(tasks), waits))
