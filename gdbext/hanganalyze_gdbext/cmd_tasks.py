"""``hang-tasks``: every asyncio task of the debugged process -- name, state, what it awaits and
its coroutine stack -- read from memory (``pyasync``), as ``hang-bt`` shows thread stacks.  A
hung asyncio program's stuck work is in suspended coroutines that no ``bt`` shows."""

import gdb

from .commands import command, parser
from .gdbtarget import describe_process
from .model.termsafe import safe_lines
from .pyasync.build import describe_asyncio


def format_tasks(state, limit: int) -> str:
    """Text for the terminal: per loop its thread, then per task its wait and frames (innermost first)."""
    if state is None:
        return "hang-tasks: this process has not imported asyncio (or is not CPython).\n"
    lines = []
    for lp in state.loops:
        lines.append("Loop %s (%s) on %s: %d tasks" % (
            lp.id or "?", lp.type or "?", "LWP %d" % lp.thread if lp.thread is not None else "no running thread",
            len(lp.tasks)))
        for i, t in enumerate(lp.tasks):
            if i >= limit:
                lines.append("  ... %d more tasks (hang-tasks --limit N)" % (len(lp.tasks) - limit))
                break
            awaits = "; ".join(a.detail or a.kind for a in t.awaits) or "-"
            lines.append("  Task %s %s [%s] awaits: %s" % (t.id, t.name or "?", t.state, awaits))
            if t.awaited_by:
                lines.append("      awaited by: %s" % ", ".join(t.awaited_by))
            for k, f in enumerate(t.coroutine_stack):
                lines.append("      #%-3d %s (%s:%s)" % (k, f.function or "??", f.file or "?", f.line))
            for n in t.notes:
                lines.append("      note: %s" % n)
    for n in state.notes:
        lines.append("note: %s" % n)
    if not state.loops:
        lines.append("asyncio is imported, but no task exists.")
    return safe_lines(lines)  # names and frames come from the inferior: no raw ESC/newline


_TASKS = parser(
    "hang-tasks", "hang-tasks [--limit N]",
    "Print every asyncio task of the debugged process: its name, state, what it awaits (a task,\n"
    "a gather, a queue, an event, an executor thread...) and its coroutine stack, from memory.",
)
_TASKS.add_argument("--limit", type=int, default=200, help="tasks to print per loop (default 200)")


@command(_TASKS)
def hang_tasks(args, from_tty):
    pyproc = describe_process(gdb.selected_inferior())
    gdb.write(format_tasks(describe_asyncio(pyproc) if pyproc is not None else None, args.limit))
