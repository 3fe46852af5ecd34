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

from . import debug_offsets, runtime, tables
from .framewalk import FrameWalker
from .lwpmap import GLIBC_PTHREAD_TID, LwpMap  # noqa: F401 - GLIBC_PTHREAD_TID: tests read it here
from .objects import Memory, ReadError, u64_at
from .process import MAX_INTERPRETERS, MAX_THREADS, PyProcess, PyThreadInfo
from .target import ProcessTarget


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
    walker = FrameWalker(proc)
    _walk_all(proc, walker, rt)
    _resolve_names(proc)
    return proc


def _walk_all(proc: PyProcess, walker: FrameWalker, rt: int) -> None:
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
