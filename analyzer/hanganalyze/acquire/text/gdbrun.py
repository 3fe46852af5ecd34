"""A gdb paste of a program gdb started itself (``gdb --args python train.py``, then ``run``), told
by the addresses on its frame lines.

Why: such a session ends in a ``bt`` when gdb stops the program at a signal, and a program is run
under gdb to catch a crash (a hang is attached to: ``gdb -p PID``, py-spy); a paste cut to the
middle of the crashing stack (interpreter frames only, no signal line) read as "runs" (blind
round 9: 3dgrut-2, maskrcnn-benchmark-21).  gdb turns address-space randomisation off for the
programs it starts (``set disable-randomization on``, its default), so on x86-64 Linux the main
thread's stack lies in the last MiB below ``0x7ffffffff000``, the first libraries right under the
loader (``0x7ffff7xxxxxx``) and a PIE executable at ``0x555555554000``.  With randomisation on, each
of these places is hit by chance about once in 10^5 processes (16 GiB of stack positions, 1 TiB of
mmap bases).  Only the triage reads the note, and only where no frame names a wait and no signal
line names another stop (a Ctrl-C's SIGINT): a wait shown under gdb is still the wait.
"""

from __future__ import annotations

import re
from typing import List

from hanganalyze.loglines import GDB_RUN_NOTE
from hanganalyze_gdbext.model import Process

#: A gdb frame line (``#12 0x... in f (...)``, ``#3  f (...) at x.c:1``) and its continuation.
_FRAME_LINE = re.compile(r"^\s*#\d{1,5}\s")
#: The main thread's stack (the last MiB below 0x7ffffffff000), the libraries under the loader, a
#: PIE executable's first 11 MiB: where they lie with randomisation off.
_UNRANDOMISED = re.compile(r"\b0x0{0,4}(?:7ffffff[0-9a-f]{5}|7ffff7[0-9a-f]{6}|555555[5-9a-f][0-9a-f]{5})\b")
#: The top of the user address space itself is a constant some programs print (TASK_SIZE, a mask).
_CONSTANTS = ("0x7fffffffffff", "0x7ffffffff000", "0x00007fffffffffff", "0x00007ffffffff000")


def unrandomised(lines: List[str]) -> bool:
    """A frame line of the paste holds an address only a program started with randomisation off
    has (``_UNRANDOMISED``)."""
    for line in lines:
        if _FRAME_LINE.match(line) and "0x" in line:
            if any(m.group(0) not in _CONSTANTS for m in _UNRANDOMISED.finditer(line)):
                return True
    return False


def note_gdb_run(lines: List[str], procs: List[Process]) -> None:
    """Mark the processes of a gdb paste whose addresses show a program gdb started (``GDB_RUN_NOTE``)."""
    if procs and unrandomised(lines):
        for p in procs:
            if GDB_RUN_NOTE not in p.notes:
                p.notes.append(GDB_RUN_NOTE)
