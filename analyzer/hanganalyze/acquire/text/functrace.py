"""A Python function-call trace: vLLM's ``VLLM_TRACE_FUNCTION=1`` log (``sys.settrace`` writing one
line per call and return, one file per process and thread), what its maintainers ask for when a run
hangs.

::

    2024-04-23 11:07:10.120781 Call to get_serialization_context in /x/ray/_private/worker.py:660
    2024-04-23 11:07:10.120801 Call to current_job_id in /x/ray/_private/worker.py:491 from f in /y.py:12
    2024-04-23 11:07:10.120820 Return from current_job_id in /x/ray/_private/worker.py:494 to f in /y.py:12

The calls not yet returned when the trace ends are the thread's stack at its last line: where it
stands if it hangs (the trace stops growing while the thread waits inside the last call, or in code
the trace does not cover).  A ``Return from`` pops the calls up to the one it returns from; a trace
cut at its top returns from calls it never saw (they are dropped).  When every call seen returned,
the last event's function is the one frame known.  Frames are innermost first, as every reader gives
them; the thread's note says the stack was rebuilt from a trace.
"""

from __future__ import annotations

import re
from typing import List, Tuple

from hanganalyze_gdbext.model import Process, Thread

from .common import cap_messages, python_frame, to_int

NAME = "function-trace"

_EVENT = re.compile(r"^(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d{1,9})?\s{1,4})?(Call to|Return from) "
                    r"([\w<>.]{1,300}) in (\S.{0,1000}?):(\d{1,9})"
                    r"(?: (?:from|to) [\w<>.]{1,300} in \S.{0,1000}?:\d{1,9})?$")
#: Events a text needs before it is read as a trace (a sentence "Call to foo in bar.py:3" is one).
MIN_EVENTS = 3
NOTE = "stack rebuilt from a function-call trace (VLLM_TRACE_FUNCTION): the calls not returned at its last line"


def score(lines: List[str]) -> float:
    n = sum(1 for x in lines if (" Call to " in x or " Return from " in x or x.startswith(("Call to", "Return from")))
            and _EVENT.match(x.strip()))
    return 1.5 * n if n >= MIN_EVENTS else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    stack: List[Tuple[str, str, int]] = []  # outermost first: (function, file, line)
    last: Tuple[str, str, int] = ("", "", 0)
    for line in lines:
        s = line.strip()
        m = _EVENT.match(s) if s else None
        if m is None:
            if s:
                messages.append(s)
            continue
        call = (m.group(2), m.group(3), to_int(m.group(4)) or 0)
        last = call
        if m.group(1) == "Call to":
            stack.append(call)
            continue
        at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == call[0] and stack[i][1] == call[1]), None)
        if at is not None:
            del stack[at:]
    rows = stack or ([last] if last[0] else [])
    if rows:
        t = Thread(current=True)
        t.notes.append(NOTE)
        for func, file, lineno in reversed(rows):
            t.frames.append(python_frame(func, file, lineno))
        t.merge = "python-only"
        proc.threads.append(t)
    proc.messages.extend(cap_messages(messages, proc.notes))
