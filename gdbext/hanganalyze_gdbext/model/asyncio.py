"""asyncio in the snapshot: ``Process.asyncio`` -> loops -> tasks -> what each task awaits.

A hung asyncio program's stuck work is in suspended coroutines, on no thread's stack, so tasks
are their own part of the model: each with its coroutine stack (``Frame``s, innermost first, as
thread frames are), what it awaits (``AsyncAwait``: another task, a gather's children, a queue,
an event, an executor thread...) and which tasks await it.  Standard library only (runs in gdb).
"""

from __future__ import annotations

from dataclasses import field
from typing import List, Optional

from . import Frame
from .record import Record, recordclass

#: What a pending task may await (``AsyncAwait.kind``).
AWAIT_KINDS = (
    "task",  # another task (``await t``)
    "gather",  # one child of a gather() it awaits (a task, or a plain future: detail)
    "future",  # a plain future nobody in memory is known to complete
    "queue-get", "queue-put",  # asyncio.Queue get()/put(): ``resource`` is the queue
    "event", "lock", "semaphore", "condition",  # asyncio synchronisation primitives
    "sleep",  # asyncio.sleep: a timer wakes it
    "executor",  # run_in_executor: a concurrent.futures.Future; ``thread`` runs it when known
    "scheduled",  # nothing awaited: ready to run, waiting for the loop
    "running",  # the loop's thread is running this task's step now
    "other",  # an awaitable of another kind (``detail`` names its type)
)


@recordclass
class AsyncAwait(Record):
    kind: str = "other"  # one of AWAIT_KINDS
    task: Optional[str] = None  # id of the awaited task
    detail: Optional[str] = None  # one line for people
    resource: Optional[str] = None  # "0x..": the queue, event, lock or future
    thread: Optional[int] = None  # LWP of the thread that will complete it (executor work item)
    #: The resource's name, from the code that holds it (``pyasync/names.py``: ``Worker._ready``,
    #: ``ready``, a local of the task that made it); None when none was found.
    name: Optional[str] = None
    #: Ids of the other pending tasks whose coroutine locals hold the resource (those that could
    #: complete it); tasks that each wait for what another holds wait for each other.
    referenced_by: List[str] = field(default_factory=list)

    CONTRACT = ("kind", "task", "detail")


@recordclass
class AsyncTask(Record):
    id: str = ""  # "0x..": the task object's address (unique within one snapshot)
    name: Optional[str] = None
    state: Optional[str] = None  # "pending" | "cancelled" | "finished" | "unknown"
    coroutine_stack: List[Frame] = field(default_factory=list)  # innermost first
    awaits: List[AsyncAwait] = field(default_factory=list)
    awaited_by: List[str] = field(default_factory=list)  # ids of the tasks that await this one
    # extras
    notes: List[str] = field(default_factory=list)

    CONTRACT = ("id", "name", "state", "coroutine_stack", "awaits", "awaited_by")


@recordclass
class AsyncLoop(Record):
    thread: Optional[int] = None  # LWP running it; None when it is not running (or unknown)
    tasks: List[AsyncTask] = field(default_factory=list)
    # extras
    id: Optional[str] = None  # "0x..": the loop object
    type: Optional[str] = None  # its class ("_UnixSelectorEventLoop")
    current: Optional[str] = None  # id of the task whose step the loop is running now

    CONTRACT = ("thread", "tasks")

    def task_by_id(self, tid: Optional[str]) -> Optional[AsyncTask]:
        for t in self.tasks:
            if t.id == tid:
                return t
        return None


@recordclass
class AsyncioState(Record):
    """``Process.asyncio``: every event loop with its tasks (None where asyncio is not imported)."""

    loops: List[AsyncLoop] = field(default_factory=list)
    # extras
    notes: List[str] = field(default_factory=list)
    tasks_total: Optional[int] = None  # tasks read (all loops)

    CONTRACT = ("loops",)

    def all_tasks(self) -> List[AsyncTask]:
        return [t for lp in self.loops for t in lp.tasks]
