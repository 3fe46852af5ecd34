"""Linux ``perf top`` / ``perf report`` lines: what a user pastes when a process that seems hung keeps a
CPU busy (a compiler pass that never ends, a spin loop).

::

      58.03%  libtriton.so        [.] mlir::multiRootTopologicalSort        (perf top: share, object, symbol)
      12.57%  python  libc.so.6   [.] __memmove_avx_unaligned_erms         (perf report: share, command, object, symbol)
      60.00%    58.03%  python  libtriton.so  [.] mlir::...                (perf report --children: two shares)
       3.10%  [kernel]            [k] native_queued_spin_lock_slowpath     ([k]: a kernel symbol)

A profile is no stack: it says where the CPU time goes, not what calls what.  It is read as one thread
whose only frame is the hottest user-space symbol (the kernel's when every row is the kernel's): the
process runs there, it does not wait; the thread's notes list the hottest rows with their shares.
"""

from __future__ import annotations

import re
from typing import List, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages

NAME = "perf"

_ROW = re.compile(r"^\s{0,20}(\d{1,3}\.\d{1,2})%\s{1,40}(?:\d{1,3}\.\d{1,2}%\s{1,40})?(?:([^\s\[]\S{0,200})\s{1,80})?"
                  r"(\S{1,300})\s{1,80}\[([.kgu])\]\s{1,20}(\S.{0,3000}?)\s*$")
#: Rows a text needs before it is read as a profile.
MIN_ROWS = 2
#: Rows listed in the thread's notes.
LISTED = 5
NOTE = "a CPU profile (perf), not a stack: the process was running, its hottest symbol is the frame"


def _rows(lines: List[str]) -> List[Tuple[float, str, str, bool, int]]:
    """(share, object, symbol, kernel, line index) of each profile row."""
    out = []
    for i, line in enumerate(lines):
        m = _ROW.match(line) if "%" in line and "[" in line else None
        if m:
            out.append((float(m.group(1)), m.group(3), m.group(5), m.group(4) == "k", i))
    return out


def score(lines: List[str]) -> float:
    n = len(_rows(lines))
    return 1.5 * n if n >= MIN_ROWS else 0.0


def parse(lines: List[str], proc: Process) -> None:
    rows = _rows(lines)
    taken = {r[4] for r in rows} if len(rows) >= MIN_ROWS else set()
    if len(rows) >= MIN_ROWS:  # (one "58% [.] x" line is no profile)
        ranked = sorted(rows, key=lambda r: -r[0])
        top = next((r for r in ranked if not r[3]), ranked[0])
        thread = Thread()
        thread.notes.append(NOTE)
        thread.notes.append("perf's hottest: " + ", ".join("%s %.2f%%" % (r[2], r[0]) for r in ranked[:LISTED]))
        thread.frames = [Frame(kind="native", function=top[2], library=top[1] if top[1] != "[kernel]" else None)]
        proc.threads.append(thread)
    messages = [line.strip() for i, line in enumerate(lines) if i not in taken and line.strip()]
    proc.messages.extend(cap_messages(messages, proc.notes))
