"""``ProcessTarget`` over gdb's selected inferior: the only place the walkers' gdb touches live.

All cheap and cached per objfile set: minimal-symbol addresses via ``parse_and_eval("(long)&NAME")``
(works without DWARF; ``lookup_global_symbol`` does not see ELF-only symbols), sections from
``info files`` (works for cores too), pthread_t -> LWP from ``InferiorThread.handle()`` (needs
libthread_db).  No inferior calls.
"""

import re
import struct
from typing import Dict, List, Optional, Tuple

import gdb

from .pyframes.process import PyProcess
from .pyframes.target import FrameView, ProcessTarget
from .pyframes.walker import describe_target

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SYM_CACHE: Dict[Tuple[str, str], Optional[int]] = {}


def lwp_of(thread) -> int:
    """The LWP (kernel thread id) of a ``gdb.InferiorThread``: ``ptid`` is (pid, lwp, tid); lwp is 0
    on targets without threads (a single-threaded core or process), where the pid is the LWP."""
    return thread.ptid[1] or thread.ptid[0]


def _objfiles_key() -> str:
    try:
        return "|".join(o.filename or "" for o in gdb.objfiles())
    except Exception:  # noqa: BLE001
        return ""


def _info_files() -> str:
    try:
        return gdb.execute("info files", to_string=True)
    except (gdb.error, UnicodeDecodeError):  # gdb 13 raises the latter for non-UTF-8 file names
        return ""


class GdbTarget(ProcessTarget):
    def __init__(self, inferior=None):
        self.inferior = inferior if inferior is not None else gdb.selected_inferior()
        self.kind = target_kind(self.inferior)
        self._handles: Optional[Dict[int, int]] = None
        self._lwps: Optional[List[int]] = None

    def read_memory(self, addr: int, size: int) -> bytes:
        return self.inferior.read_memory(addr, size)

    def symbol_address(self, name: str) -> Optional[int]:
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

    def section_address(self, section: str) -> Optional[int]:
        for start, _end, _obj, _name in self.sections((section,)):
            return start
        return None

    def sections(self, names) -> List[tuple]:
        rows = []
        for line in _info_files().splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[1] == "-" and parts[3] == "is" and parts[4] in names:
                try:
                    rows.append((int(parts[0], 16), int(parts[2], 16), parts[6] if len(parts) > 6 else "", parts[4]))
                except ValueError:
                    continue
        return rows

    def object_files(self) -> List[str]:
        names: List[str] = []
        try:
            names = [o.filename for o in gdb.objfiles() if o.filename]
            prog = gdb.current_progspace().filename
            if prog:
                names.insert(0, prog)
        except Exception:  # noqa: BLE001
            pass
        return names

    def _threads(self):
        try:
            return self.inferior.threads() if self.inferior is not None else ()
        except (gdb.error, RuntimeError):
            return ()

    def thread_handles(self) -> Dict[int, int]:
        if self._handles is None:
            self._handles = {}
            for th in self._threads():
                try:
                    h = th.handle()
                except (gdb.error, RuntimeError, AttributeError, TypeError):
                    h = None
                if h and len(h) >= 8:
                    self._handles[lwp_of(th)] = int.from_bytes(bytes(h)[:8], "little")
        return self._handles

    def lwps(self) -> List[int]:
        if self._lwps is None:
            self._lwps = [lwp_of(th) for th in self._threads()]
        return self._lwps

    def lwp_of_handle(self, handle: int) -> Optional[int]:
        if self.inferior is None or not handle:
            return None
        try:
            th = self.inferior.thread_from_handle(struct.pack("<Q", handle & 0xFFFFFFFFFFFFFFFF))
        except (gdb.error, RuntimeError, ValueError, TypeError):
            return None
        if th is None:
            return None
        return lwp_of(th)

    def symbol_at(self, addr: int) -> Optional[str]:
        try:
            out = gdb.execute("info symbol 0x%x" % addr, to_string=True).strip()
        except (gdb.error, UnicodeDecodeError):
            return None
        m = re.match(r"^(\S+)(?: \+ (\d+))? in section", out)
        if not m:
            return None
        return m.group(1) + ("+%s" % m.group(2) if m.group(2) else "")

    def has_type(self, name: str) -> bool:
        try:
            gdb.lookup_type(name)
        except gdb.error:
            return False
        return True

    def dwarf_offset(self, expr: str) -> Optional[int]:
        try:
            return int(gdb.parse_and_eval("(long)(%s)" % expr))
        except (gdb.error, RuntimeError):
            return None


def target_kind(inf) -> str:
    """"core" for a core file, "live" for an attached process (from the connection type)."""
    conn = getattr(inf, "connection", None)
    ctype = getattr(conn, "type", None) if conn is not None else None
    if ctype is None:
        try:
            out = gdb.execute("info target", to_string=True)
        except (gdb.error, UnicodeDecodeError):  # non-UTF-8 file names in the output
            out = ""
        return "core" if "core file" in out.lower() else "live"
    return "core" if ctype == "core" else "live"


class GdbFrameView(FrameView):
    def __init__(self, frame: "gdb.Frame"):
        self.frame = frame

    def reg(self, name: str) -> Optional[int]:
        try:
            return int(self.frame.read_register(name)) & 0xFFFFFFFFFFFFFFFF
        except (gdb.error, ValueError, RuntimeError):
            return None

    def arg(self, names) -> Optional[int]:
        for n in names:
            try:
                v = self.frame.read_var(n)
            except (gdb.error, ValueError, RuntimeError):
                continue
            try:
                if v.is_optimized_out:
                    continue
                if v.type.strip_typedefs().code == gdb.TYPE_CODE_STRUCT:
                    v = v.address
                return int(v) & 0xFFFFFFFFFFFFFFFF
            except (gdb.error, ValueError, RuntimeError, TypeError):
                continue
        return None

    def var_field(self, var: str, field: str) -> Optional[int]:
        try:
            return int(self.frame.read_var(var).dereference()[field])
        except (gdb.error, ValueError, RuntimeError):
            return None


def frames_of_thread(lwp: int, count: int) -> List[FrameView]:
    """The innermost ``count`` frames of thread ``lwp`` (selects it: callers restore the selection)."""
    for th in gdb.selected_inferior().threads():
        if lwp_of(th) == lwp:
            th.switch()
            break
    else:
        return []
    out: List[FrameView] = []
    try:
        f = gdb.newest_frame()
    except gdb.error:
        return out
    while f is not None and len(out) < count:
        out.append(GdbFrameView(f))
        try:
            f = f.older()
        except gdb.error:
            break
    return out


def describe_process(inferior) -> "Optional[PyProcess]":
    """All interpreters, threads and Python stacks of gdb's inferior (``walker.describe_target``
    over a ``GdbTarget``); None when not CPython."""
    return describe_target(GdbTarget(inferior))
