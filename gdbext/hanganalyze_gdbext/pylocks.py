"""CPython facts the wait analysis needs, read through the frame walker's ``PyProcess``.

Why a module of its own: ``locks.py`` reasons about *waits*; this one reads CPython memory for
them.  Every offset and layout family comes from the walker's one layout layer
(``pyframes/tables.py``, ``_Py_DebugOffsets`` on 3.13+, shifted for free-threaded object
headers), and frame chains are read with the walker's ``PyProcess`` readers:

  * ``rlockobject``: ``rlock.owner`` (pthread ident) and ``rlock.count``; 3.14 holds a
    ``_PyRecursiveMutex`` there (``thread``, ``level``: ``Features.rlock_count_extra``).
  * ``lockobject``: PyObject_HEAD, then ``lock_lock`` (a pointer) or, from 3.13 on, a ``PyMutex``
    (one byte: locked, has-parked) right after the header.  CPython records no owner; a waiter
    parks on the mutex's address, which is how its lock object is found from the waiter's stack.
  * ``weakref.object``: 3.8-3.12 hang a weakref to each thread's ``_tstate_lock`` off
    ``tstate->on_delete_data``: that is how Thread.join() finds its target.
  * a frame's globals and fast locals (``PyProcess.frame_keys``), to name a lock by the module
    global or by the attribute of a local object that holds it (``self._lock`` -> ``Account._lock``).

Raw memory only, no DWARF: Debian's stripped ``python3.11`` works like a pyenv build.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from .pyframes.process import PyProcess

RLOCK_TYPE_NAMES = ("_thread.RLock",)
LOCK_TYPE_NAMES = ("_thread.lock",)

#: Bounds of the attribute search (a wait is named from a handful of reads, never a heap walk):
#: the innermost Python frames of the waiter, their first locals, the objects among them, the
#: attributes of each, and the items of a list/tuple attribute (``self.locks[i]``).
NAME_FRAMES = 3
NAME_LOCALS = 32
NAME_OWNERS = 16
NAME_ATTRS = 64
NAME_ITEMS = 64
#: How far back from the innermost frame a module's globals are looked for.
GLOBALS_FRAMES = 64
#: Python frames whose locals make a thread's activity fingerprint (``PyLocks.activity``): the
#: loop counters and batches of a training loop sit within a few frames of the innermost one.
ACTIVITY_FRAMES = 8
#: Entries of a module's globals looked at by ``activity`` (a module-level loop counts its steps there).
GLOBAL_ITEMS = 256
#: Locals whose attributes are not where a program keeps its locks (or are named otherwise:
#: module attributes are the module globals the fallback already finds).
_NOT_OWNERS = ("module", "function", "builtin_function_or_method", "method", "frame", "code", "cell",
               "dict", "str", "int", "float", "bytes", "NoneType", "bool", "list", "tuple")


class PyLocks:
    """Lock-object, GIL and globals readers over a walker ``PyProcess`` (never raises on bad memory)."""

    def __init__(self, pyproc: PyProcess):
        self.p = pyproc
        self.o = pyproc.objects
        self.t: Dict[str, int] = pyproc.offsets
        self.head = self.t.get("ob.head", 16)  # 32 in free-threaded builds
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
        owner = self.u64(obj + self.t["rlock.owner"])
        count = self.u64(obj + self.t["rlock.count"]) or 0
        extra = self.p.features.rlock_count_extra
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
        return {info.tstate: lwp for lwp, info in self.p.threads.items() if info.tstate}

    def tstate_locks(self) -> Dict[int, int]:
        """{lock object: tstate} for every thread's ``_tstate_lock`` (3.8-3.12)."""
        out: Dict[int, int] = {}
        off = self.t.get("ts.on_delete_data")
        if off is None:
            return out
        for ts in self.tstates():
            wr = self.u64(ts + off)
            target = self.u64(wr + self.t["weakref.object"]) if wr else None
            if target and "weakref" in (self.type_name(wr) or ""):
                out[target] = ts
        return out

    def gil_address(self) -> Optional[int]:
        """Where the GIL state lives: in ``_PyRuntime`` (3.8-3.11) or ``*interp->ceval.gil``."""
        t = self.t
        if self.p.features.gil == "runtime":
            rt = self.p.runtime_address
            return rt + t["rt.gil_last_holder"] - 8 if rt else None  # interval, then last_holder
        if self.p.interpreters and "is.ceval_gil" in t:
            return self.u64(self.p.interpreters[0] + t["is.ceval_gil"])
        return None

    # -- names -----------------------------------------------------------------------------
    def innermost_globals(self, lwp: int) -> Optional[int]:
        """The module globals of the innermost Python frame of a thread that has one."""
        off = self.p.frame_keys["globals"]
        if off is None:
            return None
        for fr in self.p.innermost_frames(lwp, GLOBALS_FRAMES):
            g = self.u64(fr + off)
            if g and self.type_name(g) == "dict":
                return g
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
    def frame_locals(self, frame: int) -> List[Tuple[Optional[str], int]]:
        """(name, object) of the first fast locals of a frame that are set; cells unwrapped."""
        k = self.p.frame_keys
        if k["localsplus"] is None or k["nlocals"] is None or k["localnames"] is None:
            return []
        try:
            code = self.p.frame_code(frame)
        except Exception:  # noqa: BLE001 - ReadError: an unreadable frame names nothing
            return []
        if not code or self.type_name(code) != "code":
            return []
        try:
            n = self.p.mem.i32(code + k["nlocals"])
            n = max(0, min(n, NAME_LOCALS))
            raw = self.p.mem.read(frame + k["localsplus"], 8 * n) if n else b""
        except Exception:  # noqa: BLE001 - unreadable frame: no names from it
            return []
        names: List[Optional[str]] = []
        try:
            names = [self.o.str(x) for x in self.o.tuple_items(self.u64(code + k["localnames"]) or 0, n)]
        except Exception:  # noqa: BLE001 - values without names still name by type
            names = []
        out: List[Tuple[Optional[str], int]] = []
        for i in range(n):
            v = int.from_bytes(raw[8 * i:8 * i + 8], "little")
            if self.p.features.tagged_executable:
                v &= ~3  # 3.14: fast locals are _PyStackRefs (low bits tag deferred references)
            if v and self.type_name(v) == "cell":
                v = self.u64(v + self.t["cell.ref"]) or 0
            if v:
                out.append((names[i] if i < len(names) else None, v))
        return out

    def activity(self, lwp: int) -> Optional[str]:
        """A fingerprint of what the thread's Python code has done so far: the frames it is in and
        their fast locals (an int by its value, any other object by its address).  Fast locals
        change only when the frame's own code runs, so two samples whose fingerprints differ prove
        the thread ran Python code in between, even when both caught it in the same wait (a training
        loop caught in ``.item()``'s device sync each time).  A frame with no fast locals (module
        level) adds its int globals (``_global_ints``).  Equal fingerprints prove nothing."""
        frames = self.p.innermost_frames(lwp, ACTIVITY_FRAMES)
        if not frames:
            return None
        parts: List[str] = []
        dicts: List[int] = []
        for frame in frames:
            parts.append("%x" % frame)
            local = self.frame_locals(frame)
            for _name, obj in local:
                value = None
                if self.type_name(obj) == "int":
                    try:
                        value = self.o.int(obj)
                    except Exception:  # noqa: BLE001 - unreadable: the address stands for it
                        value = None
                parts.append("i%d" % value if value is not None else "%x" % obj)
            if not local:
                parts.extend(self._global_ints(frame, dicts))
        data = " ".join(parts).encode()
        # 64 bits of two checksums zlib already loaded (hashlib pulls in OpenSSL: ~3 ms a run)
        return "%08x%08x" % (zlib.crc32(data), zlib.adler32(data))

    def _global_ints(self, frame: int, dicts: List[int]) -> List[str]:
        """A frame with no fast locals (a module-level loop: its step counter is a global): the int
        values of its globals (by key), once per dict, so a loop at module level that counts its
        steps shows them between samples.  Only ints, by value: an object another thread rebinds
        says nothing of this thread, and a thread that never woke is stuck before this is asked."""
        off = self.p.frame_keys["globals"]
        try:
            g = self.u64(frame + off) if off is not None else 0
            if not g or g in dicts or self.type_name(g) != "dict":
                return []
            dicts.append(g)
            items = self.o.dict_items(g)[:GLOBAL_ITEMS]
        except Exception:  # noqa: BLE001 - unreadable: nothing added
            return []
        out: List[str] = []
        for key, obj in items:
            if self.type_name(obj) != "int":
                continue
            try:
                value = self.o.int(obj)
            except Exception:  # noqa: BLE001 - unreadable: left out
                value = None
            if value is not None:
                out.append("g%x=%d" % (key, value))
        return out

    def join_target_ident(self, lwp: int) -> Optional[int]:
        """3.13+ ``Thread.join()`` without DWARF for the C thread handle: the ``threading`` ident
        (pthread_t) of the thread being joined, from ``self._ident`` of the innermost Python frame
        whose ``self`` has one (``Thread.join``'s own ``self`` is the thread joined)."""
        for frame in self.p.innermost_frames(lwp, NAME_FRAMES):
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
                d = self.u64(obj + self.t["tp.dict"])
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
