"""``hang-locks``: the wait-for graph of the debugged process, as text (edges, then cycles and
chains in words).  Same collection and graph code as ``hang-dump`` and the analyzer."""

import gdb

from .collect import collect_process
from .commands import command, parser
from .model import waitgraph
from .model.labels import ThreadStyle, thread_label
from .model.termsafe import safe_lines

#: Waits whose owner memory may not record: a cycle through them can be neither shown nor ruled out.
UNRECORDED_KINDS = ("pylock", "rwlock", "mutex", "futex")


def no_cycle_line(process) -> str:
    """"No deadlock cycle." only when every lock wait has a known owner: a plain threading.Lock
    records none, and a reader who sees "no deadlock" there reads an all-clear that was never
    checked."""
    unknown = [t for t in process.threads
               if t.waits and t.waits.owner_tid is None and t.waits.kind in UNRECORDED_KINDS]
    if not unknown:
        return "No deadlock cycle."
    names = ", ".join(waitgraph.thread_label(t, t.tid) for t in unknown[:6])
    return ("No deadlock cycle proven: %d thread(s) wait for a lock whose owner is unknown (not recorded or "
            "not found: %s); a cycle through them is not ruled out." % (len(unknown), names))


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
        holder = labels.get(waitgraph.thread_id(owner), "LWP %s" % owner) if owner is not None else \
            ("unknown (owner not recorded)" if w.kind == "pylock" else "unknown")
        if w.owner_inferred:
            holder += " (inferred from source: %s)" % w.owner_inferred
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
        lines.append(no_cycle_line(process))
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
