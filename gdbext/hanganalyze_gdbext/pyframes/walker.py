"""Walk every CPython interpreter and thread of the inferior from raw memory.

``describe_target(target)`` is the seam (``gdbtarget.describe_process(inferior)`` for gdb's
inferior).  It returns ``None`` when the process is not CPython, else a ``PyProcess``:

  * ``version`` ("3.11.7"), ``version_info`` ((3, 11)), ``version_source`` (how it was found)
  * ``offsets``: the flat offsets table in use (``tables.py`` keys, e.g. ``"ts.thread_id"``),
    from ``_Py_DebugOffsets`` on 3.13+, else the per-version table, checked against DWARF
  * ``runtime_address``, ``interpreters`` (addresses, main first), ``gc_collecting``
  * ``threads``: ``{lwp: PyThreadInfo}``; ``pthread_to_lwp``: ``{pthread_t: lwp}`` for every
    thread with a thread state; ``lwp_for_pthread(ident)`` maps any other ``threading`` ident
  * ``gil_holder_lwp``: LWP holding the main interpreter's GIL (None: nobody or unknown);
    threads holding a subinterpreter's own GIL (3.12+) have ``gil == "held"`` too
  * ``free_threading``: a free-threaded build (3.13t/3.14t); there, while the GIL is off
    (``gil_enabled`` False), every thread's ``gil`` is None and a note says why: no guess
  * ``read(addr, size) -> bytes`` (raises ``ReadError``), ``objects`` (``objects.Objects``:
    ``str``, ``int``, ``dict_items``, ``instance_attr``, ``type_name``...) for readers of Python
    objects such as RLock owners or Thread objects, and ``threading_active()``: the
    ``threading._active`` registry as ``{ident: Thread object address}``
  * ``notes``: what went wrong or was guessed; ``summary()``: all process-level facts as a dict

``PyThreadInfo``: ``lwp``, ``pthread_id``, ``tstate``, ``interp`` (of its first thread state),
``tstates`` (how many thread states the OS thread has: >1 with subinterpreters, whose frames
are all kept), ``name`` (``threading`` name, from ``threading._active`` and the Thread's
``_name``), ``frames`` (Python ``Frame``s, innermost first within each thread state),
``groups`` (the same frames split per native eval activation, with the stack-address anchor
the merge uses), ``truncated`` (a marker Frame when the chain could not be followed to its
end), ``gil`` ("held" / "no"; the merge adds "waiting" from native frames), ``gc`` (False when
no collection runs, None while one runs: the merge decides from native frames), ``notes``.
"""

import struct
from typing import Dict, List, Optional, Tuple

from ..model import Frame
from . import debug_offsets, linetable, runtime, tables
from .lwpmap import GLIBC_PTHREAD_TID, LwpMap  # noqa: F401 - GLIBC_PTHREAD_TID: tests read it here
from .objects import Memory, Objects, ReadError, i32_at, u64_at
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


def _span(t: Dict[str, int], prefix: str, extra: int = 8) -> int:
    """Bytes to read of a struct for one walk step: up to its last field the walker reads (the
    fast locals, which only the lock analysis reads, are a variable-length tail)."""
    return max([v for k, v in t.items() if k.startswith(prefix) and not k.endswith("localsplus")] or [0]) + extra


class _Walker:
    """Per-process walking state: caches for code objects and line numbers."""

    def __init__(self, proc: PyProcess):
        self.p = proc
        self.mem = proc.mem
        self.t = proc.offsets
        self.o = proc.objects
        # Code objects are recognised by their type's tp_name ("code"), cached per type address:
        # cheaper than resolving the PyCode_Type symbol (slow without DWARF) and equally strict.
        self._is_code_type: Dict[int, bool] = {}
        self._code: Dict[int, Optional[Tuple[str, str, int, bytes]]] = {}
        self._lines: Dict[Tuple[int, int], Optional[int]] = {}
        t = self.t
        self.ts_span = _span(t, "ts.")
        self.co_span = _span(t, "co.")
        self.fo_span = _span(t, "fo.", 4)
        self.ifr_span = _span(t, "ifr.", 8)
        self.features = proc.features
        self.tagged = proc.features.tagged_executable
        # 3.14t: each thread may run its own copy of the bytecode (co_tlbc[tlbc_index])
        self.tlbc = "ifr.tlbc_index" in t and "co.tlbc" in t
        self._tlbc: Dict[Tuple[int, int], Optional[int]] = {}

    # --- code objects ---------------------------------------------------------------------------
    def code_info(self, code: int) -> Optional[Tuple[str, str, int, bytes]]:
        """(qualified name, filename, firstlineno, line table) of a code object, cached."""
        if code in self._code:
            return self._code[code]
        info = None
        try:
            buf = self.mem.read(code, self.co_span)
            tp = u64_at(buf, self.t["ob.type"])
            ok = self._is_code_type.get(tp)
            if ok is None:
                ok = self._is_code_type[tp] = self.o.type_name(tp) == "code"
            if ok:
                t = self.t
                name_ptr = u64_at(buf, t["co.qualname"]) if "co.qualname" in t else u64_at(buf, t["co.name"])
                name = self.o.str(name_ptr) or self.o.str(u64_at(buf, t["co.name"])) or "??"
                filename = self.o.str(u64_at(buf, t["co.filename"])) or "??"
                first = i32_at(buf, t["co.firstlineno"])
                try:
                    table = self.o.bytes(u64_at(buf, t["co.linetable"]))
                except ReadError:
                    table = b""
                info = (name, filename, first, table)
        except (ReadError, struct.error):
            info = None
        self._code[code] = info
        return info

    def line(self, code: int, info: Tuple[str, str, int, bytes], pos: int) -> Optional[int]:
        key = (code, pos)
        if key in self._lines:
            return self._lines[key]
        _, _, first, table = info
        if self.features.lines == "lnotab":
            line: Optional[int] = linetable.lnotab_line(table, first, pos)
        elif self.features.lines == "linetable":
            line = linetable.linetable310_line(table, first, pos * 2 if pos >= 0 else -1)
        else:
            line = linetable.location_line(table, first, pos)
        self._lines[key] = line
        return line

    def _bytecode_base(self, code: int, index: int) -> Optional[int]:
        """3.14t: the bytecode copy a frame runs, ``code->co_tlbc->entries[index]`` (a
        ``_PyCodeArray``: ``size`` then ``entries``; entry 0 is ``co_code_adaptive`` itself)."""
        if index <= 0:
            return None
        key = (code, index)
        if key not in self._tlbc:
            base = None
            try:
                arr = self.mem.u64(code + self.t["co.tlbc"])
                if arr and index < min(self.mem.u64(arr), 1 << 16):
                    base = self.mem.u64(arr + 8 + 8 * index) or None
            except ReadError:
                base = None
            self._tlbc[key] = base
        return self._tlbc[key]

    # --- frames ---------------------------------------------------------------------------------
    def walk(self, th: PyThreadInfo, tbuf: bytes) -> None:
        try:
            if self.features.frames == "frame_objects":
                self._walk_frame_objects(th, u64_at(tbuf, self.t["ts.frame"]))
            else:
                self._walk_interpreter_frames(th, tbuf)
        except Exception as e:  # noqa: BLE001 - a garbage chain must never cost the other threads
            self._truncate(th, "unexpected error: %s" % e)
        th.frames = [f for g in th.groups for f in g.frames]

    def _truncate(self, th: PyThreadInfo, why: str) -> None:
        if th.truncated is None:
            th.truncated = Frame(kind="python", function=MARKER, marker=True, note=why)
            th.notes.append("Python frame chain truncated: %s" % why)

    def _walk_frame_objects(self, th: PyThreadInfo, f: int) -> None:
        t = self.t
        seen = set()
        while f:
            if f in seen:
                return self._truncate(th, "cycle at frame 0x%x" % f)
            if len(seen) >= MAX_FRAMES:
                return self._truncate(th, "more than %d frames" % MAX_FRAMES)
            seen.add(f)
            try:
                buf = self.mem.read(f, self.fo_span)
            except ReadError as e:
                return self._truncate(th, str(e))
            code = u64_at(buf, t["fo.f_code"])
            info = self.code_info(code)
            if info is None:
                return self._truncate(th, "frame 0x%x has no readable code object" % f)
            lasti = i32_at(buf, t["fo.f_lasti"])
            g = PyGroup()
            g.first_addr = f
            g.frames.append(Frame(kind="python", function=info[0], file=info[1], line=self.line(code, info, lasti)))
            th.groups.append(g)
            f = u64_at(buf, t["fo.f_back"])
        return None

    def _cframe_anchors(self, tbuf: bytes) -> Dict[int, int]:
        """3.11: {current_frame: address of the _PyCFrame} along tstate->cframe->previous."""
        t = self.t
        out: Dict[int, int] = {}
        cf = u64_at(tbuf, t["ts.cframe"])
        for _ in range(MAX_FRAMES):
            if not cf or cf in out.values():
                break
            try:
                buf = self.mem.read(cf, t["cf.previous"] + 8)
            except ReadError:
                break
            cur = u64_at(buf, t["cf.current_frame"])
            if cur:
                out.setdefault(cur, cf)
            cf = u64_at(buf, t["cf.previous"])
        return out

    def _walk_interpreter_frames(self, th: PyThreadInfo, tbuf: bytes) -> None:
        t = self.t
        if "ts.current_frame" in t:
            f = u64_at(tbuf, t["ts.current_frame"])
        else:
            cframe = u64_at(tbuf, t["ts.cframe"])
            if not cframe:
                return None
            try:
                f = self.mem.u64(cframe + t["cf.current_frame"])
            except ReadError as e:
                return self._truncate(th, str(e))
        has_entry = "ifr.is_entry" in t
        anchors = self._cframe_anchors(tbuf) if has_entry else {}
        mask = ~3 if self.tagged else ~0
        g = PyGroup()
        seen = set()
        while f:
            if f in seen:
                self._truncate(th, "cycle at frame 0x%x" % f)
                break
            if len(seen) >= MAX_FRAMES:
                self._truncate(th, "more than %d frames" % MAX_FRAMES)
                break
            seen.add(f)
            try:
                buf = self.mem.read(f, self.ifr_span)
            except ReadError as e:
                self._truncate(th, str(e))
                break
            owner = buf[t["ifr.owner"]]
            prev = u64_at(buf, t["ifr.previous"])
            if not has_entry and owner >= tables.SHIM_OWNER_MIN:
                # Entry frame on the C stack of the eval activation running the frames above it.
                if g.frames:
                    g.anchor = f
                    th.groups.append(g)
                    g = PyGroup()
                f = prev
                continue
            code = u64_at(buf, t["ifr.code"]) & mask
            info = self.code_info(code) if code else None
            if info is None:
                if code == 0 and not prev:
                    break  # 3.14 bottom sentinel
                self._truncate(th, "frame 0x%x has no readable code object" % f)
                break
            instr = u64_at(buf, t["ifr.instr"])
            base = code + t["co.code_adaptive"]
            if self.tlbc:
                base = self._bytecode_base(code, i32_at(buf, t["ifr.tlbc_index"])) or base
            unit = (instr - base) // 2
            if unit > 1 << 24 or unit < -1:
                unit = -1
            if g.first_addr is None:
                g.first_addr = f
            g.frames.append(Frame(kind="python", function=info[0], file=info[1], line=self.line(code, info, unit)))
            if has_entry and buf[t["ifr.is_entry"]]:
                g.anchor = anchors.get(g.first_addr)
                th.groups.append(g)
                g = PyGroup()
            f = prev
        if g.frames:
            th.groups.append(g)
        return None


def _load_offsets(target: ProcessTarget, mem: Memory,
                  rt: int) -> Tuple[Optional[Dict[str, int]], bool, Tuple[int, int], str, str, List[str]]:
    """(offsets, free-threaded, version, version text, how the version was found, notes)."""
    minor, text, source = runtime.detect_version(target, mem, rt)
    if minor is None:
        return None, False, (0, 0), "", source, ["CPython version could not be determined"]
    table, free_threaded, notes = layout_for(minor, mem, rt)
    if table is None or "rt.interpreters_head" not in table:
        return None, False, minor, text, source, notes + ["no offsets for CPython %s" % text]
    return table, free_threaded, minor, text, source, notes


def layout_for(minor: Tuple[int, int], mem: Memory, rt: int) -> Tuple[Optional[Dict[str, int]], bool, List[str]]:
    """(offsets, free-threaded, notes) of a CPython whose ``_PyRuntime`` is at ``rt``: the
    version's table, and from 3.13 on what ``_Py_DebugOffsets`` there says (free-threaded builds:
    every object-relative key moved by the larger object header)."""
    notes: List[str] = []
    table = tables.table_for(minor)
    if minor < (3, 13):
        return table, False, notes
    parsed = None
    try:
        parsed = debug_offsets.parse(mem.read(rt, debug_offsets.size_for(minor)))
    except ReadError as e:
        notes.append("_Py_DebugOffsets unreadable: %s" % e)
    if parsed is None:
        notes.append("_Py_DebugOffsets not usable; using the built-in %d.%d table" % minor)
        return (table if minor <= (3, 13) else None), False, notes
    dyn = debug_offsets.to_table(parsed)
    if table is None:
        table = dyn
    else:
        for k, v in dyn.items():
            if (k in table and table[k] != v and minor in tables.TABLES and minor <= (3, 13)
                    and not parsed.free_threaded):  # the tables are those of the default build
                notes.append("_Py_DebugOffsets %s=%d differs from the %d.%d table (%d): using _Py_DebugOffsets"
                             % (k, v, minor[0], minor[1], table[k]))
        table.update(dyn)
    if parsed.free_threaded:
        return tables.free_threaded_table(table, minor), True, notes
    return table, False, notes


def _scan(target: ProcessTarget, mem: Memory) -> Optional[int]:
    """Last resort when neither the symbol nor the section exists (a 3.8/3.9 runtime linked
    into a stripped executable that does not export it): scan, only if this looks like Python."""
    found = runtime.version_from_files(target)
    if found is None and not runtime.python_evidence(target):
        return None
    candidates = [found[0]] if found else [(3, 9), (3, 8), (3, 10), (3, 11)]
    for minor in candidates:
        table = tables.table_for(minor)
        if table is not None and "is.threads_head" in table:
            rt = runtime.scan_for_runtime(target, mem, table)
            if rt is not None:
                return rt
    return None


def describe_target(target: ProcessTarget) -> Optional[PyProcess]:
    """All interpreters, threads and Python stacks of a process or core; None when not CPython."""
    rt, how = runtime.find_runtime(target)
    mem = Memory(target.read_memory)
    if rt is None:
        rt = _scan(target, mem)
        if rt is None:
            return None
        how = "scan"
    table, free_threaded, minor, text, source, notes = _load_offsets(target, mem, rt)
    features = tables.features_for(minor, free_threaded)
    if table is None or features is None:
        raise RuntimeError("; ".join(notes) or "CPython runtime found but not understood")
    proc = PyProcess(mem, table, features, minor, text, source, rt)
    proc.target = target
    proc.runtime_found = how  # "symbol" | "section" | "scan"
    proc.notes.extend(notes)
    if how == "section":
        proc.notes.append("_PyRuntime found via the .PyRuntime section (no symbol)")
    elif how == "scan":
        proc.notes.append("_PyRuntime found by scanning the data segment (no symbol, no .PyRuntime section)")
    if source == "file name":
        proc.notes.append("CPython version taken from a file name")
    checked, dnotes = runtime.dwarf_check(target, table, minor)
    proc.dwarf_checked = checked
    proc.notes.extend(dnotes)
    walker = _Walker(proc)
    _walk_all(proc, walker, rt)
    _resolve_names(proc)
    return proc


def _walk_all(proc: PyProcess, walker: _Walker, rt: int) -> None:
    t, mem = proc.offsets, proc.mem
    interp = mem.u64(rt + t["rt.interpreters_head"])
    seen_interp = set()
    by_tstate: Dict[int, PyThreadInfo] = {}
    while interp and interp not in seen_interp and len(seen_interp) < MAX_INTERPRETERS:
        seen_interp.add(interp)
        proc.interpreters.append(interp)
        try:
            ts = mem.u64(interp + t["is.threads_head"])
        except ReadError as e:
            proc.notes.append("interpreter 0x%x unreadable: %s" % (interp, e))
            interp = 0
            break
        seen_ts = set()
        while ts and ts not in seen_ts and len(seen_ts) < MAX_THREADS:
            seen_ts.add(ts)
            try:
                tbuf = mem.read(ts, walker.ts_span)
            except ReadError as e:
                proc.notes.append("thread state 0x%x unreadable: %s" % (ts, e))
                ts = 0
                break
            th = PyThreadInfo(ts, interp)
            th.pthread_id = u64_at(tbuf, t["ts.thread_id"])
            if "ts.native_thread_id" in t:
                th.lwp = u64_at(tbuf, t["ts.native_thread_id"]) or None
            if th.lwp is None:
                th.lwp = proc.lwp_for_pthread(th.pthread_id)
            walker.walk(th, tbuf)
            by_tstate[ts] = th
            if th.pthread_id and th.lwp:
                proc.pthread_to_lwp[th.pthread_id] = th.lwp
            if th.lwp is not None:
                old = proc.threads.get(th.lwp)
                if old is None:
                    proc.threads[th.lwp] = th
                else:
                    _combine(old, th)
            ts = u64_at(tbuf, t["ts.next"])
        if ts:
            proc.notes.append("thread-state list of interpreter 0x%x stops early (cycle or more than %d entries)"
                              % (interp, MAX_THREADS))
        try:
            interp = mem.u64(interp + t["is.next"])
        except ReadError as e:
            proc.notes.append("interpreter list unreadable after 0x%x: %s" % (interp, e))
            interp = 0
            break
    if interp:
        proc.notes.append("interpreter list stops early (cycle or more than %d entries)" % MAX_INTERPRETERS)
    _gil_and_gc(proc, rt, by_tstate)


def _combine(first: PyThreadInfo, other: PyThreadInfo) -> None:
    """One OS thread with thread states in several interpreters (a subinterpreter runs inside
    a call made by the main interpreter's code): keep every Python frame.  The merge orders the
    groups by their stack anchors; without anchors it refuses to guess (``tstates > 1``)."""
    first.groups.extend(other.groups)
    first.frames.extend(other.frames)
    first.tstates += 1
    if first.truncated is None:
        first.truncated = other.truncated
    first.notes.extend(other.notes)
    note = "this OS thread has thread states in several interpreters (subinterpreters)"
    if note not in first.notes:
        first.notes.append(note)


def _main_first(proc: PyProcess, rt: int) -> None:
    """Put the main interpreter first (``interpreters.head`` is the newest one; ``main`` is the
    word after it in ``_PyRuntime.interpreters`` in every version 3.8-3.14)."""
    try:
        main = proc.mem.u64(rt + proc.offsets["rt.interpreters_head"] + 8)
    except ReadError:
        return
    if main in proc.interpreters:
        proc.interpreters.remove(main)
        proc.interpreters.insert(0, main)


def _gil_holders(proc: PyProcess, rt: int) -> List[Tuple[bool, int]]:
    """(is the main interpreter's GIL, holder thread state) for every GIL that is held.
    3.8-3.11: one GIL in the runtime; 3.12+: one per interpreter (``interp->ceval.gil``,
    shared with the main one unless the subinterpreter was created with its own)."""
    t, mem = proc.offsets, proc.mem
    if proc.features.gil == "runtime":
        ts = mem.u64(rt + t["rt.tstate_current"])
        return [(True, ts)] if ts else []
    out: List[Tuple[bool, int]] = []
    seen = set()
    for interp in proc.interpreters:  # main first
        gil = mem.u64(interp + t["is.ceval_gil"])
        if not gil or gil in seen:
            continue
        seen.add(gil)
        if mem.i32(gil + t["gil.locked"]) == 1:
            ts = mem.u64(gil + t["gil.last_holder"])
            if ts:
                out.append((len(seen) == 1, ts))
    return out


#: The note a free-threaded process gets while its GIL is off: each thread's ``gil`` is None.
NO_GIL_NOTE = "free-threaded build: the GIL is disabled, so no thread holds or waits for it (gil: null)"


def _gil_enabled(proc: PyProcess) -> Optional[bool]:
    """Free-threaded builds: ``interp->ceval.gil->enabled`` of the main interpreter (the GIL can be
    switched back on at run time); None when unreadable."""
    t = proc.offsets
    if not proc.interpreters or "gil.enabled" not in t:
        return None
    try:
        gil = proc.mem.u64(proc.interpreters[0] + t["is.ceval_gil"])
        return bool(proc.mem.i32(gil + t["gil.enabled"])) if gil else None
    except ReadError:
        return None


def _gil_and_gc(proc: PyProcess, rt: int, by_tstate: Dict[int, PyThreadInfo]) -> None:
    t, mem = proc.offsets, proc.mem
    _main_first(proc, rt)
    holder_lwps: Optional[set] = set()
    if proc.free_threading:
        proc.gil_enabled = _gil_enabled(proc)
        if proc.gil_enabled is None:
            proc.notes.append("free-threaded build: whether the GIL was switched back on is unreadable (gil: null)")
        elif not proc.gil_enabled:
            proc.notes.append(NO_GIL_NOTE)
        else:
            proc.notes.append("free-threaded build with the GIL switched back on (PYTHON_GIL=1 or an extension "
                              "module without free-threading support)")
    try:
        if proc.free_threading and not proc.gil_enabled:
            holder_lwps = None
        for is_main, ts in (_gil_holders(proc, rt) if holder_lwps is not None else ()):
            info = by_tstate.get(ts)
            if info is not None and info.lwp is not None:
                holder_lwps.add(info.lwp)
                if is_main:
                    proc.gil_holder_lwp = info.lwp
    except ReadError as e:
        proc.notes.append("GIL state unreadable: %s" % e)
        holder_lwps = None
    collecting = None
    try:
        if "rt.gc_collecting" in t:
            collecting = bool(mem.i32(rt + t["rt.gc_collecting"]))
        elif "is.gc_collecting" in t and proc.interpreters:
            collecting = bool(mem.i32(proc.interpreters[0] + t["is.gc_collecting"]))
    except ReadError:
        collecting = None
    proc.gc_collecting = collecting
    for th in proc.threads.values():
        if holder_lwps is None:
            th.gil = None
        else:
            th.gil = "held" if th.lwp in holder_lwps else "no"
        if collecting is not None:
            # Which thread collects is decided from native frames (merge); here only "nobody".
            th.gc = False if not collecting else None


def _resolve_names(proc: PyProcess) -> None:
    """Python ``threading`` names from ``threading._active`` of every interpreter."""
    o = proc.objects
    for interp in proc.interpreters:
        try:
            active = proc.threading_active(interp)
        except (ReadError, struct.error) as e:
            proc.notes.append("threading._active unreadable: %s" % e)
            continue
        for ident, obj in active.items():
            lwp = proc.pthread_to_lwp.get(ident)
            th = proc.threads.get(lwp) if lwp is not None else None
            if th is None or th.name is not None:
                continue
            try:
                name_obj = o.instance_attr(obj, "_name")
                th.name = o.str(name_obj) if name_obj else None
            except (ReadError, struct.error) as e:
                th.notes.append("thread name unreadable: %s" % e)
