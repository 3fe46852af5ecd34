"""Plain-Lock waits and their owners in pasted stacks (py-spy, pystack...), by the locks' names.

Why: a paste has no memory, so the wait analysis of live processes and cores (``gdbext/locks.py``,
``heldlocks.py``) has nothing to read, and two threads stuck in ``with lock_b:`` / ``with lock_a:``
were two unrelated lock waits.  The source of the frames still says it: the line a thread stands
on acquires ``lock_b`` (``with lock_b:`` on that line, or ``lock_b.acquire()``), and another
thread's frame is inside ``with lock_b:`` (``model/heldsource.py``).  Without addresses, names are
matched only where they provably name one object: a module global of the same file, spelled the
same way in both frames (``self.lock`` in two frames may be two locks).  Each edge says "inferred
from source" (``Wait.owner_inferred``); the cycle over them is an ordinary ``deadlock-cycle``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread, Wait, heldsource

#: The interpreter's own library (its locks are released in Condition.wait, never named here).
_STDLIB = re.compile(r"(^|/)lib/python3\.\d+t?/(?!(site|dist)-packages/)")
#: Frames a lock wait may show above the line that waits (``with cond:`` enters threading.py).
_LOCK_IMPL = re.compile(r"(^|/)threading\.py$")


def _python_frames(t: Thread) -> List[Frame]:
    return [f for f in t.all_frames() if f.kind == "python" and not f.marker and f.file and f.line]


def _awaited(t: Thread) -> Optional[Tuple[Frame, str]]:
    """(frame, lock name) when the thread's innermost own frame stands on a line that acquires a
    module-global lock; threading.py frames above it are how the acquisition waits."""
    for f in _python_frames(t):
        if _LOCK_IMPL.search(f.file or "") and _STDLIB.search(f.file or ""):
            continue
        if _STDLIB.search(f.file or ""):
            return None
        text = heldsource.acquiring_at(f.file, f.line, f.function)
        if text and heldsource.refers_to_global(f.file, f.line, f.function, text):
            return f, text
        return None
    return None


def infer_paste_waits(process: Process) -> None:
    """Add ``pylock`` waits with owners inferred from source to the threads of a pasted process."""
    threads = [t for t in process.threads if t.tid is not None]
    if len({t.tid for t in threads}) != len(threads):
        return  # threads must be told apart for the graph
    waiting: List[Tuple[Thread, Frame, str]] = []
    for t in threads:
        if t.waits is None:
            hit = _awaited(t)
            if hit is not None:
                waiting.append((t, hit[0], hit[1]))
    if not waiting:
        return
    held: Dict[Tuple[str, str], Dict[int, str]] = {}  # (file, name) -> {tid: how}
    for t in threads:
        for f in _python_frames(t):
            if _STDLIB.search(f.file or ""):
                continue
            for h in heldsource.held_at(f.file, f.line, f.function):
                if heldsource.refers_to_global(f.file, f.line, f.function, h.text):
                    held.setdefault((f.file or "", h.text), {}).setdefault(t.tid or 0, h.describe(f.file or "?"))
    for t, f, text in waiting:
        owners = held.get((f.file or "", text), {})
        if len(owners) != 1:
            continue
        tid, how = next(iter(owners.items()))
        index = next((i for i, g in enumerate(t.frames) if g is f), None)
        t.waits = Wait("pylock", None, text, tid, index,
                       detail="waiting for %s (named by its source line %s:%s: a paste has no addresses) held by "
                              "thread %s (inferred from source: %s)" % (text, f.file, f.line, tid, how),
                       owner_inferred=how)
