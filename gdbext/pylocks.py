"""CPython facts the wait analysis needs: lock objects, the GIL holder, thread states, globals.

Why a module of its own: ``locks.py`` reasons about *waits*; this one knows CPython memory.
It reads raw memory only (no DWARF needed), so Debian's stripped ``python3.11`` works like a
pyenv build.  When the Python frame walker (``pyframes.walker``) hands us a ``pyproc`` with
``gil_holder_lwp`` / ``pthread_to_lwp`` we use those; everything else here is the minimum the
walker does not expose (lock-object layouts, weakrefs, module-globals names).

Layouts (x86-64, default GIL builds) were checked against DWARF of pyenv 3.8.18-3.13.0:
  * ``rlockobject``: PyObject_HEAD, ``rlock_lock`` @16, ``rlock_owner`` (pthread ident) @24,
    ``rlock_count`` @32 -- identical 3.8-3.13.
  * ``lockobject``: PyObject_HEAD, ``lock_lock`` @16; CPython records no owner.
  * ``PyWeakReference.wr_object`` @16 (the ``_tstate_lock`` of a thread hangs off its tstate
    through a weakref in ``on_delete_data``, 3.8-3.12).
  * dict keys: 3.8-3.10 ``dk_size``@8, indices @40 (width from dk_size), entries (hash,key,value);
    3.11+ ``dk_log2_size``@8, ``dk_log2_index_bytes``@9, ``dk_kind``@10, indices @32, entries
    (key,value) for str-only keys else (hash,key,value).
"""

import re
import struct
from typing import Callable, Dict, Iterator, List, Optional, Tuple

RLOCK_OWNER_OFF = 24
RLOCK_COUNT_OFF = 32
WEAKREF_OBJECT_OFF = 16
TYPE_NAME_OFF = 24  # PyTypeObject.tp_name (after PyObject_VAR_HEAD)

RLOCK_TYPE_NAMES = ("_thread.RLock",)
LOCK_TYPE_NAMES = ("_thread.lock",)

#: Per minor version: where the runtime, thread states and frames are (x86-64).  Values from
#: shared/reference/cpython-frames.md, checked with DWARF.  "gil": ("runtime", off_last_holder)
#: means the GIL lives in _PyRuntime (3.8-3.11, tstate_current used instead); ("interp", ptr_off)
#: means ``interp->ceval.gil`` points to a struct with last_holder @8, locked @16.
LAYOUT: Dict[Tuple[int, int], Dict[str, object]] = {
    (3, 8): {"on_delete_data": 208, "interp_head": 32, "tstate_head": 8, "thread_id": 176, "native_id": None,
             "tstate_current": 1368, "gil_ptr": None, "gil_struct": 1152,
             "frame": ("frame", 24), "globals": 48, "back": 24, "ascii": 48, "dict": "old"},
    (3, 9): {"on_delete_data": 208, "interp_head": 32, "tstate_head": 8, "thread_id": 176, "native_id": None,
             "tstate_current": 568, "gil_ptr": None, "gil_struct": 352,
             "frame": ("frame", 24), "globals": 48, "back": 24, "ascii": 48, "dict": "old"},
    (3, 10): {"on_delete_data": 208, "interp_head": 32, "tstate_head": 8, "thread_id": 176, "native_id": None,
              "tstate_current": 568, "gil_struct": 352, "gil_ptr": None,
              "frame": ("frame", 24), "globals": 48, "back": 24, "ascii": 48, "dict": "old"},
    (3, 11): {"on_delete_data": 192, "interp_head": 40, "tstate_head": 16, "thread_id": 152, "native_id": 160,
              "tstate_current": 576, "gil_struct": 360, "gil_ptr": None,
              "frame": ("cframe", 56, 8), "globals": 8, "back": 48, "ascii": 48, "dict": "new"},
    (3, 12): {"on_delete_data": 176, "interp_head": 40, "tstate_head": 72, "thread_id": 136, "native_id": 144,
              "tstate_current": None, "gil_ptr": 384, "gil_struct": None,
              "frame": ("cframe", 56, 0), "globals": 24, "back": 8, "ascii": 40, "dict": "new"},
    (3, 13): {"on_delete_data": None, "interp_head": 632, "tstate_head": 7344, "thread_id": 152, "native_id": 160,
              "tstate_current": None, "gil_ptr": 16, "gil_struct": None,
              "frame": ("frame", 72), "globals": 24, "back": 8, "ascii": 40, "dict": "new"},
}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PyMemory:
    """Raw CPython reads over a ``read(addr, n) -> bytes|None`` function (never raises)."""

    def __init__(self, read: Callable[[int, int], Optional[bytes]], version: Optional[Tuple[int, int]],
                 runtime: Optional[int]):
        self.read = read
        self.version = version
        self.runtime = runtime
        self.layout = LAYOUT.get(version) if version else None
        self._type_names: Dict[int, Optional[str]] = {}

    # -- primitive reads -------------------------------------------------------------------
    def u64(self, addr: int) -> Optional[int]:
        b = self.read(addr, 8) if addr else None
        return struct.unpack("<Q", b)[0] if b and len(b) == 8 else None

    def i32(self, addr: int) -> Optional[int]:
        b = self.read(addr, 4) if addr else None
        return struct.unpack("<i", b)[0] if b and len(b) == 4 else None

    def cstring(self, addr: int, limit: int = 64) -> Optional[str]:
        b = self.read(addr, limit) if addr else None
        if not b:
            return None
        b = b.split(b"\0", 1)[0]
        try:
            return b.decode("ascii")
        except UnicodeDecodeError:
            return None

    # -- objects ---------------------------------------------------------------------------
    def type_name(self, obj: int) -> Optional[str]:
        """``Py_TYPE(obj)->tp_name``, or None when obj does not look like an object."""
        if not obj or obj & 7 or obj < 0x10000:
            return None
        tp = self.u64(obj + 8)
        if not tp or tp & 7:
            return None
        if tp not in self._type_names:
            name_ptr = self.u64(tp + TYPE_NAME_OFF)
            name = self.cstring(name_ptr) if name_ptr else None
            self._type_names[tp] = name if name and re.match(r"^[\w.]+$", name) else None
        return self._type_names[tp]

    def rlock_owner(self, obj: int) -> Tuple[Optional[int], int]:
        """(owner pthread ident or None, recursion count) of a ``_thread.RLock``."""
        owner = self.u64(obj + RLOCK_OWNER_OFF)
        count = self.u64(obj + RLOCK_COUNT_OFF) or 0
        if not owner or not count:
            return None, count
        return owner, count

    def str_value(self, obj: int) -> Optional[str]:
        """An ASCII ``str`` (identifiers: dict keys of module globals)."""
        if self.layout is None or self.type_name(obj) != "str":
            return None
        n = self.u64(obj + 16)
        if n is None or not 0 < n <= 200:
            return None
        b = self.read(obj + int(self.layout["ascii"]), n)
        if not b:
            return None
        try:
            s = b.decode("ascii")
        except UnicodeDecodeError:
            return None
        return s if _IDENT.match(s) else None

    def dict_items(self, d: int, limit: int = 4096) -> Iterator[Tuple[int, int]]:
        """(key, value) pointers of a combined-table dict (module globals are)."""
        if self.layout is None:
            return
        keys = self.u64(d + 32)
        if not keys or self.u64(d + 40):  # split tables (instance dicts) are not needed here
            return
        if self.layout["dict"] == "old":
            size = self.u64(keys + 8) or 0
            n = self.u64(keys + 32) or 0
            ix = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
            start, width, key_at = keys + 40 + size * ix, 24, 8
        else:
            head = self.read(keys + 8, 3)
            if not head:
                return
            log2_index_bytes, kind = head[1], head[2]
            n = self.u64(keys + 24) or 0
            start = keys + 32 + (1 << log2_index_bytes)
            width, key_at = (16, 0) if kind else (24, 8)
        n = min(n, limit)
        blob = self.read(start, n * width) if n > 0 else None
        if not blob:
            return
        for i in range(n):
            key, value = struct.unpack_from("<QQ", blob, i * width + key_at)
            if key and value:
                yield key, value

    # -- runtime ---------------------------------------------------------------------------
    def tstates(self) -> List[int]:
        """Thread states of every interpreter (bounded, cycle-safe)."""
        out: List[int] = []
        lay = self.layout
        if lay is None or not self.runtime:
            return out
        interp = self.u64(self.runtime + int(lay["interp_head"]))
        seen = set()
        while interp and interp not in seen and len(seen) < 64:
            seen.add(interp)
            ts = self.u64(interp + int(lay["tstate_head"]))
            while ts and ts not in out and len(out) < 4096:
                out.append(ts)
                ts = self.u64(ts + 8)
            interp = self.u64(interp + 8)
        return out

    def tstate_ident(self, ts: int) -> Optional[int]:
        return self.u64(ts + int(self.layout["thread_id"])) if self.layout else None

    def tstate_native_id(self, ts: int) -> Optional[int]:
        off = self.layout.get("native_id") if self.layout else None
        v = self.u64(ts + int(off)) if off is not None else None
        return v if v and v < (1 << 32) else None

    def gil(self) -> Tuple[Optional[int], Optional[int]]:
        """(address of the GIL state, tstate holding it or None)."""
        lay = self.layout
        if lay is None or not self.runtime:
            return None, None
        if lay.get("tstate_current") is not None:
            gil_addr = self.runtime + int(lay["gil_struct"])
            return gil_addr, self.u64(self.runtime + int(lay["tstate_current"])) or None
        interp = self.u64(self.runtime + int(lay["interp_head"]))
        gil_addr = self.u64(interp + int(lay["gil_ptr"])) if interp else None
        if not gil_addr:
            return None, None
        locked = self.i32(gil_addr + 16)
        holder = self.u64(gil_addr + 8)
        return gil_addr, (holder if locked == 1 and holder else None)

    def innermost_globals(self, ts: int) -> Optional[int]:
        """The module globals dict of the innermost Python frame of a thread state."""
        lay = self.layout
        if lay is None:
            return None
        spec = lay["frame"]
        if spec[0] == "cframe":
            cf = self.u64(ts + int(spec[1]))
            fr = self.u64(cf + int(spec[2])) if cf else None
        else:
            fr = self.u64(ts + int(spec[1]))
        for _ in range(64):
            if not fr:
                return None
            g = self.u64(fr + int(lay["globals"]))
            if g and self.type_name(g) == "dict":
                return g
            fr = self.u64(fr + int(lay["back"]))
        return None

    def global_name(self, globals_dict: int, obj: int) -> Optional[str]:
        for key, value in self.dict_items(globals_dict):
            if value == obj:
                return self.str_value(key)
        return None

    def tstate_locks(self, tstates: List[int]) -> Dict[int, int]:
        """{lock object: tstate} for every thread's ``_tstate_lock`` (3.8-3.12: a weakref to it
        sits in ``tstate->on_delete_data``).  Thread.join() waits on that lock."""
        out: Dict[int, int] = {}
        off = self.layout.get("on_delete_data") if self.layout else None
        if off is None:
            return out
        for ts in tstates:
            wr = self.u64(ts + int(off))
            target = self.u64(wr + WEAKREF_OBJECT_OFF) if wr else None
            if target and "weakref" in (self.type_name(wr) or ""):
                out[target] = ts
        return out
