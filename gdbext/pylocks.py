"""CPython facts the wait analysis needs, on top of the frame walker's ``pyproc``.

Why a module of its own: ``locks.py`` reasons about *waits*; this one knows CPython memory.
Runtime layout (thread states, frames, the GIL, dicts, strings, type names) stays in one place,
the walker (``pyframes``: its ``offsets`` table and ``objects`` readers); this module adds only
what the walker does not hold, as data:

  * ``rlockobject``: PyObject_HEAD, ``rlock_lock`` @16, ``rlock_owner`` (pthread ident) @24,
    ``rlock_count`` @32 -- identical 3.8-3.13 (checked with ``ptype/o`` on the pyenv builds); 3.14
    holds a ``_PyRecursiveMutex`` there instead (``mutex`` @16, ``thread`` @24, ``level`` @32), so the
    owner and count stay where they were.  Free-threaded builds (3.13t/3.14t) have a 32-byte object
    header: everything after it moves by 16 (owner @40, count @48 on 3.13.15t).
  * ``lockobject``: PyObject_HEAD, then ``lock_lock`` (a pointer) or, from 3.13 on, a ``PyMutex``
    (one byte: locked, has-parked) right after the header.  CPython records no owner; a waiter
    parks on the mutex's address, which is how its lock object is found from the waiter's stack.
  * ``PyWeakReference.wr_object`` @16.  3.8-3.12 hang a weakref to each thread's
    ``_tstate_lock`` off ``tstate->on_delete_data``: that is how Thread.join() finds its target.
  * ``f_globals`` of a frame (PyFrameObject 3.8-3.10, _PyInterpreterFrame 3.11+), to name a lock
    by the module global that refers to it.
  * the fast locals of a frame (``f_localsplus`` 3.8-3.10, ``localsplus`` 3.11+), how many there
    are (``co_nlocals`` / ``co_nlocalsplus``) and their names (``co_varnames`` /
    ``co_localsplusnames``), to name a lock by the attribute of a local object that holds it
    (``self._lock`` -> ``Account._lock``).

Raw memory only, no DWARF: Debian's stripped ``python3.11`` works like a pyenv build.
"""

from typing import Any, Dict, List, Optional, Tuple

#: Offsets after the object header (16 bytes; 32 in free-threaded builds: ``offsets["ob.head"]``).
RLOCK_OWNER_OFF = 8
RLOCK_COUNT_OFF = 16
WEAKREF_OBJECT_OFF = 0
OB_HEAD = 16

RLOCK_TYPE_NAMES = ("_thread.RLock",)
LOCK_TYPE_NAMES = ("_thread.lock",)

#: Offsets the walker's tables do not carry (x86-64, from DWARF of pyenv 3.8.18-3.13.0).
#: ``ts.on_delete_data`` is None from 3.13 (joins go through thread handles there).
#: ``code.nlocals`` is an int: ``co_nlocals`` (3.8-3.10: the first slots of ``f_localsplus`` are the
#: fast locals) or ``co_nlocalsplus`` (3.11+: locals, cells and free variables); ``code.localnames``
#: the tuple naming those slots.
_FO = {"frame.localsplus": 360, "code.nlocals": 28, "code.localnames": 72}
_IFR = {"frame.localsplus": 72, "code.nlocals": 72, "code.localnames": 96}
EXTRA: Dict[Tuple[int, int], Dict[str, Optional[int]]] = {
    (3, 8): dict(_FO, **{"ts.on_delete_data": 208, "frame.f_globals": 48}),
    (3, 9): dict(_FO, **{"ts.on_delete_data": 208, "frame.f_globals": 48}),
    (3, 10): dict(_FO, **{"ts.on_delete_data": 208, "frame.f_globals": 48, "frame.localsplus": 352}),
    (3, 11): dict(_IFR, **{"ts.on_delete_data": 192, "frame.f_globals": 8, "code.nlocals": 76}),
    (3, 12): dict(_IFR, **{"ts.on_delete_data": 176, "frame.f_globals": 24}),
    (3, 13): dict(_IFR, **{"ts.on_delete_data": None, "frame.f_globals": 24}),
    # 3.14: owner/return_offset/visited grew the frame: localsplus @80 (DWARF of Debian's 3.14.10)
    # 3.14: owner/return_offset/visited grew the frame: localsplus @80 (DWARF of Debian's 3.14.10);
    # RLock is a _PyRecursiveMutex whose ``level`` does not count the first acquisition.
    (3, 14): dict(_IFR, **{"ts.on_delete_data": None, "frame.f_globals": 24, "frame.localsplus": 80,
                           "rlock.count_extra": 1}),
}
#: Walker table keys that, when present (3.13+: from _Py_DebugOffsets; free-threaded builds:
#: moved by the larger object header), replace the ``EXTRA`` numbers above.
FROM_WALKER = {"frame.localsplus": "ifr.localsplus", "code.localnames": "co.localsplusnames",
               "code.nlocals": "co.nlocalsplus"}

#: Bounds of the attribute search (a wait is named from a handful of reads, never a heap walk):
#: the innermost Python frames of the waiter, their first locals, the objects among them, the
#: attributes of each, and the items of a list/tuple attribute (``self.locks[i]``).
NAME_FRAMES = 3
NAME_LOCALS = 32
NAME_OWNERS = 16
NAME_ATTRS = 64
NAME_ITEMS = 64
CELL_REF_OFF = 0  # PyCellObject.ob_ref, after the object header
TYPE_DICT_OFF = 264  # PyTypeObject.tp_dict (3.8-3.14; ``offsets["tp.dict"]``): a class held in a local
#: Locals whose attributes are not where a program keeps its locks (or are named otherwise:
#: module attributes are the module globals the fallback already finds).
_NOT_OWNERS = ("module", "function", "builtin_function_or_method", "method", "frame", "code", "cell",
               "dict", "str", "int", "float", "bytes", "NoneType", "bool", "list", "tuple")


class PyLocks:
    """Lock-object, GIL and globals readers over a walker ``pyproc`` (never raises on bad memory)."""

    def __init__(self, pyproc: Any):
        self.p = pyproc
        self.o = pyproc.objects
        self.t: Dict[str, int] = pyproc.offsets
        vi = tuple(getattr(pyproc, "version_info", ()) or ())[:2]
        self.extra = dict(EXTRA.get(vi, {}))  # type: ignore[arg-type]
        if self.t.get("model.frames") == 1:
            for k, key in FROM_WALKER.items():
                if key in self.t:
                    self.extra[k] = self.t[key]
        self.head = self.t.get("ob.head", OB_HEAD)
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
        owner = self.u64(obj + self.head + RLOCK_OWNER_OFF)
        count = self.u64(obj + self.head + RLOCK_COUNT_OFF) or 0
        extra = self.extra.get("rlock.count_extra") or 0
        if not owner or not (count + extra):
            return None, count
        return owner, count + extra

    def lock_object(self, v: Optional[int], names: Tuple[str, ...]) -> Optional[Tuple[int, str]]:
        """(lock object, type name) for a word found in a waiter's registers or stack: the object
        itself, or (3.13+) the address of the ``PyMutex`` right after its header, which is what
        ``_PyMutex_LockTimed`` and the parking lot are handed."""
        if not v:
            return None
        for obj in (v, v - self.head):
            name = self.type_name(obj)
            if name in names:
                return obj, name
        return None

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
            target = self.u64(wr + self.head + WEAKREF_OBJECT_OFF) if wr else None
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

    # -- attribute names -------------------------------------------------------------------------
    def frames(self, lwp: int, count: int = NAME_FRAMES) -> List[int]:
        """Addresses of the ``count`` innermost Python frames of a thread (frame objects on
        3.8-3.10, interpreter frames on 3.11+; 3.12+ shim frames are included: no locals)."""
        info = (getattr(self.p, "threads", None) or {}).get(lwp)
        groups = getattr(info, "groups", None) or []
        back = self.t.get("fo.f_back") if self.t.get("model.frames") == 0 else self.t.get("ifr.previous")
        out: List[int] = []
        fr = groups[0].first_addr if groups else None
        while fr and back is not None and len(out) < count and fr not in out:
            out.append(fr)
            fr = self.u64(fr + back)
        return out

    def frame_locals(self, frame: int) -> List[Tuple[Optional[str], int]]:
        """(name, object) of the first fast locals of a frame that are set; cells unwrapped."""
        x = self.extra
        code_off = self.t.get("fo.f_code") if self.t.get("model.frames") == 0 else self.t.get("ifr.code")
        if code_off is None or x.get("frame.localsplus") is None or x.get("code.nlocals") is None:
            return []
        code = self.u64(frame + code_off)
        if code and self.t.get("model.tagged_executable") and self.t.get("model.frames") == 1:
            code &= ~3  # 3.14: f_executable is a _PyStackRef
        if not code or self.type_name(code) != "code":
            return []
        try:
            n = self.p.mem.i32(code + x["code.nlocals"])
            n = max(0, min(n, NAME_LOCALS))
            raw = self.p.mem.read(frame + x["frame.localsplus"], 8 * n) if n else b""
        except Exception:  # noqa: BLE001 - unreadable frame: no names from it
            return []
        names: List[Optional[str]] = []
        try:
            names = [self.o.str(k) for k in self.o.tuple_items(self.u64(code + x["code.localnames"]) or 0, n)]
        except Exception:  # noqa: BLE001 - values without names still name by type
            names = []
        out: List[Tuple[Optional[str], int]] = []
        tagged = self.t.get("model.tagged_executable") and self.t.get("model.frames") == 1
        for i in range(n):
            v = int.from_bytes(raw[8 * i:8 * i + 8], "little")
            if tagged:
                v &= ~3  # 3.14: fast locals are _PyStackRefs (low bits tag deferred references)
            if v and self.type_name(v) == "cell":
                v = self.u64(v + self.head + CELL_REF_OFF) or 0
            if v:
                out.append((names[i] if i < len(names) else None, v))
        return out

    def join_target_ident(self, lwp: int) -> Optional[int]:
        """3.13+ ``Thread.join()`` without DWARF for the C thread handle: the ``threading`` ident
        (pthread_t) of the thread being joined, from ``self._ident`` of the innermost Python frame
        whose ``self`` has one (``Thread.join``'s own ``self`` is the thread joined)."""
        for frame in self.frames(lwp):
            for name, obj in self.frame_locals(frame):
                if name != "self":
                    continue
                try:
                    v = self.o.instance_attr(obj, "_ident")
                    ident = self.o.int(v) if v else None
                except Exception:  # noqa: BLE001 - unreadable: not identified
                    ident = None
                if ident:
                    return ident
        return None

    def _owner_items(self, obj: int, tname: str) -> Tuple[str, List[Tuple[int, int]]]:
        """(owner label, attribute items): an instance is labelled by its class name, a class
        held in a local by its own name (its ``tp_dict``)."""
        if tname == "type":
            try:
                label = self.o.type_name(obj) or "type"
                d = self.u64(obj + self.t.get("tp.dict", TYPE_DICT_OFF))
                return label.rsplit(".", 1)[-1], (self.o.dict_items(d)[:NAME_ATTRS] if d else [])
            except Exception:  # noqa: BLE001
                return tname, []
        try:
            return tname.rsplit(".", 1)[-1], self.o.instance_items(obj, NAME_ATTRS)
        except Exception:  # noqa: BLE001
            return tname, []

    def attribute_name(self, frames: List[int], target: int) -> Optional[Tuple[str, str]]:
        """(``Type.attr`` or ``Type.attr[i]``, ``local.attr`` as the code spells it) of the
        attribute that holds ``target``, looked up one level deep from the locals of the given
        frames (see ``frames``); None when no local object holds it."""
        owners = 0
        for frame in frames:
            for local, obj in self.frame_locals(frame):
                if obj == target:
                    continue  # the lock itself in a local: its attribute/global name says more
                tname = self.type_name(obj)
                if not tname or tname in _NOT_OWNERS:
                    continue
                owners += 1
                if owners > NAME_OWNERS:
                    return None
                label, items = self._owner_items(obj, tname)
                for key, value in items:
                    attr = self.o.str(key)
                    if not attr:
                        continue
                    where = self._find_in(value, target)
                    if where is None:
                        continue
                    return "%s.%s%s" % (label, attr, where), "%s.%s%s" % (local or "?", attr, where)
        return None

    def _find_in(self, value: int, target: int) -> Optional[str]:
        """"" when value is target, "[i]" when item i of a list/tuple value is, else None."""
        if value == target:
            return ""
        kind = self.type_name(value)
        if kind not in ("list", "tuple"):
            return None
        try:
            items = self.o.list_items(value, NAME_ITEMS) if kind == "list" else \
                self.o.tuple_items(value, NAME_ITEMS)
        except Exception:  # noqa: BLE001
            return None
        for i, item in enumerate(items):
            if item == target:
                return "[%d]" % i
        return None
