"""One thread's Python frames, innermost first: frame objects (3.8-3.10) or interpreter frames
(3.11+), with code objects and line numbers cached per process (``FrameWalker``)."""

import struct
from typing import Dict, Optional, Tuple

from ..model import Frame
from . import linetable, tables
from .objects import ReadError, i32_at, u64_at
from .process import MARKER, MAX_FRAMES, PyGroup, PyProcess, PyThreadInfo


def _span(t: Dict[str, int], prefix: str, extra: int = 8) -> int:
    """Bytes to read of a struct for one walk step: up to its last field the walker reads (the
    fast locals, which only the lock analysis reads, are a variable-length tail)."""
    return max([v for k, v in t.items() if k.startswith(prefix) and not k.endswith("localsplus")] or [0]) + extra


class FrameWalker:
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
