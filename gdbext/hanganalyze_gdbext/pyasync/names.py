"""Names for what asyncio tasks wait on (issue 30): an ``asyncio.Event`` (Queue, Lock...) is named
as ``pylocks`` names a thread's lock, from the code around it, instead of by its address; and the
other tasks that hold it in their locals (the ones that could set it) are listed, so a wait
between tasks that each hold what the other waits for reads as the mutual wait it is.

The name, first found: the attribute of an object in the waiter's calling coroutine frames that
holds it (``Worker._ready``), the module global of the calling frame (``ready``), else a fast local
that holds it: first in the tasks that do not wait on a primitive themselves (the code that made it
and handed it on, awaiting its workers: ``a`` in ``main``), by task number (``Task-N``), outermost
frame first; the waiter's own frames last (``mine``).
Standard library only, Python 3.8 syntax (runs in gdb); bad memory names nothing, never raises.
"""

from typing import Dict, List, Optional, Tuple

from .reader import AsyncReader, CoroFrame, TaskInfo

#: Index the locals of at most this many pending tasks (10,000 parked tasks keep their addresses).
MAX_TASKS = 256
#: Coroutine frames per task whose locals are read.
MAX_FRAMES = 8
#: Methods whose ``self`` is the primitive waited on (not a task holding it to set it).
_PRIMITIVE_METHODS = ("Queue.get", "Queue.put", "Event.wait", "Lock.acquire", "Semaphore.acquire",
                      "Condition.wait", "Event.set", "Queue.join")


class Holders:
    """value -> [(sort key, local name, task id)] of the pending tasks' coroutine locals, read once
    per snapshot (or nothing, over ``MAX_TASKS``); the key: (waits on a primitive, task number,
    depth from the outermost frame)."""

    def __init__(self, r: AsyncReader, infos: List[TaskInfo]):
        self.r = r
        self.by_value: Dict[int, List[Tuple[Tuple[bool, int, int], str, str]]] = {}
        pending = [ti for ti in infos if ti.state == "pending"]
        self.enabled = len(pending) <= MAX_TASKS
        if not self.enabled:
            return
        for n, ti in enumerate(pending):
            chain = ti.chain[:MAX_FRAMES]
            waits = bool(chain) and (chain[0].frame.function or "") in _PRIMITIVE_METHODS
            number = _task_number(ti.name, len(infos) + n)
            for depth, cf in enumerate(reversed(chain)):  # outermost first
                if (cf.frame.function or "") in _PRIMITIVE_METHODS:
                    continue
                for name, value in _locals(r, cf):
                    if name and name != "self":
                        self.by_value.setdefault(value, []).append(((waits, number, depth), name, ti.id))

    def name(self, waiter: TaskInfo, res: int) -> Optional[str]:
        """The resource's name (see the module docstring), or None."""
        if not self.enabled or not res:
            return None
        callers = [cf for cf in waiter.chain[1:MAX_FRAMES] if (cf.frame.function or "") not in _PRIMITIVE_METHODS]
        try:
            found = self.r.locks.attribute_name([cf.addr for cf in callers], res)
            if found:
                return found[0]
            for cf in callers[:1]:
                g = _globals(self.r, cf)
                name = self.r.locks.global_name(g, res) if g else None
                if name:
                    return name
        except Exception:  # noqa: BLE001 - a name is a nicety
            pass
        held = self.by_value.get(res, [])
        others = [h for h in held if h[2] != waiter.id]
        pick = sorted(others or held)
        return pick[0][1] if pick else None

    def referrers(self, waiter: TaskInfo, res: int) -> List[str]:
        """Ids of the other pending tasks whose coroutine locals hold the resource (could set it)."""
        out: List[str] = []
        for _key, _name, tid in self.by_value.get(res, []) if self.enabled else []:
            if tid != waiter.id and tid not in out:
                out.append(tid)
        return out


def _task_number(name: Optional[str], default: int) -> int:
    """N of asyncio's default name ``Task-N`` (creation order), else ``default`` (after them)."""
    if name and name.startswith("Task-") and name[5:].isdigit():
        return int(name[5:])
    return default


def _locals(r: AsyncReader, cf: CoroFrame) -> List[Tuple[Optional[str], int]]:
    try:
        return r.frame_locals(cf)
    except Exception:  # noqa: BLE001 - unreadable frame: nothing from it
        return []


def _globals(r: AsyncReader, cf: CoroFrame) -> int:
    """The module globals dict of a coroutine frame, or 0."""
    off = r.p.frame_keys.get("globals")
    if off is None:
        return 0
    g = r.u64(cf.addr + off)
    return g if g and r.type_name(g) == "dict" else 0
