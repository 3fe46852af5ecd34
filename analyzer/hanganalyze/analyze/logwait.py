"""The wait a timeout line of the paste names, for a stack that names none.

Why: an ML job's paste holds a traceback (or a stack) and log lines that say which wait timed out:
ProcessGroupNCCL's watchdog, gloo's "Timed out waiting 1800000ms for recv operation", the c10d
store ("wait timeout after", "Timed out after 601 seconds waiting for clients", a store socket
that "timed out after 300000ms"), the store-based barrier, a torch elastic rendezvous, JAX's
coordination service barrier.  The text reader cuts such a paste into processes of their own (a
rank's prefixed log lines, the traceback), and the traceback is often cut before its innermost
frames or stands in code no frame list knows: its frames said "runs" while the line beside it
said what it waited for.  A stack that shows a wait keeps it: the line only fills in for frames
that name none (``triage.py``).

The lines are data: ``crashed.consequence_of`` in ``signatures/triage/waits.yaml`` (category id
-> regexes of the lines that say this wait timed out), the same lines that make a crash the
consequence of the wait whose timeout aborted it.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.crashframes import raised_by_timeout
from hanganalyze.analyze.triagetable import Category, table
from hanganalyze_gdbext.model import Process, Thread
from hanganalyze_gdbext.model.signals import FATAL_SIGNALS

#: Log lines read per paste, at most (a pasted log of a long run stays linear and bounded).
MAX_LINES = 20000


def timed_out(lines: Sequence[str]) -> Tuple[Optional[Category], Optional[int]]:
    """(the category whose timeout a line names, that line's index), in ``consequence_of``'s
    order; (None, None) when no line does."""
    tab = table()
    for cid, rx in tab.consequence_of.items():
        cat = tab.by_id(cid)
        if cat is None:
            continue
        for i, m in enumerate(lines[:MAX_LINES]):
            if rx.search(m):
                return cat, i
    return None, None


def paste_timeouts(processes: Sequence[Process]) -> Dict[int, Category]:
    """id(process) -> the wait a timeout line names among the lines of every process read from the
    same text (the same input file, or the one paste of a snapshot read from text): the reader's
    cut of a paste into a log and a traceback does not part the traceback from its log lines.
    Processes of different inputs (a job's rank files) never lend each other a line."""
    groups: Dict[Optional[str], List[Process]] = {}
    for p in processes:
        if p.source == "text":
            groups.setdefault(p.input_file, []).append(p)
    out: Dict[int, Category] = {}
    for members in groups.values():
        lines: List[str] = []
        for p in members:
            lines.extend(p.messages[:MAX_LINES - len(lines)])
        cat = timed_out(lines)[0]
        if cat is not None:
            out.update((id(p), cat) for p in members)
    return out


def crash_from_timeout(proc: Process, t: Thread, raised: bool) -> bool:
    """A crash known from a log line only ("Scheduler hit an exception:"), of a Python traceback
    with no exception of its own (cut before its last line, or a timeout's): no fatal signal says
    otherwise, so a timeout line of the paste says what ended it.  ``raised``: the traceback ends
    in an exception that is not a timeout (``crashframes.raised``): that exception is the crash.
    Likewise a process one of whose threads shows the c10 exception a timeout check raised (the
    watchdog's "terminate called" over its checkTimeout backtrace, the timeout's own line cut off
    into another rank's lines: open round 31's accelerate run)."""
    return (proc.signal not in FATAL_SIGNALS and not raised
            and (any(n.startswith("Python traceback") for n in t.notes)
                 or any(raised_by_timeout(x) for x in proc.threads)))


def message_category(proc: Process, cats: Optional[List[Category]] = None
                     ) -> Tuple[Optional[Category], Optional[int]]:
    """(the first category, crash first, whose log pattern a message of the process matches, the
    message's index); (None, None) when none does."""
    tab = table()
    for cat in cats if cats is not None else [tab.crashed] + tab.categories:
        if cat.messages is None:
            continue
        for i, m in enumerate(proc.messages[:MAX_LINES]):
            if cat.messages.search(m):
                return cat, i
    return None, None
