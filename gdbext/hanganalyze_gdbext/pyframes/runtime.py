"""Finding CPython's runtime in the inferior: ``_PyRuntime``, the version, DWARF cross-checks.

Everything is asked of a ``ProcessTarget`` (gdb's inferior or the analyzer's direct reader):
the ``_PyRuntime`` symbol, the ``.PyRuntime`` section as a fallback (3.10+), and
``Py_Version`` / ``_Py_DebugOffsets`` / library file names for the version.  No inferior calls.
"""

import os
import re
from typing import Dict, List, Optional, Tuple

from . import debug_offsets
from .objects import Memory, ReadError
from .target import ProcessTarget


def python_evidence(target: ProcessTarget) -> bool:
    """Cheap signs that this is a CPython process even though ``_PyRuntime`` was not found."""
    return version_from_files(target) is not None or target.symbol_address("_PyEval_EvalFrameDefault") is not None


def scan_for_runtime(target: ProcessTarget, mem: Memory, table: Dict[str, int],
                     max_bytes: int = 64 << 20) -> Optional[int]:
    """Find ``_PyRuntime`` without symbols (3.8/3.9 have no ``.PyRuntime`` section): a word in
    the writable data of the executable or libpython that points to an interpreter whose first
    thread state points back to it.  Returns the address of ``_PyRuntime`` or None."""
    head_off = table["rt.interpreters_head"]
    th_off, ts_interp, next_off = table["is.threads_head"], table["ts.interp"], table["is.next"]
    scanned = 0
    found = target.sections((".PyRuntime", ".data", ".bss"))
    found.sort(key=lambda r: r[3] != ".PyRuntime")  # the runtime's own section first (3.10+)
    for start, end, objfile, _name in found:
        if objfile and "python" not in os.path.basename(objfile):
            continue
        addr = start - start % 8
        while addr < end and scanned < max_bytes:
            size = min(end - addr, 1 << 16)
            size -= size % 8
            if size <= 0:
                break
            try:
                chunk = mem.read(addr, size)
            except ReadError:
                addr += size
                continue
            scanned += size
            for i in range(0, size, 8):
                interp = int.from_bytes(chunk[i:i + 8], "little")
                if interp < 0x10000 or interp >= 1 << 47 or interp & 7:
                    continue
                try:
                    ts = mem.u64(interp + th_off)
                    if not ts or ts & 7 or mem.u64(ts + ts_interp) != interp:
                        continue
                    # _PyRuntime.interpreters is {mutex, head, main, ...}: "main" (the next
                    # word) must be on the list starting at "head"; a stray pointer to the
                    # interpreter elsewhere in .data has no such neighbour.
                    main = mem.u64(addr + i + 8) if i + 8 < size else None
                    cur, seen = interp, 0
                    while cur and cur != main and seen < 64:
                        cur, seen = mem.u64(cur + next_off), seen + 1
                    rt = addr + i - head_off
                    if main and cur == main and _plausible_runtime(mem, table, rt, interp):
                        return rt
                except ReadError:
                    continue
            addr += size
    return None


def _plausible_runtime(mem: Memory, table: Dict[str, int], rt: int, interp: int) -> bool:
    """Extra check for 3.8-3.11: the GIL holder recorded in the runtime is nobody or one of the
    interpreter's thread states."""
    if "rt.tstate_current" not in table:
        return True
    holder = mem.u64(rt + table["rt.tstate_current"])
    if not holder:
        return True
    ts, n = mem.u64(interp + table["is.threads_head"]), 0
    while ts and ts != holder and n < 100000:
        ts, n = mem.u64(ts + table["ts.next"]), n + 1
    return ts == holder


def find_runtime(target: ProcessTarget) -> Tuple[Optional[int], str]:
    """(&_PyRuntime, how it was found) or (None, why not)."""
    addr = target.symbol_address("_PyRuntime")
    if addr:
        return addr, "symbol"
    addr = target.section_address(".PyRuntime")
    if addr:
        return addr, "section"
    return None, "no _PyRuntime symbol or .PyRuntime section: not a CPython process"


_LEVELS = {0xA: "a", 0xB: "b", 0xC: "rc", 0xF: ""}


def hex_to_version(h: int) -> Tuple[Tuple[int, int], str]:
    major, minor, micro = (h >> 24) & 0xFF, (h >> 16) & 0xFF, (h >> 8) & 0xFF
    level, serial = (h >> 4) & 0xF, h & 0xF
    text = "%d.%d.%d" % (major, minor, micro)
    if level != 0xF:
        text += "%s%d" % (_LEVELS.get(level, "?"), serial)
    return (major, minor), text


_LIB_RE = re.compile(r"(?:libpython|python)(3)\.(\d+)")
_FULL_RE = re.compile(r"(?<![\d.])(3\.\d+\.\d+)(?![\d])")


def version_from_files(target: ProcessTarget) -> Optional[Tuple[Tuple[int, int], str]]:
    """Version from libpython3.X.so / python3.X file names (3.8-3.10 have no Py_Version)."""
    names: List[str] = list(target.object_files())
    for path in sorted(names, key=lambda p: "libpython" not in p):
        m = _LIB_RE.search(os.path.basename(path))
        if m:
            minor = (int(m.group(1)), int(m.group(2)))
            full = _FULL_RE.search(path)
            text = full.group(1) if full and full.group(1).startswith("%d.%d." % minor) else "%d.%d" % minor
            return minor, text
    return None


#: Exported functions that first appeared in a version: (symbol, version), newest first.  Used
#: for 3.8-3.10 (no Py_Version) when file names do not tell, e.g. a static ``/usr/bin/python3``.
_FIRST_IN = (("PyIter_Send", (3, 10)), ("PyModule_AddType", (3, 9)), ("_PyEval_EvalFrameDefault", (3, 8)))


def version_from_symbols(target: ProcessTarget) -> Optional[Tuple[int, int]]:
    """(3, minor) for 3.8-3.10 from which API functions exist; None if not CPython."""
    for name, minor in _FIRST_IN:
        if target.symbol_address(name) is not None:
            return minor
    return None


def detect_version(target: ProcessTarget, mem: Memory, runtime: int) -> Tuple[Optional[Tuple[int, int]], str, str]:
    """((major, minor), version text, source).  Source says how sure we are."""
    try:
        h = debug_offsets.peek_version(mem.read(runtime, debug_offsets.HEADER.size))
    except ReadError:
        h = None
    if h:
        minor, text = hex_to_version(h)
        return minor, text, "_Py_DebugOffsets"
    found = version_from_files(target)
    if found and found[0] < (3, 11):
        return found[0], found[1], "file name"  # Py_Version only exists from 3.11 on: skip the lookup
    addr = target.symbol_address("Py_Version")
    if addr:
        try:
            minor, text = hex_to_version(mem.u32(addr))
            if minor[0] == 3:
                return minor, text, "Py_Version"
        except ReadError:
            pass
    if found:
        return found[0], found[1], "file name"
    minor = version_from_symbols(target)
    if minor is not None:
        return minor, "%d.%d" % minor, "exported symbols"
    return None, "", "unknown"


#: (table key, C expression giving the offset) compared against DWARF when it is present: one
#: field per struct the walk depends on, the ones most likely to move between builds (each
#: check is a slow parse_and_eval, so the list stays short).
DWARF_CHECKS = {
    "rt.interpreters_head": "&((_PyRuntimeState*)0)->interpreters.head",
    "is.threads_head": "&((PyInterpreterState*)0)->%s",
    "ts.thread_id": "&((PyThreadState*)0)->thread_id",
    "ts.frame": "&((PyThreadState*)0)->frame",
    "ts.cframe": "&((PyThreadState*)0)->cframe",
    "ts.current_frame": "&((PyThreadState*)0)->current_frame",
    "fo.f_lasti": "&((PyFrameObject*)0)->f_lasti",
    "co.firstlineno": "&((PyCodeObject*)0)->co_firstlineno",
}


def dwarf_check(target: ProcessTarget, table: Dict[str, int],
                minor: Tuple[int, int]) -> Tuple[Optional[bool], List[str]]:
    """Compare table offsets with DWARF when CPython's debug info is loaded.

    Returns (None, []) without DWARF, (True, []) when all checked fields agree, and
    (False, notes) on a mismatch; mismatching table entries are replaced by the DWARF value
    (DWARF describes the build actually running)."""
    if not target.has_type("PyThreadState"):
        return None, []
    notes: List[str] = []
    checked = 0
    for key, expr in DWARF_CHECKS.items():
        if key not in table:
            continue
        if "%s" in expr:
            expr = expr % ("tstate_head" if minor < (3, 11) else "threads.head")
        val = target.dwarf_offset(expr)
        if val is None:
            continue
        checked += 1
        if val != table[key]:
            notes.append("offset table for %d.%d disagrees with DWARF on %s: table %d, DWARF %d (using DWARF)"
                         % (minor[0], minor[1], key, table[key], val))
            table[key] = val
    if not checked:
        return None, []
    return (not notes), notes
