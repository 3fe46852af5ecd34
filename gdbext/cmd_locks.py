"""``hang-locks``: the wait-for graph of the debugged process, as text (edges, then cycles and
chains in words).  Same collection and graph code as ``hang-dump`` and the analyzer."""

import gdb

from . import waitgraph
from .collect import collect_process
from .commands import command
from .termsafe import safe_lines


def format_graph(process) -> str:
    """Text for the terminal: one line per waiting thread, then the sentences."""
    graph = waitgraph.build(process)
    if not graph:
        return "hang-locks: no thread is waiting on a lock, join, the GIL or a futex we can name.\n"
    labels = {n["id"]: n["label"] for n in graph["nodes"]}
    lines = ["Wait-for graph (%d threads waiting):" % sum(1 for t in process.threads if t.waits)]
    for t in process.threads:
        w = t.waits
        if not w:
            continue
        owner = w.get("owner_tid")
        holder = labels.get(waitgraph.thread_id(owner), "LWP %s" % owner) if owner is not None else "unknown"
        frame = w.get("frame")
        where = ""
        if isinstance(frame, int) and 0 <= frame < len(t.frames):
            fr = t.frames[frame]
            where = "  at #%d %s" % (frame, fr.function or "??")
            if fr.file:
                where += " %s:%s" % (fr.file, fr.line)
        res = labels.get(waitgraph.resource_id(w, t.tid), w.get("resource"))
        lines.append("  %s --%s--> %s [%s] held by %s%s" % (
            waitgraph.thread_label(t, t.tid), w.get("kind"), res, w.get("resource") or "?", holder, where))
    sentences = waitgraph.describe(process, graph)
    if sentences:
        lines.append("")
        lines.extend(sentences)
    if not graph.get("cycles"):
        lines.append("No deadlock cycle.")
    return safe_lines(lines)  # labels and frames come from the inferior: no raw ESC/newline


@command(
    "hang-locks",
    "Print the wait-for graph of the debugged process: who waits for which mutex, RLock, join or\n"
    "the GIL, who holds it, and every deadlock cycle in words.\n"
    "Usage: hang-locks [--no-python]",
)
def hang_locks(argv, from_tty):
    if any(a != "--no-python" for a in argv):
        raise gdb.GdbError("usage: hang-locks [--no-python]")
    proc = collect_process(with_python="--no-python" not in argv, with_locks=True)
    gdb.write(format_graph(proc))
