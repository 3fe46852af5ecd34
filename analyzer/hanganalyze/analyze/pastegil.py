"""The GIL's holder in a pasted native stack, so a GIL-vs-native-lock inversion is a cycle.

Why: thread A holds the GIL and waits for a native mutex M (an extension locking M without
releasing the GIL, CPython's head lock in tstate_delete_common); thread B owns M and waits in
take_gil.  A paste showed two waits ("the GIL", "a lock") and no cycle: nothing said who holds the
GIL.  gdb prints no GIL owner, but the stacks tell it by elimination: the GIL waiters are the
threads in take_gil / PyEval_RestoreThread / PyGILState_Ensure (or whose wait gdb printed on the
GIL's condition variable), and a Python thread blocked in a native lock wait that it did not enter
through one of CPython's GIL-releasing waits (``signatures/lists/gil_releasing_calls.yaml``) still
holds it.  When exactly one thread is such a candidate, the GIL waiters wait for it.

M's owner comes from gdb's printout (``acquire/text/gdbwaits.py``: ``__owner = N``).  Where the
paste printed none and the only threads that wait for anything but idle work are the GIL holder
and one GIL waiter, that waiter is M's owner by elimination (the holder waits for someone), told
as such at a lower confidence (``waitfor.ELIMINATED_CONFIDENCE``).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from hanganalyze.analyze.framelists import is_interpreter_frame, names
from hanganalyze.analyze.triagetable import Category, table
from hanganalyze.names import normalize_native_name, wait_name
from hanganalyze_gdbext.model import Frame, Process, Thread, Wait

#: Frames outward from a lock wait looked at for a GIL-releasing call.
RELEASE_WINDOW = 8
#: ``Wait.owner_inferred`` prefix of an owner found by elimination (``waitfor`` weighs it lower).
BY_ELIMINATION = "by elimination"
#: Categories of threads that wait for work, not for a resource another thread holds.
_PARKED = ("idle", "helper", "condition", "sleep")


def _category(cid: str) -> Optional[Category]:
    return next((c for c in table().categories if c.id == cid), None)


def _native_hit(cat: Optional[Category], frames: List[Frame], within: int) -> Optional[int]:
    if cat is None or cat.native is None:
        return None
    for i, f in enumerate(frames[:within]):
        if f.kind != "native" or f.marker or not f.function or f.function == "??":
            continue
        norm = normalize_native_name(f.function)
        if cat.native.search(norm) or cat.native.search(wait_name(norm)):
            return i
    return None


def _gil_wait(t: Thread) -> Optional[int]:
    if t.waits is not None and t.waits.kind == "gil":
        return t.waits.frame if t.waits.frame is not None else 0
    if t.state is not None and t.state.gil == "waiting":
        return 0
    cat = _category("gil")
    return _native_hit(cat, t.frames, cat.within if cat is not None else 12)


def _python_thread(t: Thread) -> bool:
    return any(f.kind == "python" or (f.kind == "native" and is_interpreter_frame(f)) or
               wait_name(f.function or "") == "pythread_wrapper" for f in t.all_frames() if not f.marker)


def _lock_wait(t: Thread) -> Optional[int]:
    """The frame where the thread waits for a native lock it may hold the GIL across."""
    if t.waits is not None and t.waits.kind in ("mutex", "futex", "rwlock"):
        i = t.waits.frame or 0
    else:
        i = _native_hit(_category("lock"), t.frames, 8)  # type: ignore[assignment]
        if i is None:
            return None
    releasing = names("gil_releasing_calls")
    for f in t.frames[i:i + 1 + RELEASE_WINDOW]:
        if f.function and wait_name(normalize_native_name(f.function)) in releasing:
            return None
    return i


def _parked(t: Thread) -> bool:
    return any(_native_hit(_category(c), t.frames, 10) is not None for c in _PARKED)


def infer_gil_holder(process: Process) -> Optional[Tuple[Thread, List[Thread]]]:
    """(the GIL holder, its waiters) recorded as waits of a pasted process, or None."""
    threads = [t for t in process.threads if t.tid is not None]
    if len({t.tid for t in threads}) != len(threads):
        return None
    waiters = [t for t in threads if _gil_wait(t) is not None]
    if not waiters:
        return None
    held = [t for t in threads if t.state is not None and t.state.gil == "held"]
    candidates = held or [t for t in threads if t not in waiters and _python_thread(t) and _lock_wait(t) is not None]
    if len(candidates) != 1:
        return None
    holder = candidates[0]
    how = ("py-bt / the capture says it holds the GIL" if held else
           "the only Python thread not waiting for the GIL that is blocked in a native lock wait it did not "
           "release the GIL for (no GIL-releasing call between the wait and the interpreter)")
    for t in waiters:
        if t.waits is not None and t.waits.kind == "gil" and t.waits.owner_tid is not None:
            continue
        frame = _gil_wait(t)
        detail = (t.waits.detail + "; " if t.waits is not None and t.waits.detail else "")
        t.waits = Wait(kind="gil", name="GIL", owner_tid=holder.tid, frame=frame,
                       detail="%sthe GIL held by LWP %s (%s)" % (detail, holder.tid, how),
                       owner_inferred="LWP %s holds the GIL: %s" % (holder.tid, how))
    i = _lock_wait(holder)
    if holder.waits is None and i is not None:
        holder.waits = Wait(kind="mutex", frame=i, detail="a native lock wait while holding the GIL (%s)" %
                            normalize_native_name(holder.frames[i].function or "??"))
    w = holder.waits
    if w is not None and w.kind in ("mutex", "futex", "rwlock") and w.owner_tid is None and len(waiters) == 1:
        others = [t for t in threads if t is not holder and t not in waiters]
        if all(_parked(t) for t in others):
            b = waiters[0]
            w.owner_tid = b.tid
            w.owner_inferred = ("%s: LWP %s, the only other thread that waits for anything but work, waits for the "
                                "GIL this thread holds; gdb printed no __owner for the lock" % (BY_ELIMINATION, b.tid))
            w.detail = "%s; held by LWP %s (%s)" % (w.detail or "a native lock wait", b.tid, BY_ELIMINATION)
    return holder, waiters
