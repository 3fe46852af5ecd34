"""Finding CPython's runtime in the inferior: ``_PyRuntime``, the version, DWARF cross-checks.

Only gdb touches happen here, all cheap and cached per objfile set: minimal-symbol addresses via
``parse_and_eval("(long)&NAME")`` (works without DWARF; ``lookup_global_symbol`` does not see
ELF-only symbols), the ``.PyRuntime`` section from ``info files`` as a fallback (3.10+), and
``Py_Version`` / ``_Py_DebugOffsets`` / library file names for the version.  No inferior calls.
"""

import os
import re
from typing import Dict, List, Optional, Tuple

import gdb

from . import debug_offsets
from .objects import Memory, ReadError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SYM_CACHE: Dict[Tuple[str, str], Optional[int]] = {}


def _objfiles_key() -> str:
    try:
        return "|".join(o.filename or "" for o in gdb.objfiles())
    except Exception:  # noqa: BLE001
        return ""


def symbol_address(name: str) -> Optional[int]:
    """Address of a data or function symbol (minimal symbols included), cached; None if absent."""
    if not _IDENT.match(name):
        raise ValueError("not a symbol name: %r" % name)
    key = (_objfiles_key(), name)
    if key in _SYM_CACHE:
        return _SYM_CACHE[key]
    try:
        addr: Optional[int] = int(gdb.parse_and_eval("(long)&%s" % name))
    except (gdb.error, RuntimeError, ValueError):
        addr = None
    if addr == 0:
        addr = None
    _SYM_CACHE[key] = addr
    return addr


def section_address(section: str) -> Optional[int]:
    """Relocated start of an ELF section, parsed from ``info files`` (works for cores too)."""
    try:
        out = gdb.execute("info files", to_string=True)
    except gdb.error:
        return None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[1] == "-" and parts[3] == "is" and parts[4] == section:
            try:
                return int(parts[0], 16)
            except ValueError:
                continue
    return None


def find_runtime() -> Tuple[Optional[int], str]:
    """(&_PyRuntime, how it was found) or (None, why not)."""
    addr = symbol_address("_PyRuntime")
    if addr:
        return addr, "symbol"
    addr = section_address(".PyRuntime")
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


def version_from_files() -> Optional[Tuple[Tuple[int, int], str]]:
    """Version from libpython3.X.so / python3.X file names (3.8-3.10 have no Py_Version)."""
    names: List[str] = []
    try:
        names = [o.filename for o in gdb.objfiles() if o.filename]
        prog = gdb.current_progspace().filename
        if prog:
            names.insert(0, prog)
    except Exception:  # noqa: BLE001
        pass
    for path in sorted(names, key=lambda p: "libpython" not in p):
        m = _LIB_RE.search(os.path.basename(path))
        if m:
            minor = (int(m.group(1)), int(m.group(2)))
            full = _FULL_RE.search(path)
            text = full.group(1) if full and full.group(1).startswith("%d.%d." % minor) else "%d.%d" % minor
            return minor, text
    return None


def detect_version(mem: Memory, runtime: int) -> Tuple[Optional[Tuple[int, int]], str, str]:
    """((major, minor), version text, source).  Source says how sure we are."""
    try:
        h = debug_offsets.peek_version(mem.read(runtime, debug_offsets.HEADER.size))
    except ReadError:
        h = None
    if h:
        minor, text = hex_to_version(h)
        return minor, text, "_Py_DebugOffsets"
    found = version_from_files()
    if found and found[0] < (3, 11):
        return found[0], found[1], "file name"  # Py_Version only exists from 3.11 on: skip the lookup
    addr = symbol_address("Py_Version")
    if addr:
        try:
            minor, text = hex_to_version(mem.u32(addr))
            if minor[0] == 3:
                return minor, text, "Py_Version"
        except ReadError:
            pass
    if found:
        return found[0], found[1], "file name"
    return None, "", "unknown"


#: (table key, C expression giving the offset) compared against DWARF when it is present: one
#: field per struct the walk depends on, the ones most likely to move between builds (each
#: check is a ~10 ms parse_and_eval, so the list stays short).
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


def dwarf_check(table: Dict[str, int], minor: Tuple[int, int]) -> Tuple[Optional[bool], List[str]]:
    """Compare table offsets with DWARF when CPython's debug info is loaded.

    Returns (None, []) without DWARF, (True, []) when all checked fields agree, and
    (False, notes) on a mismatch; mismatching table entries are replaced by the DWARF value
    (DWARF describes the build actually running)."""
    try:
        gdb.lookup_type("PyThreadState")
    except gdb.error:
        return None, []
    notes: List[str] = []
    checked = 0
    for key, expr in DWARF_CHECKS.items():
        if key not in table:
            continue
        if "%s" in expr:
            expr = expr % ("tstate_head" if minor < (3, 11) else "threads.head")
        try:
            val = int(gdb.parse_and_eval("(long)(%s)" % expr))
        except (gdb.error, RuntimeError):
            continue
        checked += 1
        if val != table[key]:
            notes.append("offset table for %d.%d disagrees with DWARF on %s: table %d, DWARF %d (using DWARF)"
                         % (minor[0], minor[1], key, table[key], val))
            table[key] = val
    if not checked:
        return None, []
    return (not notes), notes
