"""A gdb frame filter that shows Python frames in place in plain ``bt``.

``filter()`` only wraps the iterator (no work there, as gdb asks); the first time gdb pulls a
frame, the selected thread is unwound and merged once (``merge.merge_thread``) and each native
frame is then decorated lazily.  Python frames appear directly above the
``_PyEval_EvalFrameDefault`` frame that runs them, named ``[py] qualname``, with the frame
number of that native frame printed once (gdb numbers gdb frames; later lines of the same
frame carry its pc instead).  Native frames without
a symbol print as ``??`` (GDB 13 prints an empty name for them under a filter otherwise).

Python frames that could not be placed (``merge == "unmerged"``) follow the last native frame,
marked ``[py?]``.  Off switch: ``hang-bt-filter off`` (or gdb's ``disable frame-filter global hanganalyze-python``).
The process walk is cached until the inferior runs again or loads new objects.
"""

from typing import Dict, List, Optional, Tuple

import gdb
from gdb.FrameDecorator import FrameDecorator

from . import merge, native
from .gdbtarget import describe_process, lwp_of
from .model import Frame, Thread
from .model.termsafe import safe

NAME = "hanganalyze-python"

_generation = [0]
_cache: Dict[str, Tuple[int, object]] = {}


def _bump(*_args) -> None:
    _generation[0] += 1


for _ev in ("stop", "cont", "exited", "new_objfile", "clear_objfiles"):
    _reg = getattr(gdb.events, _ev, None)
    if _reg is not None:
        _reg.connect(_bump)


def _cached(key: str, make):
    hit = _cache.get(key)
    if hit is not None and hit[0] == _generation[0]:
        return hit[1]
    val = make()
    _cache[key] = (_generation[0], val)
    return val


def python_process():
    """describe_process for the selected inferior, cached per stop (None: not Python / broken)."""
    def make():
        try:
            return describe_process(gdb.selected_inferior())
        except Exception:  # noqa: BLE001 - bt must keep working whatever the runtime looks like
            return None

    return _cached("pyproc", make)


def library_map() -> "native.LibraryMap":
    return _cached("libs", native.LibraryMap)


def merged_thread() -> Optional[Thread]:
    """Merged frames of the selected thread (same code path as ``hang-bt``)."""
    th = gdb.selected_thread()
    if th is None:
        return None
    natives = native.unwind(library_map())
    t = Thread(tid=lwp_of(th), os_name=th.name)
    t.name = t.os_name
    merge.merge_thread(t, natives, python_process())
    t._natives = natives  # type: ignore[attr-defined]  # kept for the plan below
    return t


def _plan() -> Dict[int, List[Frame]]:
    """{native frame level: Python frames to print just before it}; key -1: Python frames that
    could not be placed (printed after the last frame, marked ``[py?]``)."""
    t = merged_thread()
    if t is None:
        return {}
    if t.merge != "merged":
        return {-1: list(t.python_frames)} if t.python_frames else {}
    plan: Dict[int, List[Frame]] = {}
    pending: List[Frame] = []
    level = 0
    for f in t.frames:
        if f.kind == "python":
            pending.append(f)
        else:
            if pending:
                plan[level] = pending
                pending = []
            level += 1
    return plan


class NativeDecorator(FrameDecorator):
    def function(self):
        name = super().function()
        if isinstance(name, str) and name:
            return name
        # FrameDecorator returns the pc (an int) when there is no full symbol; gdb would resolve
        # minimal symbols from it but prints an empty name when there is none at all: say "??".
        try:
            name = self.inferior_frame().name()
        except Exception:  # noqa: BLE001
            name = None
        return name or "??"


class PythonFrameDecorator(FrameDecorator):
    """One Python frame, borrowing the eval frame it runs in as its gdb frame."""

    def __init__(self, base, pyframe: Frame, placed: bool = True):
        super().__init__(base)
        self._py = pyframe
        self._tag = "[py]" if placed else "[py?]"

    def function(self):
        return "%s %s" % (self._tag, safe(self._py.function or "??"))  # inferior data: no raw ESC

    def address(self):
        # GDB prints the level only once per gdb frame and drops the line of a later decorator
        # of the same frame that has neither level nor address, so show the eval frame's pc.
        try:
            return self.inferior_frame().pc()
        except Exception:  # noqa: BLE001
            return None

    def filename(self):
        return safe(self._py.file) if self._py.file else None

    def line(self):
        return self._py.line

    def frame_args(self):
        return None

    def frame_locals(self):
        return None


def _decorate(frame_iter):
    plan = None
    last = None
    for dec in frame_iter:
        if plan is None:
            try:
                plan = _plan()
            except Exception:  # noqa: BLE001 - fall back to plain native frames
                plan = {}
        try:
            level = dec.inferior_frame().level()
        except Exception:  # noqa: BLE001
            level = -2
        for pf in plan.get(level, ()):
            yield PythonFrameDecorator(dec, pf)
        last = dec
        yield NativeDecorator(dec)
    if last is not None and plan:
        for pf in plan.get(-1, ()):
            yield PythonFrameDecorator(last, pf, placed=False)


class PythonFrameFilter:
    def __init__(self) -> None:
        self.name = NAME
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frame_iter):
        return _decorate(frame_iter)


_FILTER: Optional[PythonFrameFilter] = None


def install() -> PythonFrameFilter:
    global _FILTER
    if _FILTER is None:
        _FILTER = PythonFrameFilter()
    return _FILTER
