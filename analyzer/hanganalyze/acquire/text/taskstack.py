"""asyncio's own print of a task's stack (``Task.print_stack()``, asyncio's debug dumps, a program's
loop over ``asyncio.all_tasks()``) -> ``Process.asyncio``.

::

    Stack for <Task pending name='Task-1' coro=<main() running at /app/m.py:10>
              wait_for=<Future pending cb=[Task.task_wakeup()]>> (most recent call last):   -> a task
      File "/app/m.py", line 10, in main                                                  -> its frames,
        await fut                                                                            outermost first
    No stack for <Task finished name='Task-2' coro=<f() done, defined at /app/m.py:3> result=None>
    Traceback for <Task finished ... exception=ValueError('x')> (most recent call last):

A task's repr names its coroutine's outermost frame (``coro=<main() running at FILE:LINE>``): where the
``File`` lines are cut from the paste (a CI log interleaves its own line links), that one frame stands
for the stack.  ``wait_for=<Future pending ...>`` is the future the task awaits; what completes it (a
socket's data, another task, a thread) is not in the print, so the wait is a plain future (``sleep`` where
the innermost frame is asyncio's sleep): the asyncio rules that need every task of the loop (an orphaned
queue wait) never fire on a print of some of them.  Lines that are neither are messages.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Process
from hanganalyze_gdbext.model.asyncio import AsyncAwait, AsyncioState, AsyncLoop, AsyncTask

from .common import cap_messages, parse_py_file_line, python_frame, to_int

NAME = "taskstack"

_HEAD = re.compile(r"^(Stack|Traceback|No stack) for <Task (pending|cancelled|finished)\b(.{0,4000})$")
_NAME = re.compile(r"\bname='([^']{1,200})'")
_CORO = re.compile(r"\bcoro=<([\w.<>]{1,200})\(\) (?:running at|done, defined at) (.{1,1000}?):(\d{1,9})>")
_RUNNING = re.compile(r"\bcoro=<[\w.<>]{1,200}\(\) running at ")
_WAIT_FOR = re.compile(r"\bwait_for=<(Future|Task|_GatheringFuture) pending\b")
MAX_TASKS = 100000


def score(lines: List[str]) -> float:
    heads = sum(1 for line in lines if line.lstrip().startswith(("Stack for <Task", "Traceback for <Task",
                                                                   "No stack for <Task"))
                and _HEAD.match(line.strip()))
    return 20.0 * heads


def _task(m: re.Match[str], n: int) -> AsyncTask:
    rest = m.group(3)
    name = _NAME.search(rest)
    t = AsyncTask(id="task-%d" % n, name=name.group(1) if name else None, state=m.group(2))
    coro = _CORO.search(rest)
    if coro and _RUNNING.search(rest):
        t.coroutine_stack.append(python_frame(coro.group(1).rsplit(".", 1)[-1], coro.group(2), to_int(coro.group(3))))
        t.notes.append("frames: the coroutine the task's repr names (its File lines are not in the text)")
    wait = _WAIT_FOR.search(rest)
    if wait and t.state == "pending":
        t.awaits.append(AsyncAwait(kind="future", detail="a %s it awaits (wait_for)" % wait.group(1)))
    return t


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    tasks: List[AsyncTask] = []
    cur: Optional[AsyncTask] = None
    own: List = []  # the current task's File frames, outermost first
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _HEAD.match(s) if s.startswith(("Stack for", "Traceback for", "No stack for")) else None
        if m and len(tasks) < MAX_TASKS:
            _finish(cur, own)
            cur, own = _task(m, len(tasks) + 1), []
            tasks.append(cur)
            continue
        parsed = parse_py_file_line(s)
        if parsed is not None and cur is not None:
            own.append(parsed[0])
            continue
        if cur is not None and own and line[:1] in (" ", "\t") and own[-1].source is None:
            own[-1].source = s  # the source line under a File line
            continue
        messages.append(s)
    _finish(cur, own)
    if tasks:
        proc.asyncio = AsyncioState(loops=[AsyncLoop(thread=None, tasks=tasks)], tasks_total=len(tasks),
                                    notes=["tasks as asyncio printed them (Task.print_stack): those the paste holds"])
    proc.messages.extend(cap_messages(messages, proc.notes))


def _finish(t: Optional[AsyncTask], own: List) -> None:
    """The task's File frames, innermost first, replace the one its repr names; a task asleep in
    asyncio's sleep waits for its timer."""
    if t is None:
        return
    if own:
        t.coroutine_stack = list(reversed(own))
        t.notes = [n for n in t.notes if not n.startswith("frames: ")]
    inner = t.coroutine_stack[0] if t.coroutine_stack else None
    if inner is not None and inner.function == "sleep" and (inner.file or "").endswith("asyncio/tasks.py"):
        for a in t.awaits:
            a.kind, a.detail = "sleep", "asyncio.sleep"
