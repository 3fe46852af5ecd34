"""``hang-locks``: the wait-for graph of the debugged process, as text (edges, then cycles and
chains in words).  Same collection and graph code as ``hang-dump`` and the analyzer."""

import gdb

from .collect import collect_process
from .commands import command, parser
from .model import waitgraph
from .model.labels import ThreadStyle, thread_label
from .model.termsafe import safe_lines


def format_graph(process) -> str:
    """Text for the terminal: one line per waiting thread, then the sentences."""
    graph = waitgraph.build(process)
    if not graph:
        return "hang-locks: no thread is waiting on a lock, join, the GIL or a futex we can name.\n"
    labels = {n.id: n.label for n in graph.nodes}
    lines = ["Wait-for graph (%d threads waiting):" % sum(1 for t in process.threads if t.waits)]
    for t in process.threads:
        w = t.waits
        if not w:
            continue
        owner = w.owner_tid
        holder = labels.get(waitgraph.thread_id(owner), "LWP %s" % owner) if owner is not None else "unknown"
        frame = w.frame
        where = ""
        if isinstance(frame, int) and 0 <= frame < len(t.frames):
            fr = t.frames[frame]
            where = "  at #%d %s" % (frame, fr.function or "??")
            if fr.file:
                where += " %s:%s" % (fr.file, fr.line)
        res = labels.get(waitgraph.resource_id(w, t.tid), w.resource)
        lines.append("  %s --%s--> %s [%s] held by %s%s" % (
            thread_label(t, ThreadStyle.WAIT), w.kind, res, w.resource or "?", holder, where))
    sentences = waitgraph.describe(process, graph)
    if sentences:
        lines.append("")
        lines.extend(sentences)
    if not graph.cycles:
        lines.append("No deadlock cycle.")
    return safe_lines(lines)  # labels and frames come from the inferior: no raw ESC/newline


_LOCKS = parser(
    "hang-locks", "hang-locks [--no-python]",
    "Print the wait-for graph of the debugged process: who waits for which mutex, RLock, join or\n"
    "the GIL, who holds it, and every deadlock cycle in words.",
)
_LOCKS.add_argument("--no-python", action="store_true", help="skip the Python frames and locks")


@command(_LOCKS)
def hang_locks(args, from_tty):
    proc = collect_process(with_python=not args.no_python, with_locks=True)
    gdb.write(format_graph(proc))
