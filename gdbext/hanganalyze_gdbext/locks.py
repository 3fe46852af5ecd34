"""What each thread waits on, and who holds it: ``Thread.waits`` for the wait-for graph.

Runs inside gdb (standard library only).  For every thread we classify the innermost native
frames (``waitkinds``: a table of function-name patterns), then read memory to find the resource and
its owner:

  * glibc ``pthread_mutex_t`` / ``std::mutex``: owner TID = ``__data.__owner`` (offset 8).
    The mutex address comes from frame arguments when libc has debug info; otherwise from
    registers (``rdi`` of the innermost frame is the futex word of the syscall; callee-saved
    registers of the lock frames), each candidate validated by reading it as a mutex whose
    owner is a thread of this process.
  * ``pthread_rwlock_t`` writer: ``__cur_writer`` (offset 24); readers are not recorded.
  * ``pthread_join`` / ``std::thread::join``: the ``pthread_t`` argument, or the futex word of
    the wait (glibc waits on ``pd->tid``, whose value *is* the target's TID).
  * the GIL: holder from the frame walker (``pyproc.gil_holder_lwp``).
  * ``threading.RLock``: owner ident from the lock object; ``threading.Lock``: no owner is
    recorded, so none is claimed; ``Thread.join``: the joined thread owns its ``_tstate_lock``.
  * condition variables and plain futexes: a wait without an owner.

Nothing here calls into the inferior; every read goes through a ``ProcessTarget`` (memory, thread
handles, symbols) or a ``FrameView`` (registers, debug-info arguments), which gdb and the
analyzer's direct reader both provide.
"""

import struct
from typing import Callable, Dict, List, Optional, Tuple

from . import heldlocks
from .model import Process, Thread, Wait
from .pyframes.lwpmap import LwpMap
from .pyframes.process import PyProcess
from .pyframes.target import FrameView, ProcessTarget
from .pylocks import LOCK_TYPE_NAMES, NAME_FRAMES, RLOCK_TYPE_NAMES, PyLocks
from .waitkinds import BY_KIND, IMPL_FRAMES, RUNTIME_LIBS, bare, classify

#: ``frames_of(lwp, count)``: that thread's innermost ``count`` frames as ``FrameView``s.
FramesOf = Callable[[int, int], List[FrameView]]

#: Debug-info argument names that hold the resource, per classifier frame.
ARG_NAMES = {
    "mutex": ("mutex", "futex", "__mutex", "this"),
    "rwlock": ("rwlock",),
    "join": ("threadid",),
    "pylock": ("self",),
}
CALLEE_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")
MUTEX_OWNER_OFF = 8
RWLOCK_WRITER_OFF = 24
RWLOCK_FUTEX_OFFS = (12, 8, 0)  # __writers_futex, __wrphase_futex, or the lock itself
STACK_SCAN_BYTES = 16384


class _Ctx:
    """Per-process facts shared by all threads: memory, TIDs, pthread -> LWP, CPython reader."""

    def __init__(self, process: Process, pyproc: Optional[PyProcess], target: ProcessTarget):
        self.target = target
        self.tids = {t.tid for t in process.threads if t.tid}
        self.pyproc = pyproc
        self._lwp_map: Optional[LwpMap] = None
        self._handle_by_lwp: Dict[int, int] = dict(target.thread_handles())
        self.py: Optional[PyLocks] = None
        self._tstates: Optional[Dict[int, Optional[int]]] = None
        self._tstate_locks: Optional[Dict[int, int]] = None
        if pyproc is not None:
            self.py = PyLocks(pyproc)

    def read(self, addr: int, n: int) -> Optional[bytes]:
        if not addr or addr < 0 or n <= 0:
            return None
        try:
            return bytes(self.target.read_memory(addr, n))
        except Exception:  # noqa: BLE001 - gdb.MemoryError, OSError, ValueError: unreadable either way
            return None

    def i32(self, addr: int) -> Optional[int]:
        b = self.read(addr, 4)
        return struct.unpack("<i", b)[0] if b else None

    def pthread_to_lwp(self, ident: Optional[int]) -> Optional[int]:
        """The walker's map for a Python process (its thread states first), else the same
        ``LwpMap`` over the target: both readers name one thread for one pthread_t."""
        if not ident:
            return None
        if self.pyproc is not None:
            lookup = self.pyproc.lwp_for_pthread
        else:
            if self._lwp_map is None:
                self._lwp_map = LwpMap(self.target)
            lookup = self._lwp_map.lookup
        try:
            return lookup(ident) or None
        except Exception:  # noqa: BLE001
            return None

    def handle_of(self, lwp: Optional[int]) -> Optional[int]:
        return self._handle_by_lwp.get(lwp) if lwp else None

    def tstates(self) -> Dict[int, Optional[int]]:
        """{tstate: lwp} for every Python thread (from the walker); cached."""
        if self._tstates is None:
            self._tstates = self.py.tstates() if self.py is not None else {}
        return self._tstates

    def tstate_lwp(self, ts: Optional[int]) -> Optional[int]:
        return self.tstates().get(ts) if ts else None

    def tstate_locks(self) -> Dict[int, int]:
        if self._tstate_locks is None:
            self._tstate_locks = self.py.tstate_locks() if self.py is not None else {}
        return self._tstate_locks

    def gil(self) -> Tuple[Optional[int], Optional[int]]:
        """(GIL address, holder LWP) from the walker."""
        if self.py is None or self.pyproc is None:
            return None, None
        return self.py.gil_address(), self.pyproc.gil_holder_lwp

    def symbol_name(self, addr: int) -> Optional[str]:
        """The ELF/DWARF symbol at addr ("ledger", "ring_locks+40"), None when stripped."""
        return self.target.symbol_at(addr)


# ---------------------------------------------------------------------------------------------
def annotate_waits(process: Process, natives_by_tid: Dict[int, list], pyproc: Optional[PyProcess],
                   target: ProcessTarget, frames_of: FramesOf) -> None:
    """Fill ``Thread.waits`` for every thread blocked on something we can name."""
    ctx = _Ctx(process, pyproc, target)
    for t in process.threads:
        natives = natives_by_tid.get(t.tid) or []
        names = [n.frame.function for n in natives]
        kind, idx, eval_idx = classify(names)
        if kind is None or not t.tid:
            continue
        try:
            frames = frames_of(t.tid, max(idx or 0, eval_idx or 0) + 3)
            w = _resolve(ctx, t, natives, frames, kind, idx or 0, eval_idx)
        except Exception as e:  # noqa: BLE001 - gdb.error, bad memory: the wait is still worth naming
            w = Wait(kind, detail="wait not resolved: %s" % e)
        if w is not None:
            w.frame = _wait_frame(t, natives, idx or 0, w)
            t.waits = w
            if kind == "gil" and w.kind == "gil":
                t.state.gil = "waiting"
    try:
        heldlocks.infer_owners(process, pyproc)
    except Exception as e:  # noqa: BLE001 - bad memory or source: the waits found stay as they are
        process.notes.append("lock owners from source not inferred: %s" % e)
    _distinct_names(process)


def _hex(addr: Optional[int]) -> Optional[str]:
    """``Wait.resource``: the address as ``0x...``, None when unknown."""
    return "0x%x" % addr if addr else None


def _reg(frame: FrameView, name: str) -> Optional[int]:
    v = frame.reg(name)
    return v & 0xFFFFFFFFFFFFFFFF if v is not None else None


def _arg(frame: FrameView, names: Tuple[str, ...]) -> Optional[int]:
    return frame.arg(names)


def _candidates(frames: List[FrameView], upto: int) -> List[int]:
    """Register values that may point at the resource: rdi of the innermost frame (the futex word
    of the syscall), then the callee-saved registers as unwound at each frame up to ``upto``."""
    seen: List[int] = []
    regs_inner = ("rdi",) + CALLEE_SAVED
    for i, f in enumerate(frames[: upto + 2]):
        for r in regs_inner if i == 0 else CALLEE_SAVED:
            v = _reg(f, r)
            if v and v > 0x1000 and v not in seen:
                seen.append(v)
    return seen


def _resolve(ctx: _Ctx, t: Thread, natives: list, frames: List[FrameView], kind: str, idx: int,
             eval_idx: Optional[int]) -> Optional[Wait]:
    if kind == "mutex":
        return _resolve_mutex(ctx, natives, frames, idx)
    if kind == "rwlock":
        return _resolve_rwlock(ctx, natives, frames, idx)
    if kind == "join":
        return _resolve_join(ctx, natives, frames, idx)
    if kind == "gil" and ctx.pyproc is not None and ctx.pyproc.free_threading and not ctx.pyproc.gil_enabled:
        # Free-threaded with the GIL off: PyEval_RestoreThread/_PyThreadState_Attach wait for a
        # stop-the-world pause to end (the GC, fork), never for a GIL.
        return Wait("futex", detail="waiting to re-attach its thread state (free-threaded build, no GIL: a "
                                    "stop-the-world pause such as a garbage collection)")
    if kind == "gil":
        addr, holder = ctx.gil()
        if holder == t.tid:
            return None  # re-acquiring a GIL it still holds is not a wait (snapshot taken mid-switch)
        return Wait("gil", _hex(addr), "GIL", holder, detail="waiting for the GIL" + (
            " (held by LWP %d)" % holder if holder else " (holder not recorded)"))
    if kind == "pylock":
        return _resolve_pylock(ctx, t, natives, frames, idx, eval_idx)
    if kind == "pyjoin":
        return _resolve_thread_handle_join(ctx, t, frames, idx)
    if kind == "parked":
        return _resolve_parked(ctx, t, natives, frames, idx, eval_idx)
    # condvar / futex: no owner
    futex = _reg(frames[0], "rdi") if frames else None
    what = "condition variable" if kind == "condvar" else "futex"
    return Wait(kind, _hex(futex), detail="waiting on a %s (no owner is recorded)" % what)


def _debug_arg(natives: list, frames: List[FrameView], idx: int, kind: str) -> Optional[int]:
    """The resource from debug-info arguments of the classifier frame or its neighbours."""
    names = ARG_NAMES.get(kind, ())
    for i in range(max(0, idx - 3), min(len(frames), idx + 4)):
        fn = natives[i].frame.function or ""
        if kind == "mutex" and not BY_KIND["mutex"].search(fn):
            continue
        if kind == "rwlock" and "rwlock" not in fn:
            continue
        if kind == "join" and "join" not in fn:
            continue
        if kind == "pylock" and fn not in ("rlock_acquire", "lock_PyThread_acquire_lock"):
            continue
        v = _arg(frames[i], names)
        if v:
            return v
    return None


def _mutex_owner(ctx: _Ctx, addr: int) -> Optional[int]:
    b = ctx.read(addr, 16)
    if not b:
        return None
    lock, _count, owner = struct.unpack_from("<iIi", b)
    if lock == 0:
        return None
    return owner & 0x3FFFFFFF if owner else None


def _resolve_mutex(ctx: _Ctx, natives: list, frames: List[FrameView], idx: int) -> Wait:
    addr = _debug_arg(natives, frames, idx, "mutex")
    how = "debug info"
    owner = _mutex_owner(ctx, addr) if addr else None
    if addr is None or owner not in ctx.tids:
        for c in _candidates(frames, idx + 1):
            o = _mutex_owner(ctx, c)
            if o in ctx.tids:
                addr, owner, how = c, o, "registers"
                break
    if addr is None:
        return Wait("mutex", detail="waiting for a mutex whose address could not be found")
    detail = "waiting for mutex 0x%x" % addr
    if owner in ctx.tids:
        detail += " held by LWP %d" % owner
    elif owner:
        detail += (" held by TID %d, which is not a thread of this process: it exited while holding it, "
                   "or the mutex was copied by fork() while held" % owner)
        owner = None
    elif ctx.read(addr, 16) is None:
        detail += " (its memory cannot be read: owner unknown)"
    else:
        detail += " (no owner recorded)"
    return Wait("mutex", _hex(addr), ctx.symbol_name(addr), owner, detail=detail + " [found via %s]" % how)


def _rwlock_writer(ctx: _Ctx, addr: int) -> Optional[int]:
    return ctx.i32(addr + RWLOCK_WRITER_OFF)


def _resolve_rwlock(ctx: _Ctx, natives: list, frames: List[FrameView], idx: int) -> Wait:
    addr = _debug_arg(natives, frames, idx, "rwlock")
    writer = _rwlock_writer(ctx, addr) if addr else None
    if addr is None or writer not in ctx.tids:
        for c in _candidates(frames, idx + 1):
            for off in RWLOCK_FUTEX_OFFS:
                w = _rwlock_writer(ctx, c - off)
                if w in ctx.tids:
                    addr, writer = c - off, w
                    break
            if writer in ctx.tids:
                break
    if addr is None:
        return Wait("rwlock", detail="waiting for a rwlock whose address could not be found")
    owner = writer if writer in ctx.tids else None
    detail = "waiting for rwlock 0x%x " % addr + (
        "write-held by LWP %d" % owner if owner else "(held by readers or unknown: readers are not recorded)")
    return Wait("rwlock", _hex(addr), ctx.symbol_name(addr), owner, detail=detail)


def _resolve_join(ctx: _Ctx, natives: list, frames: List[FrameView], idx: int) -> Wait:
    handle = _debug_arg(natives, frames, idx, "join")
    target = ctx.pthread_to_lwp(handle) if handle else None
    if target is None and frames:
        # glibc waits on pd->tid: the futex word holds the target's TID until it exits.
        futex = _reg(frames[0], "rdi")
        v = ctx.i32(futex) if futex else None
        if v in ctx.tids:
            target = v
            handle = ctx.handle_of(v)
    detail = "joining thread LWP %d" % target if target else "joining a thread that could not be identified"
    return Wait("join", _hex(handle), owner_tid=target, detail=detail)


def _python_objects(ctx: _Ctx, natives: list, frames: List[FrameView], idx: int,
                    eval_idx: Optional[int]) -> List[Tuple[int, str]]:
    """Lock objects referenced by the waiting frames: debug args, registers, then stack words."""
    py = ctx.py
    if py is None:
        return []
    found: List[Tuple[int, str]] = []

    def consider(v: Optional[int]) -> None:
        hit = py.lock_object(v, RLOCK_TYPE_NAMES + LOCK_TYPE_NAMES)
        if hit and all(hit[0] != f[0] for f in found):
            found.append(hit)

    consider(_debug_arg(natives, frames, idx, "pylock"))
    if found:
        return found
    end = eval_idx if eval_idx is not None else min(len(frames) - 1, idx + 6)
    for v in _candidates(frames, end):
        consider(v)
        if found:
            return found
    lo = natives[0].sp if natives else None
    hi = natives[end].sp if natives and end < len(natives) else None
    if lo and hi and hi > lo:
        blob = ctx.read(lo, min(hi - lo, STACK_SCAN_BYTES))
        if blob:
            for (word,) in struct.iter_unpack("<Q", blob[: len(blob) // 8 * 8]):
                if word > 0x10000 and not word & 7:
                    consider(word)
                    if found:
                        break
    return found


#: How far into a ``ThreadHandle`` its ``ident`` may lie (3.13: after two list nodes, at 32).
THREAD_HANDLE_SCAN = 48


def _resolve_thread_handle_join(ctx: _Ctx, t: Thread, frames: List[FrameView], idx: int) -> Wait:
    """3.13+: ``ThreadHandle_join(self)``; ``self->ident`` is the joined thread.  With DWARF it is
    read by name; without, a register of the join frames that points at a struct holding, in its
    first words, the pthread_t of another thread of this process (never a guess: the value must
    be one of the process's own pthread_t)."""
    ident = frames[idx].var_field("self", "ident") if idx < len(frames) else None
    if not ident:
        handles = {h: lwp for lwp, h in ctx._handle_by_lwp.items() if h and lwp != t.tid}
        for c in _candidates(frames, idx + 1):
            blob = ctx.read(c, THREAD_HANDLE_SCAN)
            if not blob:
                continue
            hits = [w for (w,) in struct.iter_unpack("<Q", blob) if w in handles]
            if len(set(hits)) == 1:
                ident = hits[0]
                break
    if not ident and ctx.py is not None and t.tid:
        # ``self._ident`` of the ``Thread.join`` Python frame (raw memory: stripped builds too)
        ident = ctx.py.join_target_ident(t.tid)
    target = ctx.pthread_to_lwp(ident) if ident else None
    detail = "Thread.join() of the thread LWP %d" % target if target else \
        "Thread.join() of a thread that could not be identified (no debug info for the thread handle)"
    return Wait("pyjoin", _hex(ident), owner_tid=target, detail=detail)


def _resolve_parked(ctx: _Ctx, t: Thread, natives: list, frames: List[FrameView], idx: int,
                    eval_idx: Optional[int]) -> Wait:
    """3.13+ without the callers' names (stripped): a thread parked in CPython's parking lot.
    A lock object on its stack makes it a lock wait (owner where memory records one); a
    ``Thread.join`` Python frame makes it a join; otherwise the object is not identified."""
    if _python_objects(ctx, natives, frames, idx, eval_idx):
        return _resolve_pylock(ctx, t, natives, frames, idx, eval_idx)
    py = [f for f in t.all_frames() if f.kind == "python"]
    if py and bare(py[0].function) == "join" and (py[0].file or "").endswith("threading.py"):
        return _resolve_thread_handle_join(ctx, t, frames, idx)
    return Wait("futex", detail="parked in CPython's parking lot (a PyMutex or PyEvent wait; the object could "
                                "not be identified)")


def _python_frame_names(t: Thread) -> List[str]:
    return [f.function or "" for f in t.all_frames() if f.kind == "python"]


def _resolve_pylock(ctx: _Ctx, t: Thread, natives: list, frames: List[FrameView], idx: int,
                    eval_idx: Optional[int]) -> Wait:
    objs = _python_objects(ctx, natives, frames, idx, eval_idx)
    if not objs:
        futex = _reg(frames[0], "rdi") if frames else None
        return Wait("pylock", _hex(futex), detail="waiting for a Python lock (lock object not found; owner unknown)")
    obj, tname = objs[0]
    name, spelled = _lock_name(ctx, t, obj)
    res = _resolve_pylock_object(ctx, t, obj, tname, name)
    if spelled and res.kind in ("rlock", "pylock"):
        res.detail = "%s (%s)" % (res.detail, spelled)
    return res


def _resolve_pylock_object(ctx: _Ctx, t: Thread, obj: int, tname: str, name: Optional[str]) -> Wait:
    """The wait on a found lock object: RLock with owner, Thread.join, Condition.wait, or Lock."""
    if tname in RLOCK_TYPE_NAMES:
        ident, count = ctx.py.rlock_owner(obj) if ctx.py else (None, 0)
        owner = ctx.pthread_to_lwp(ident) if ident else None
        if owner:
            detail = "waiting for threading.RLock held by LWP %d (count %d)" % (owner, count)
        elif ident:
            detail = ("waiting for threading.RLock held by thread ident 0x%x, which is not a thread of this "
                      "process: it exited while holding it, or the lock was inherited across fork() while held"
                      % ident)
        else:
            detail = "waiting for threading.RLock that is not held (being released?)"
        return Wait("rlock", _hex(obj), name, owner, detail=detail)
    ts = ctx.tstate_locks().get(obj)
    pynames = _python_frame_names(t)
    if ts or (pynames and bare(pynames[0]) in ("_wait_for_tstate_lock", "join")):
        target = ctx.tstate_lwp(ts)
        detail = "Thread.join() of the thread LWP %d (its _tstate_lock)" % target if target else \
            "Thread.join() of a thread that could not be identified"
        return Wait("pyjoin", _hex(obj), name, target or None, detail=detail)
    pyframes = [f for f in t.all_frames() if f.kind == "python"]
    if pyframes and bare(pyframes[0].function) == "wait" and (pyframes[0].file or "").endswith("threading.py"):
        # Condition.wait() parks on a fresh waiter lock: a condition wait (Event, Queue, ...), no owner
        return Wait("condvar", _hex(obj), name,
                    detail="threading.Condition.wait() (Event/Queue/Semaphore...): no owner, woken by notify()")
    return Wait("pylock", _hex(obj), name,
                detail="waiting for threading.Lock: CPython records no owner, held by unknown")


def _lock_name(ctx: _Ctx, t: Thread, obj: int) -> Tuple[Optional[str], Optional[str]]:
    """(name, how the waiting code spells it) of a lock object: the attribute of an object in
    the waiter's locals that holds it (``Account._lock``, spelled ``self._lock``), else the
    module global of the innermost frame (``ledger``), else an attribute reached from an outer
    frame (a Python-level wrapper took the lock).  Never raises: a name is a nicety."""
    py = ctx.py
    if py is None or not t.tid:
        return None, None
    try:
        frames = py.p.innermost_frames(t.tid, NAME_FRAMES)
        found = py.attribute_name(frames[:1], obj)
        if found:
            return found[0], "%s in the waiting frame" % found[1]
        g = py.innermost_globals(t.tid)
        name = py.global_name(g, obj) if g else None
        if name:
            return name, None
        outer = py.attribute_name(frames[1:], obj)
        return (outer[0], "%s in a calling frame" % outer[1]) if outer else (None, None)
    except Exception:  # noqa: BLE001 - bad memory must not cost the wait itself
        return None, None


def _distinct_names(process: Process) -> None:
    """Two different locks with one name (``Account._lock`` of two accounts) get their address
    appended, so "holds X, waits for X" never reads as one lock."""
    by_name: Dict[str, set] = {}
    for t in process.threads:
        w = t.waits
        if w and w.name and w.resource:
            by_name.setdefault(w.name, set()).add(w.resource)
    for t in process.threads:
        w = t.waits
        if w and w.name and len(by_name.get(w.name, ())) > 1:
            w.name = "%s@%s" % (w.name, w.resource)


def _wait_frame(t: Thread, natives: list, idx: int, w: Wait) -> Optional[int]:
    """Index in ``t.frames`` of the frame that waits: the innermost Python frame for Python waits,
    else the first native frame outside the lock implementation (the caller of lock())."""
    frames = t.frames
    if w.kind in ("rlock", "pylock", "pyjoin") or (w.kind == "condvar" and "threading" in (w.detail or "")):
        for i, f in enumerate(frames):
            if f.kind == "python":
                return i
    pick = None
    for j in range(idx, len(natives)):
        fr = natives[j].frame
        if not IMPL_FRAMES.search(fr.function or "") and not RUNTIME_LIBS.search(fr.library or ""):
            pick = j
            break
    if pick is None:
        pick = idx
        for j in range(idx, len(natives)):
            fn = natives[j].frame.function
            if fn and not IMPL_FRAMES.search(fn):
                pick = j
                break
    target = natives[pick].frame if pick < len(natives) else None
    for i, f in enumerate(frames):
        if f is target:
            return i
    for i, f in enumerate(frames):
        if target is not None and f.kind == "native" and f.address == target.address:
            return i
    return pick if pick < len(frames) else None
