"""A rank that waits for its own children: the DataLoader case (issue 31).

A rank whose DataLoader worker hangs has its main thread in ``_get_data`` / ``_try_get_data`` ->
``queue.get`` -> ``connection.poll`` -> ``select``: its innermost Python frame is the standard
library's, which says nothing to the user.  What does: the user's line that asked for the batch
(the first frame outwards of the DataLoader that is the user's), and what the worker is doing
(its innermost frame of user code: ``decode_sample (data.py:14)``).  ``--job`` captures a rank's
workers in ``Process.children`` (``acquire/children.py``); a rank read without them (a core, a
paste) still gets its call site and "its DataLoader workers (not captured)".

A frame is the *user's* when it is a Python frame of neither the standard library, nor
``multiprocessing``, nor a framework (``framework_files``: torch, its DataLoader included).
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze.analyze.framelists import pattern
from hanganalyze.analyze.stacks import main_thread
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Frame, Process, Thread

#: The DataLoader's side of the wait for a batch (the main process's iterator).
_LOADER_FILE = "torch/utils/data/dataloader.py"
_LOADER_WAITS = frozenset(("_get_data", "_try_get_data", "_next_data"))
#: The interpreter's own library (not a site-packages below it).
_STDLIB = re.compile(r"(^|/)lib/python\d\.\d+t?/(?!(site|dist)-packages/)|^<frozen ")


def is_user_frame(f: Frame) -> bool:
    """A Python frame of the program's own code (see the module doc)."""
    if f.kind != "python" or f.marker:
        return False
    file = (f.file or "").replace("\\", "/")
    return not (_STDLIB.search(file) or pattern("framework_files").search(file) or pattern("ipc_files").search(file))


def user_frame_text(frames: List[Frame]) -> Optional[str]:
    """The innermost user frame of ``frames``, as the job view writes a place."""
    for f in frames:
        if is_user_frame(f):
            return frame_text(f, FrameStyle.RANK)
    return None


def loader_call_site(t: Thread) -> Optional[Tuple[str, int]]:
    """(the user's call site, its frame index) when ``t`` waits for a DataLoader batch with no user
    frame inside the wait; None otherwise.  Pure in the thread's frames (memoised per stack)."""
    frames = t.all_frames()
    for i, f in enumerate(frames):
        if is_user_frame(f):
            return None  # user code runs inside whatever waits: that is where it is
        if f.kind == "python" and _LOADER_FILE in (f.file or "").replace("\\", "/") \
                and (f.function or "").rsplit(".", 1)[-1] in _LOADER_WAITS:
            for j in range(i + 1, len(frames)):
                if is_user_frame(frames[j]):
                    return frame_text(frames[j], FrameStyle.RANK), j
            return None
    return None


def worker_text(p: Process) -> str:
    """What a rank waiting for a batch waits for: the worker in user code, else its workers."""
    workers = [c for c in p.children if c.role == "dataloader-worker"]
    if not workers:
        return "its DataLoader workers (not captured)"
    busy = []
    for w in workers:
        m = main_thread(w)
        where = user_frame_text(m.all_frames()) if m is not None else None
        if where:
            busy.append((w, where))
    if not busy:
        return "its DataLoader worker%s %s, none in user code (each waits for its next index)" % (
            "s" * (len(workers) > 1), ", ".join(str(w.pid) for w in workers))
    w, where = busy[0]
    more = " (and %d more worker%s in user code)" % (len(busy) - 1, "s" * (len(busy) > 2)) if len(busy) > 1 else ""
    return "DataLoader worker %s, which is in %s%s" % (w.pid, where, more)
