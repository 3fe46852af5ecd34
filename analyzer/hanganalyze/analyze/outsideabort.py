"""A SIGABRT that no thread of the process raised: it came from outside, as a hung process is made
to dump core (``kill -ABRT PID``, ``kill -6``) or as systemd's service watchdog (``WatchdogSec=``)
ends a service that stopped answering.  A process that aborts itself shows it on the stack of the
thread that took the signal: ``abort``, ``raise``, ``pthread_kill`` or a fatal handler near its
top.  When the thread that took it instead stands in a named wait (``poll`` under ``zmq_poll``:
open round 71's salt-minion core from coredumpctl) and no thread shows an abort, the signal is
evidence of the kill, not of a crash, and the threads' waits are the answer.  An unnamed top frame
(a stripped C library's ``??``) proves nothing either way: a real abort looks the same there.
"""

from __future__ import annotations

from typing import Optional

from hanganalyze.analyze.crashframes import ABORT_DEPTH, CRASH_FRAMES
from hanganalyze.analyze.triagetable import table
from hanganalyze.names import normalize_native_name
from hanganalyze_gdbext.model import Frame, Process

#: The note the report carries when it reads a SIGABRT so.
NOTE = ("SIGABRT with no thread raising it: the signal came from outside (kill -ABRT, a service watchdog), "
        "as a hung process is made to dump core; the threads' waits are read as they stand")


def _named_wait(f: Optional[Frame]) -> bool:
    return f is not None and f.kind == "native" and table().waits_in(f)


def abort_from_outside(proc: Process) -> bool:
    """The process's SIGABRT was sent to it (see the module's docstring); notes it on the process."""
    if proc.signal != "SIGABRT" or not proc.threads:
        return False
    for t in proc.threads:
        top = [f for f in t.frames[:ABORT_DEPTH] if not f.marker and f.function]
        if any(CRASH_FRAMES.match(normalize_native_name(f.function or "")) for f in top):
            return False
    took = next((t for t in proc.threads if t.current), proc.threads[0])
    if not _named_wait(next((f for f in took.frames if not f.marker), None)):
        return False
    if NOTE not in proc.notes:
        proc.notes.append(NOTE)
    return True
