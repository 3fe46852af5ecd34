"""A hang verdict about a process that crashed: where a thread of it stood when the process died is
context, not a hang.

The triage (``triage.py``) says "crashed" only on positive evidence: a fatal signal, a fatal line
("Fatal Python error", a crash handler's banner), abort on a stack.  A hang signature that matched a
thread of that same process (a network read with no timeout, a queue nobody feeds) describes that
thread's state at the moment of the crash: the user's problem is the crash, and a "hang" answer sends
them after a peer that never mattered.  Such a finding stays in the report as ``info``, its summary
saying why.  Only a finding read from threads' stacks: one read from log lines (a watchdog's timeout
line before the kill it led to) says what the process hung in before it died.  A deadlock signature
read from one thread's stack (a forked child's inherited lock, seen in glibc's malloc under the abort
of its own heap check: open round 67) is demoted the same way; the wait-for graph's cycle among
threads (``deadlock-cycle``) is left as it is, and so is a finding of a process the triage did not
call crashed, and a crash the triage read as a wait's consequence (a watchdog's abort after a collective's timeout
is the collective's: its triage says "collective", not "crashed").
"""

from __future__ import annotations

from typing import Sequence, Set

from hanganalyze_gdbext.model import Finding

NOTE = " (the process crashed: this is where the thread stood at the crash, not a hang on its own)"


def demote_hangs_of_crashed(findings: Sequence[Finding], triage: Sequence[Finding]) -> None:
    """Hang ``findings`` from the stacks of processes the ``triage`` findings call crashed become ``info``."""
    crashed: Set[int] = set()
    for f in triage:
        if f.signature == "triage" and f.triage is not None and f.triage.wait == "crashed":
            crashed.update(f.processes or [f.process])
    if not crashed:
        return
    for f in findings:
        procs = f.processes or [f.process]
        stacks = any(e.frame is not None for e in f.evidence) and all(e.message is None for e in f.evidence)
        if (f.severity in ("hang", "deadlock") and f.signature not in ("triage", "deadlock-cycle") and stacks
                and procs and all(p in crashed for p in procs)):
            f.severity = "info"
            f.summary = (f.summary or f.title) + NOTE
