"""What the walker finds in one process: ``PyProcess`` (its interpreters and threads, and the
readers the lock analysis uses), ``PyThreadInfo`` per thread state, ``PyGroup`` per native eval
activation (``walker.py`` fills them in; ``framewalk.py`` walks one thread's frames)."""

from typing import Dict, List, Optional, Tuple

from ..model import Frame
from . import tables
from .lwpmap import LwpMap
from .objects import Memory, Objects, ReadError
from .target import ProcessTarget

MAX_FRAMES = 4096
MAX_THREADS = 100000
MAX_INTERPRETERS = 256
MARKER = "<python frame chain truncated>"


class PyGroup:
    """Python frames run by one native ``_PyEval_EvalFrameDefault`` activation (innermost first).

    ``anchor`` is an address inside that activation's C stack frame when the version gives one
    (3.11: its ``_PyCFrame``; 3.12+: its entry/shim frame), else None (3.8-3.10)."""

    __slots__ = ("frames", "anchor", "first_addr")

    def __init__(self) -> None:
        self.frames: List[Frame] = []
        self.anchor: Optional[int] = None
        self.first_addr: Optional[int] = None


class PyThreadInfo:
    def __init__(self, tstate: int, interp: int):
        self.tstate = tstate
        self.interp = interp
        self.lwp: Optional[int] = None
        self.pthread_id: Optional[int] = None
        self.name: Optional[str] = None
        self.frames: List[Frame] = []
        self.groups: List[PyGroup] = []
        self.truncated: Optional[Frame] = None
        self.gil: Optional[str] = None
        self.gc: Optional[bool] = None
        self.notes: List[str] = []
        self.tstates = 1  # thread states of this OS thread (more than one with subinterpreters)


class PyProcess:
    """One CPython process as the walker found it: its layout (``offsets``, ``features``), its
    interpreters and threads, and the frame readers the lock analysis (``pylocks``) reuses."""

    def __init__(self, mem: Memory, offsets: Dict[str, int], features: tables.Features,
                 version_info: Tuple[int, int], version: str, version_source: str, runtime_address: int):
        self.mem = mem
        self.objects = Objects(mem, offsets, features)
        self.offsets = offsets
        self.features = features
        self.version_info = version_info
        self.version = version
        self.version_source = version_source
        self.runtime_address = runtime_address
        self.interpreters: List[int] = []
        self.threads: Dict[int, PyThreadInfo] = {}
        self.pthread_to_lwp: Dict[int, int] = {}
        self.gil_holder_lwp: Optional[int] = None
        self.gc_collecting: Optional[bool] = None
        self.dwarf_checked: Optional[bool] = None
        self.runtime_found: Optional[str] = None  # how _PyRuntime was found
        self.notes: List[str] = []
        self.target: Optional[ProcessTarget] = None
        self._lwp_map: Optional[LwpMap] = None
        #: a free-threaded build (3.13t/3.14t: ``Py_GIL_DISABLED``), from _Py_DebugOffsets
        self.free_threading = features.free_threaded
        frame_objects = features.frames == "frame_objects"
        #: Where a frame (PyFrameObject 3.8-3.10, _PyInterpreterFrame 3.11+) and its code object
        #: keep what the lock analysis reads; None: not in this version.
        self.frame_keys: Dict[str, Optional[int]] = {
            k: offsets.get(v[0] if frame_objects else v[1]) for k, v in (
                ("back", ("fo.f_back", "ifr.previous")), ("code", ("fo.f_code", "ifr.code")),
                ("globals", ("fo.f_globals", "ifr.globals")), ("localsplus", ("fo.localsplus", "ifr.localsplus")),
                ("nlocals", ("co.nlocals", "co.nlocalsplus")), ("localnames", ("co.varnames", "co.localsplusnames")))}
        #: free-threaded only: whether the GIL was switched back on (PYTHON_GIL=1, or an extension
        #: module that does not declare free-threading support); None when unreadable
        self.gil_enabled: Optional[bool] = None

    def read(self, addr: int, size: int) -> bytes:
        return self.mem.read(addr, size)

    def innermost_frames(self, lwp: int, count: int) -> List[int]:
        """Addresses of a thread's ``count`` innermost Python frames (frame objects on 3.8-3.10,
        interpreter frames on 3.11+, 3.12+ shim frames included), from where its walk began."""
        info = self.threads.get(lwp)
        back = self.frame_keys["back"]
        out: List[int] = []
        fr = info.groups[0].first_addr if info is not None and info.groups else None
        while fr and back is not None and len(out) < count and fr not in out:
            out.append(fr)
            try:
                fr = self.mem.u64(fr + back)
            except ReadError:
                break
        return out

    def frame_code(self, frame: int) -> Optional[int]:
        """The code object a frame runs (3.14: its tagged ``f_executable`` unmasked)."""
        off = self.frame_keys["code"]
        if off is None:
            return None
        code = self.mem.u64(frame + off)
        return code & ~3 if self.features.tagged_executable else code

    def summary(self) -> Dict[str, object]:
        """Process-level facts for ``Process.python`` / ``Process.notes`` of the snapshot."""
        out: Dict[str, object] = {"version": self.version, "version_source": self.version_source,
                                  "interpreters": len(self.interpreters),
                                  "gil_holder": self.gil_holder_lwp, "gc_collecting": self.gc_collecting,
                                  "offsets_checked_against_dwarf": self.dwarf_checked,
                                  "free_threading": self.free_threading}
        if self.free_threading:
            out["gil_enabled"] = self.gil_enabled
        if self.notes:
            out["notes"] = list(self.notes)
        return {k: v for k, v in out.items() if v is not None}

    def lwp_for_pthread(self, ident: int) -> Optional[int]:
        """LWP of a pthread_t (a ``threading`` ident), via thread states or libthread_db."""
        if ident in self.pthread_to_lwp:
            return self.pthread_to_lwp[ident]
        if self._lwp_map is None:
            self._lwp_map = LwpMap(self.target)
        lwp = self._lwp_map.lookup(ident)
        if lwp is not None:
            self.pthread_to_lwp[ident] = lwp
        return lwp

    def threading_active(self, interp: Optional[int] = None) -> Dict[int, int]:
        """``threading._active`` of an interpreter (main by default): {ident: Thread object}."""
        interp = interp or (self.interpreters[0] if self.interpreters else 0)
        if not interp:
            return {}
        o, t = self.objects, self.offsets
        modules = self.mem.u64(interp + t["is.modules"])
        if not modules:
            return {}
        mod = o.dict_get_str(modules, "threading")
        if not mod:
            return {}
        md_dict = self.mem.u64(mod + t["mod.md_dict"])
        active = o.dict_get_str(md_dict, "_active") if md_dict else None
        if not active:
            return {}
        out: Dict[int, int] = {}
        for k, v in o.dict_items(active):
            ident = o.int(k)
            if ident is not None:
                out[ident] = v
        return out
