"""Owners of the Python locks that record none, inferred from the frames' source and memory.

Why: a plain ``threading.Lock`` (and the lock under a ``threading.Condition``) records no owner,
so a thread waiting for one had no held-by edge ("held by unknown") and two threads taking two
Locks in opposite order showed no cycle.  For every Python frame of every thread,
``model.heldsource`` says which lock expressions the frame holds (``with lock_a:`` around its
current line, ``self.lock.acquire()`` before it with no release); each expression is resolved
to an object through that frame's locals, globals and attributes in the process's memory (live
or core), and a waited-for lock object found held by exactly one thread gets that thread as its
owner, marked ``owner_inferred`` ("inferred from source") in the ``Wait``.

Only frames outside the standard library are read (``threading``/``queue`` release their locks
in ``Condition.wait``), only locks some thread waits for are looked up, and a lock two threads
seem to hold is left without an owner: evidence that contradicts itself proves nothing.
"""

import ast
import re
from typing import Dict, List, Optional, Tuple

from .model import Frame, Process, Thread, heldsource
from .pyframes.framewalk import FrameWalker
from .pyframes.process import PyProcess
from .pylocks import LOCK_TYPE_NAMES, PyLocks

#: Python frames of one thread read for held locks (innermost first): locks held further out are
#: rare, and each frame costs a parse (cached per file) and a few reads.
HELD_FRAMES = 32
#: The interpreter's own library: its locking is correct and released in ``Condition.wait``.
_STDLIB = re.compile(r"/lib/python3\.\d+t?/(?!(site|dist)-packages/)")
#: Instances whose lock is an attribute: ``with cond:`` acquires ``cond._lock``.
_WRAPPERS = {"Condition": "_lock"}


def is_stdlib(path: Optional[str]) -> bool:
    return bool(path) and bool(_STDLIB.search(path or ""))


def _frame_pairs(t: Thread, pyproc: PyProcess, walker: FrameWalker) -> List[Tuple[Frame, int, int]]:
    """(model frame, frame address, co_firstlineno) of the thread's Python frames, innermost
    first: the walker's frames paired with the memory frames they came from, by code object name
    and file, in order (shim and entry frames in memory have no model frame and are skipped)."""
    model = [f for f in t.all_frames() if f.kind == "python" and not f.marker][:HELD_FRAMES]
    if not model or not t.tid:
        return []
    out: List[Tuple[Frame, int, int]] = []
    k = 0
    for addr in pyproc.innermost_frames(t.tid, 4 * HELD_FRAMES):
        if k >= len(model):
            break
        try:
            code = pyproc.frame_code(addr)
            info = walker.code_info(code) if code else None
        except Exception:  # noqa: BLE001 - an unreadable frame pairs with nothing
            info = None
        if info is None:
            continue
        f = model[k]
        if info[0] == f.function and info[1] == f.file:
            out.append((f, addr, info[2]))
            k += 1
    return out


class _Resolver:
    """Lock expressions to objects, in one frame's locals and globals (raw memory reads)."""

    def __init__(self, py: PyLocks):
        self.py = py
        self.o = py.o
        self.t = py.t

    def resolve(self, frame: int, e: ast.expr) -> Optional[int]:
        try:
            return self._expr(frame, e)
        except Exception:  # noqa: BLE001 - ReadError, struct.error: unresolved
            return None

    def _expr(self, frame: int, e: ast.expr) -> Optional[int]:
        if isinstance(e, ast.Name):
            for name, obj in self.py.frame_locals(frame):
                if name == e.id:
                    return obj
            off = self.py.p.frame_keys["globals"]
            g = self.py.u64(frame + off) if off is not None else None
            return self.o.dict_get_str(g, e.id) if g and self.py.type_name(g) == "dict" else None
        if isinstance(e, ast.Attribute):
            base = self._expr(frame, e.value)
            return self._attr(base, e.attr) if base else None
        if isinstance(e, ast.Subscript):
            base = self._expr(frame, e.value)
            idx = heldsource.subscript_index(e)
            if idx is None and heldsource.subscript_name(e):
                idx = self._int(frame, ast.Name(id=heldsource.subscript_name(e), ctx=ast.Load()))
            kind = self.py.type_name(base)
            if base is None or idx is None or kind not in ("list", "tuple"):
                return None
            items = self.o.list_items(base, idx + 1) if kind == "list" else self.o.tuple_items(base, idx + 1)
            return items[idx] if idx < len(items) else None
        return None

    def _int(self, frame: int, e: ast.expr) -> Optional[int]:
        """The value of a small non-negative int variable (an index), else None."""
        obj = self._expr(frame, e)
        if not obj or self.py.type_name(obj) != "int":
            return None
        v = self.o.int(obj)
        return v if v is not None and 0 <= v < 1 << 16 else None

    def _attr(self, obj: int, name: str) -> Optional[int]:
        """``obj.name``: a module's global, a class's attribute, an instance's attribute, else its
        class's (a lock shared by all instances)."""
        kind = self.py.type_name(obj)
        if kind == "module":
            d = self.py.u64(obj + self.t["mod.md_dict"])
            return self.o.dict_get_str(d, name) if d else None
        if kind == "type":
            d = self.py.u64(obj + self.t["tp.dict"])
            return self.o.dict_get_str(d, name) if d else None
        if not kind:
            return None
        v = self.o.instance_attr(obj, name)
        if v:
            return v
        tp = self.py.u64(obj + self.t.get("ob.type", 8))
        d = self.py.u64(tp + self.t["tp.dict"]) if tp else None
        return self.o.dict_get_str(d, name) if d else None

    def lock_of(self, obj: Optional[int]) -> Optional[int]:
        """The ``_thread.lock`` a held object stands for: itself, or a Condition's ``_lock``."""
        kind = self.py.type_name(obj)
        if kind in LOCK_TYPE_NAMES:
            return obj
        attr = _WRAPPERS.get((kind or "").rsplit(".", 1)[-1])
        if attr and obj:
            try:
                inner = self.o.instance_attr(obj, attr)
            except Exception:  # noqa: BLE001
                return None
            return inner if self.py.type_name(inner) in LOCK_TYPE_NAMES else None
        return None


def infer_owners(process: Process, pyproc: Optional[PyProcess]) -> None:
    """Give each ``pylock`` wait without an owner the one thread whose source provably holds it."""
    if pyproc is None:
        return
    wanted: Dict[int, List[Thread]] = {}
    for t in process.threads:
        w = t.waits
        if w is not None and w.kind == "pylock" and w.owner_tid is None and w.resource:
            try:
                wanted.setdefault(int(w.resource, 16), []).append(t)
            except ValueError:
                continue
    if not wanted:
        return
    py = PyLocks(pyproc)
    res = _Resolver(py)
    walker = FrameWalker(pyproc)
    holders: Dict[int, Dict[int, Tuple[str, str]]] = {}  # lock -> {tid: (how, spelling)}
    for t in process.threads:
        for f, addr, first in _frame_pairs(t, pyproc, walker):
            if is_stdlib(f.file):
                continue
            for h in heldsource.held_at(f.file, f.line, f.function, first):
                lock = res.lock_of(res.resolve(addr, h.expr))
                if lock in wanted and t.tid:
                    holders.setdefault(lock, {}).setdefault(t.tid, (h.describe(f.file or "?"), h.text))
    for lock, waiters in wanted.items():
        owners = holders.get(lock, {})
        if len(owners) != 1:
            continue  # nobody, or two threads: a plain Lock has one holder at most
        tid, (how, text) = next(iter(owners.items()))
        for t in waiters:
            w = t.waits
            if not w.name and not re.search(r"\[[^\d]", text):
                w.name = text  # the holder's spelling names a lock the waiter's frames do not
            w.owner_tid = tid
            w.owner_inferred = how
            said = " held by LWP %d (inferred from source: %s; CPython records no owner)" % (tid, how)
            unknown = ": CPython records no owner, held by unknown"
            w.detail = (w.detail.replace(unknown, said) if w.detail and unknown in w.detail
                        else "waiting for threading.Lock%s" % said)
