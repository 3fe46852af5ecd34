"""CPython facts the wait analysis needs, on top of the frame walker's ``pyproc``.

Why a module of its own: ``locks.py`` reasons about *waits*; this one knows CPython memory.
Runtime layout (thread states, frames, the GIL, dicts, strings, type names) stays in one place,
the walker (``pyframes``: its ``offsets`` table and ``objects`` readers); this module adds only
what the walker does not hold, as data:

  * ``rlockobject``: PyObject_HEAD, ``rlock_lock`` @16, ``rlock_owner`` (pthread ident) @24,
    ``rlock_count`` @32 -- identical 3.8-3.13 (checked with ``ptype/o`` on the pyenv builds).
  * ``lockobject``: PyObject_HEAD, ``lock_lock`` @16; CPython records no owner.
  * ``PyWeakReference.wr_object`` @16.  3.8-3.12 hang a weakref to each thread's
    ``_tstate_lock`` off ``tstate->on_delete_data``: that is how Thread.join() finds its target.
  * ``f_globals`` of a frame (PyFrameObject 3.8-3.10, _PyInterpreterFrame 3.11+), to name a lock
    by the module global that refers to it.

Raw memory only, no DWARF: Debian's stripped ``python3.11`` works like a pyenv build.
"""

from typing import Any, Dict, Optional, Tuple

RLOCK_OWNER_OFF = 24
RLOCK_COUNT_OFF = 32
WEAKREF_OBJECT_OFF = 16

RLOCK_TYPE_NAMES = ("_thread.RLock",)
LOCK_TYPE_NAMES = ("_thread.lock",)

#: Offsets the walker's tables do not carry (x86-64, from DWARF of pyenv 3.8.18-3.13.0).
#: ``ts.on_delete_data`` is None from 3.13 (joins go through thread handles there).
EXTRA: Dict[Tuple[int, int], Dict[str, Optional[int]]] = {
    (3, 8): {"ts.on_delete_data": 208, "frame.f_globals": 48},
    (3, 9): {"ts.on_delete_data": 208, "frame.f_globals": 48},
    (3, 10): {"ts.on_delete_data": 208, "frame.f_globals": 48},
    (3, 11): {"ts.on_delete_data": 192, "frame.f_globals": 8},
    (3, 12): {"ts.on_delete_data": 176, "frame.f_globals": 24},
    (3, 13): {"ts.on_delete_data": None, "frame.f_globals": 24},
}


class PyLocks:
    """Lock-object, GIL and globals readers over a walker ``pyproc`` (never raises on bad memory)."""

    def __init__(self, pyproc: Any):
        self.p = pyproc
        self.o = pyproc.objects
        self.t: Dict[str, int] = pyproc.offsets
        vi = tuple(getattr(pyproc, "version_info", ()) or ())[:2]
        self.extra = EXTRA.get(vi, {})  # type: ignore[arg-type]
        self._type_names: Dict[int, Optional[str]] = {}

    # -- primitive reads -------------------------------------------------------------------
    def u64(self, addr: Optional[int]) -> Optional[int]:
        if not addr:
            return None
        try:
            return self.p.mem.u64(addr)
        except Exception:  # noqa: BLE001 - ReadError, struct.error: unreadable means unknown
            return None

    def type_name(self, obj: Optional[int]) -> Optional[str]:
        """``Py_TYPE(obj)->tp_name``, or None when obj does not look like an object."""
        if not obj or obj & 7 or obj < 0x10000:
            return None
        tp = self.u64(obj + self.t.get("ob.type", 8))
        if not tp or tp & 7:
            return None
        if tp not in self._type_names:
            try:
                self._type_names[tp] = self.o.type_name(tp)
            except Exception:  # noqa: BLE001
                self._type_names[tp] = None
        return self._type_names[tp]

    # -- locks -----------------------------------------------------------------------------
    def rlock_owner(self, obj: int) -> Tuple[Optional[int], int]:
        """(owner pthread ident or None, recursion count) of a ``_thread.RLock``."""
        owner = self.u64(obj + RLOCK_OWNER_OFF)
        count = self.u64(obj + RLOCK_COUNT_OFF) or 0
        if not owner or not count:
            return None, count
        return owner, count

    def tstates(self) -> Dict[int, Optional[int]]:
        """{tstate: lwp} from the walker."""
        out: Dict[int, Optional[int]] = {}
        for lwp, info in (getattr(self.p, "threads", None) or {}).items():
            ts = getattr(info, "tstate", None)
            if ts:
                out[ts] = lwp
        return out

    def tstate_locks(self) -> Dict[int, int]:
        """{lock object: tstate} for every thread's ``_tstate_lock`` (3.8-3.12)."""
        out: Dict[int, int] = {}
        off = self.extra.get("ts.on_delete_data")
        if off is None:
            return out
        for ts in self.tstates():
            wr = self.u64(ts + off)
            target = self.u64(wr + WEAKREF_OBJECT_OFF) if wr else None
            if target and "weakref" in (self.type_name(wr) or ""):
                out[target] = ts
        return out

    def gil_address(self) -> Optional[int]:
        """Where the GIL state lives: in ``_PyRuntime`` (3.8-3.11) or ``*interp->ceval.gil``."""
        t = self.t
        if t.get("model.gil") == 0 and "rt.gil_last_holder" in t:
            rt = getattr(self.p, "runtime_address", None)
            return rt + t["rt.gil_last_holder"] - 8 if rt else None  # interval, then last_holder
        interps = getattr(self.p, "interpreters", None) or []
        if interps and "is.ceval_gil" in t:
            return self.u64(interps[0] + t["is.ceval_gil"])
        return None

    # -- names -----------------------------------------------------------------------------
    def innermost_globals(self, lwp: int) -> Optional[int]:
        """The module globals of the innermost Python frame of a thread that has one."""
        off = self.extra.get("frame.f_globals")
        info = (getattr(self.p, "threads", None) or {}).get(lwp)
        groups = getattr(info, "groups", None) or []
        if off is None or not groups:
            return None
        back = self.t.get("fo.f_back") if self.t.get("model.frames") == 0 else self.t.get("ifr.previous")
        fr = groups[0].first_addr
        for _ in range(64):
            if not fr:
                return None
            g = self.u64(fr + off)
            if g and self.type_name(g) == "dict":
                return g
            fr = self.u64(fr + back) if back is not None else None
        return None

    def global_name(self, globals_dict: int, obj: int) -> Optional[str]:
        try:
            for key, value in self.o.dict_items(globals_dict):
                if value == obj:
                    return self.o.str(key)
        except Exception:  # noqa: BLE001
            return None
        return None
