"""Place each thread's Python frames among its native frames.

Rule: the Python frames run by one ``_PyEval_EvalFrameDefault`` activation go directly on the
innermost side of that native frame.  Two ways to prove which activation runs which frames:

1. Stack-address anchors (3.11+): the walker gives each group of Python frames an address that
   lies inside its eval activation's C stack frame (3.11 ``_PyCFrame``, 3.12+ entry/shim frame).
   The native frame whose ``[sp, caller sp)`` contains it is the activation.  Needs no symbol
   names, so ``.cold`` parts and stripped builds work.
2. Counting (3.8-3.10, or when an anchor is missing): native frames named
   ``_PyEval_EvalFrameDefault*`` pair one-to-one, innermost first, with the groups.  Only used
   when the counts agree (or the Python chain was truncated and fewer groups exist).

When neither proves the placement, the native frames stay as they are, the Python frames go to
``thread.python_frames`` and ``thread.merge = "unmerged"`` with a note: nothing is dropped or
guessed.
"""

from typing import Dict, List, Optional

from .model import Frame, Thread

EVAL_PREFIX = "_PyEval_EvalFrameDefault"
TAIL_CALL_PREFIX = "_TAIL_CALL_"  # 3.14 clang tail-call interpreter opcode handlers
NORMAL_FRAME = 0  # gdb.NORMAL_FRAME
#: Native frames that mean "this thread is waiting to take the GIL".
GIL_WAIT_FUNCS = ("take_gil",)
#: With stripped builds take_gil is invisible: one of these plus a blocking wait is the shape.
GIL_REACQUIRE_FUNCS = ("PyEval_RestoreThread", "PyEval_AcquireThread", "PyGILState_Ensure", "PyEval_AcquireLock",
                       "_PyEval_AcquireLock", "_PyThreadState_Attach")
#: Exported callers of the (static, nameless when stripped) take_gil from the eval loop.
GIL_PENDING_FUNCS = ("_Py_HandlePending", "_PyEval_HandlePending", "eval_frame_handle_pending")
BLOCKING_FUNCS = ("futex", "pthread_cond_wait", "pthread_cond_timedwait", "__pthread_cond_wait",
                  "__pthread_cond_timedwait", "___pthread_cond_timedwait", "__lll_lock_wait",
                  "sem_wait", "sem_clockwait", "do_futex_wait", "__futex_abstimed_wait")
#: Frames of a running garbage collection (only counted in the Python runtime's own code).
GC_FUNCS = ("gc_collect_main", "collect", "collect_with_callback", "gc_collect_with_callback", "_PyGC_Collect",
            "gc_collect_region", "gc_collect_impl", "gc_collect_generations", "PyGC_Collect", "_PyGC_CollectNoFail",
            "_Py_RunGC", "finalize_garbage", "delete_garbage")


def is_eval(nf) -> bool:
    name = nf.frame.function or ""
    return nf.gdb_type == NORMAL_FRAME and name.startswith(EVAL_PREFIX)


def _anchored_positions(groups, natives) -> Optional[List[int]]:
    """Native index for every group by stack address, or None unless every group has its own.

    Groups of one thread state come innermost first and must land in increasing positions;
    groups of several thread states (subinterpreters) interleave, so only distinctness is
    required and the caller orders groups by position."""
    out: List[int] = []
    for g in groups:
        if g.anchor is None:
            return None
        found = None
        for i, nf in enumerate(natives):
            if nf.sp is None:
                continue
            hi = nf.cfa if nf.cfa is not None else (1 << 64)
            if nf.sp <= g.anchor < hi:
                found = i
                break
        if found is None or found in out:
            return None
        out.append(found)
    return [_inward_past_tail_calls(natives, i) for i in out]


def _inward_past_tail_calls(natives, pos: int) -> int:
    """3.14 tail-calling interpreter: the opcode handler (``_TAIL_CALL_<OP>...``) running the
    Python frame is a separate native frame innermost of the eval frame; Python frames go on
    its innermost side, like they do on the eval frame when handlers are inlined."""
    while pos > 0 and (natives[pos - 1].frame.function or "").startswith(TAIL_CALL_PREFIX):
        pos -= 1
    return pos


def _counted_positions(groups, natives, truncated: bool, tstates: int) -> Optional[List[int]]:
    if tstates > 1:
        return None  # frames of several thread states: their interleaving is unknown
    evals = [i for i, nf in enumerate(natives) if is_eval(nf)]
    if len(evals) == len(groups) or (truncated and len(groups) < len(evals)):
        return evals[:len(groups)]
    return None


def _nameless_take_gil(natives) -> bool:
    """Stripped builds: a condition-variable wait called by nameless frames of the Python
    runtime itself, called by the eval loop or a GIL re-acquire function.  In CPython that
    shape is ``take_gil`` (a static function, so it has no name without symbols): a
    ``threading`` lock, sleep or I/O wait never goes through an unnamed runtime frame into a
    condvar straight from the eval loop."""
    for i, nf in enumerate(natives):
        name = nf.frame.function or ""
        if name.startswith(EVAL_PREFIX):
            return False
        if "pthread_cond_" not in name or "wait" not in name:
            continue
        j, nameless = i + 1, 0
        while j < len(natives) and "pthread_cond_" in (natives[j].frame.function or ""):
            j += 1  # __pthread_cond_wait_common (inlined) inside ___pthread_cond_timedwait64
        while j < len(natives) and (natives[j].frame.function or "??") == "??":
            if "python" not in (natives[j].frame.library or "").rsplit("/", 1)[-1]:
                return False
            nameless += 1
            j += 1
        return nameless > 0 and j < len(natives) and (
            is_eval(natives[j]) or natives[j].frame.function in GIL_REACQUIRE_FUNCS + GIL_PENDING_FUNCS)
    return False


def _gil_state(pyth, natives, pyproc=None) -> Optional[str]:
    if pyproc is not None and pyproc.free_threading and not pyproc.gil_enabled:
        return None  # free-threaded, GIL off (or unknown): nobody holds or waits for it, no guess
    if pyth.gil == "held":
        return "held"
    names = [nf.frame.function or "" for nf in natives]
    if any(n in GIL_WAIT_FUNCS for n in names):
        return "waiting"
    for i, n in enumerate(names):
        if n in GIL_REACQUIRE_FUNCS:
            if any(any(b in m for b in BLOCKING_FUNCS) for m in names[:i]):
                return "waiting"
            break
    if pyth.gil == "no" and _nameless_take_gil(natives):
        return "waiting"
    return pyth.gil


def _in_runtime(nf) -> bool:
    return "python" in (nf.frame.library or "").rsplit("/", 1)[-1]


def _gc_state(pyth, natives, pyproc) -> Optional[bool]:
    """True when this thread's native frames are in the collector.  While a collection runs,
    a thread whose Python-runtime frames all have names is not collecting (we would see the
    collector's frames); with nameless runtime frames (stripped libpython) it is unknown (None):
    the collector may have called a finalizer that released the GIL, so "the GIL holder
    collects" is not a safe guess."""
    for nf in natives:
        if nf.frame.function in GC_FUNCS and _in_runtime(nf):
            return True
    if pyproc is None or not pyproc.gc_collecting:
        return pyth.gc
    if any((nf.frame.function or "??") == "??" and _in_runtime(nf) for nf in natives):
        return None
    return False


def merge_thread(thread: Thread, natives: List, pyproc) -> None:
    """Fill thread.frames/merge/name/python_name/state/notes from natives and the Python walk."""
    native_frames = [nf.frame for nf in natives]
    pyth = pyproc.threads.get(thread.tid) if pyproc is not None else None
    if pyth is None:
        thread.frames = native_frames
        thread.merge = "native-only"
        return
    thread.python_name = pyth.name
    thread.name = pyth.name or thread.os_name
    thread.pthread_id = pyth.pthread_id or None
    thread.state.gil = _gil_state(pyth, natives, pyproc)
    thread.state.gc = _gc_state(pyth, natives, pyproc)
    thread.notes.extend(pyth.notes)
    groups = [g for g in pyth.groups if g.frames]
    if not groups:
        thread.frames = native_frames
        if pyth.truncated is not None:
            thread.python_frames = [pyth.truncated]
            thread.merge = "unmerged"
            thread.notes.append("Python frames could not be read; native frames shown as unwound")
        else:
            thread.merge = "native-only"
        return
    truncated = pyth.truncated is not None
    positions = _anchored_positions(groups, natives)
    how = "stack anchors"
    if positions is not None:
        order = sorted(range(len(groups)), key=lambda k: positions[k])
        groups = [groups[k] for k in order]
        positions = [positions[k] for k in order]
    else:
        positions = _counted_positions(groups, natives, truncated, getattr(pyth, "tstates", 1))
        how = "eval-frame count"
    if positions is None:
        evals = sum(1 for nf in natives if is_eval(nf))
        thread.frames = native_frames
        thread.python_frames = [f for g in groups for f in g.frames] + ([pyth.truncated] if truncated else [])
        thread.merge = "unmerged"
        thread.notes.append(
            "Python frames not merged: %d Python activation(s) vs %d native %s frame(s) and no stack anchor; "
            "Python frames are listed separately" % (len(groups), evals, EVAL_PREFIX))
        return
    inserts: Dict[int, List[Frame]] = {}
    for g, pos in zip(groups, positions):
        inserts.setdefault(pos, []).extend(g.frames)
    marker_at = None
    if truncated:
        later = [i for i, nf in enumerate(natives) if i > positions[-1] and is_eval(nf)]
        marker_at = later[0] if later else len(natives)
        inserts.setdefault(marker_at, []).append(pyth.truncated)
    out: List[Frame] = []
    for i, f in enumerate(native_frames):
        out.extend(inserts.get(i, ()))
        out.append(f)
    out.extend(inserts.get(len(native_frames), ()))
    thread.frames = out
    thread.merge = "merged"
    if how != "stack anchors" and pyproc.version_info >= (3, 11):
        thread.notes.append("Python frames placed by %s (no stack anchor)" % how)
