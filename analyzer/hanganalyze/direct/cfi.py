"""Call-frame information from ``.eh_frame``: the rule that recovers the caller's registers.

Only the FDE covering a pc is ever parsed: ``.eh_frame_hdr``'s sorted table is binary-searched
(19 probes for libtorch_cpu.so's 330,000 FDEs), then that FDE's CIE and instructions run up to
the pc.  Results are cached per (image, pc).  The DWARF expression subset covers what compilers
and glibc emit in ``.eh_frame`` (PLT entries, signal trampolines, realigned stacks).

Register numbers are DWARF's for x86-64: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp,
7 rsp, 8-15 r8-r15, 16 the return address.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, Optional, Tuple

from hanganalyze.direct.elfimage import ElfImage

RA = 16
NREGS = 17

# Rule kinds for one register
SAME, UNDEF, OFFSET, VAL_OFFSET, REGISTER, EXPR, VAL_EXPR = range(7)


class FrameRule:
    """How to compute the CFA and each register of the caller, at one pc."""

    __slots__ = ("cfa_reg", "cfa_off", "cfa_expr", "regs", "signal")

    def __init__(self) -> None:
        self.cfa_reg: Optional[int] = 7
        self.cfa_off = 8
        self.cfa_expr: Optional[bytes] = None
        self.regs: Dict[int, Tuple[int, object]] = {}
        self.signal = False


class CfiError(Exception):
    pass


def _leb(d, pos: int, signed: bool) -> Tuple[int, int]:
    result = shift = 0
    while True:
        b = d[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            if signed and b & 0x40:
                result -= 1 << shift
            return result, pos


def _uleb(d, pos: int) -> Tuple[int, int]:
    return _leb(d, pos, False)


def _sleb(d, pos: int) -> Tuple[int, int]:
    return _leb(d, pos, True)


_FMT = {0x02: ("<H", 2), 0x03: ("<I", 4), 0x04: ("<Q", 8), 0x0A: ("<h", 2), 0x0B: ("<i", 4), 0x0C: ("<q", 8),
        0x00: ("<Q", 8)}


def read_encoded(d, pos: int, enc: int, sec_addr: int, sec_off: int, datarel: int = 0) -> Tuple[int, int]:
    """A DW_EH_PE-encoded pointer at ``pos`` of section data ``d`` (link-time address ``sec_addr``
    at offset ``sec_off`` = 0 of ``d``)."""
    if enc == 0xFF:
        return 0, pos
    fmt = enc & 0x0F
    app = enc & 0x70
    field_addr = sec_addr + pos - sec_off
    if fmt == 0x01:
        v, npos = _uleb(d, pos)
    elif fmt == 0x09:
        v, npos = _sleb(d, pos)
    else:
        f = _FMT.get(fmt)
        if f is None:
            raise CfiError("pointer encoding 0x%x" % enc)
        v = struct.unpack_from(f[0], d, pos)[0]
        npos = pos + f[1]
    if app == 0x10:
        v += field_addr
    elif app == 0x30:
        v += datarel
    elif app not in (0x00,):
        raise CfiError("pointer application 0x%x" % app)
    return v & 0xFFFFFFFFFFFFFFFF, npos


class _Cie:
    __slots__ = ("code_align", "data_align", "ra_reg", "fde_enc", "signal", "instructions", "has_z")


class EhFrame:
    """``.eh_frame`` + ``.eh_frame_hdr`` of one image."""

    def __init__(self, img: ElfImage):
        self.img = img
        hdr = img.section_data(".eh_frame_hdr")
        eh = img.section_data(".eh_frame")
        if eh is None:
            raise CfiError("no .eh_frame")
        self.eh_addr, self.eh = eh
        self.hdr_addr, self.hdr = hdr if hdr is not None else (0, None)
        self._cies: Dict[int, _Cie] = {}
        self._rules: Dict[int, Optional[FrameRule]] = {}
        self.table_n = 0
        if self.hdr is not None and len(self.hdr) >= 12 and self.hdr[0] == 1:
            h = self.hdr
            _ptr, pos = read_encoded(h, 4, h[1], self.hdr_addr, 0)
            n, pos = read_encoded(h, pos, h[2], self.hdr_addr, 0)
            if h[3] == 0x3B:  # datarel sdata4: the only table encoding in practice
                self.table_n = n
                self.table = h[pos:pos + 8 * n].cast("B").cast("i")
        self._linear: Optional[List[Tuple[int, int, int]]] = None

    # ---------------------------------------------------------------------------- lookup
    def _fde_offset(self, pc: int) -> Optional[int]:
        if self.table_n:
            t, base = self.table, self.hdr_addr
            lo, hi = 0, self.table_n - 1
            if pc < t[0] + base:
                return None
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if t[2 * mid] + base <= pc:
                    lo = mid
                else:
                    hi = mid - 1
            return t[2 * lo + 1] + base - self.eh_addr
        return self._linear_lookup(pc)

    def _linear_lookup(self, pc: int) -> Optional[int]:
        """No ``.eh_frame_hdr`` (rare: some hand-linked objects): index every FDE once."""
        if self._linear is None:
            rows = []
            pos = 0
            d = self.eh
            while pos + 4 <= len(d):
                length = struct.unpack_from("<I", d, pos)[0]
                if length == 0:
                    break
                start = pos
                body = pos + 4
                if length == 0xFFFFFFFF:
                    length = struct.unpack_from("<Q", d, pos + 4)[0]
                    body = pos + 12
                cie_ptr = struct.unpack_from("<I", d, body)[0]
                if cie_ptr:
                    try:
                        cie = self._cie(body - cie_ptr)
                        lo, p2 = read_encoded(d, body + 4, cie.fde_enc, self.eh_addr, 0)
                        rng, _ = read_encoded(d, p2, cie.fde_enc & 0x0F, self.eh_addr, 0)
                        rows.append((lo, lo + rng, start))
                    except (CfiError, struct.error, IndexError):
                        pass
                pos = body + length
            rows.sort()
            self._linear = rows
        for lo, hi, off in self._linear:
            if lo <= pc < hi:
                return off
        return None

    def _entry(self, off: int) -> Tuple[int, int]:
        """(offset after the length field, end) of the CIE or FDE at ``off`` (32- or 64-bit length)."""
        d = self.eh
        length = struct.unpack_from("<I", d, off)[0]
        pos = off + 4
        if length == 0xFFFFFFFF:
            length = struct.unpack_from("<Q", d, pos)[0]
            pos += 8
        return pos, pos + length

    def _cie(self, off: int) -> _Cie:
        c = self._cies.get(off)
        if c is not None:
            return c
        d = self.eh
        pos, end = self._entry(off)
        pos += 4  # CIE id
        version = d[pos]
        pos += 1
        aug_end = bytes(d[pos:pos + 32]).index(b"\0")
        aug = bytes(d[pos:pos + aug_end]).decode("ascii", "replace")
        pos += aug_end + 1
        if version >= 4:
            pos += 2
        c = _Cie()
        c.code_align, pos = _uleb(d, pos)
        c.data_align, pos = _sleb(d, pos)
        if version == 1:
            c.ra_reg = d[pos]
            pos += 1
        else:
            c.ra_reg, pos = _uleb(d, pos)
        c.fde_enc = 0x00
        c.signal = False
        c.has_z = aug.startswith("z")
        if c.has_z:
            alen, pos = _uleb(d, pos)
            apos, aend = pos, pos + alen
            for ch in aug[1:]:
                if ch == "R":
                    c.fde_enc = d[apos]
                    apos += 1
                elif ch == "L":
                    apos += 1
                elif ch == "P":
                    enc = d[apos]
                    _v, apos = read_encoded(d, apos + 1, enc & 0x7F, self.eh_addr, 0)
                elif ch == "S":
                    c.signal = True
                elif ch == "B":
                    pass
                else:
                    break
            pos = aend
        elif aug:
            raise CfiError("CIE augmentation %r" % aug)
        c.instructions = bytes(d[pos:end])
        self._cies[off] = c
        return c

    def rule_at(self, pc: int) -> Optional[FrameRule]:
        """The caller-recovery rule at link-time ``pc``, None when no FDE covers it."""
        if pc in self._rules:
            return self._rules[pc]
        rule = None
        off = self._fde_offset(pc)
        if off is not None:
            rule = self._fde_rule(off, pc)
        self._rules[pc] = rule
        return rule

    def _fde_rule(self, off: int, pc: int) -> Optional[FrameRule]:
        d = self.eh
        pos, end = self._entry(off)
        cie_ptr = struct.unpack_from("<I", d, pos)[0]
        if cie_ptr == 0:
            return None
        cie = self._cie(pos - cie_ptr)
        pos += 4
        start, pos = read_encoded(d, pos, cie.fde_enc, self.eh_addr, 0)
        rng, pos = read_encoded(d, pos, cie.fde_enc & 0x0F, self.eh_addr, 0)
        if not start <= pc < start + rng:
            return None
        if cie.has_z:
            alen, pos = _uleb(d, pos)
            pos += alen
        rule = FrameRule()
        rule.signal = cie.signal
        init = _run(cie.instructions, cie, rule, start, pc, None)
        _run(bytes(d[pos:end]), cie, rule, start, pc, init)
        return rule


def _run(ins: bytes, cie: _Cie, rule: FrameRule, loc: int, pc: int,
         initial: Optional[Dict[int, Tuple[int, object]]]) -> Dict[int, Tuple[int, object]]:
    """Execute CFA instructions until the location passes ``pc``; returns the register rules as
    they were at the end (the CIE's initial rules, for DW_CFA_restore)."""
    stack: List[Tuple[Optional[int], int, Optional[bytes], Dict[int, Tuple[int, object]]]] = []
    pos, n = 0, len(ins)
    ca, da = cie.code_align, cie.data_align
    while pos < n:
        op = ins[pos]
        pos += 1
        hi, lo = op & 0xC0, op & 0x3F
        if hi == 0x40:  # advance_loc
            loc += lo * ca
            if loc > pc:
                break
            continue
        if hi == 0x80:  # offset
            v, pos = _uleb(ins, pos)
            rule.regs[lo] = (OFFSET, v * da)
            continue
        if hi == 0xC0:  # restore
            _restore(rule, lo, initial)
            continue
        if op == 0x00:
            continue
        if op == 0x01:
            raise CfiError("DW_CFA_set_loc")
        if op in (0x02, 0x03, 0x04):
            size = {0x02: 1, 0x03: 2, 0x04: 4}[op]
            delta = int.from_bytes(ins[pos:pos + size], "little")
            pos += size
            loc += delta * ca
            if loc > pc:
                break
        elif op == 0x05:
            r, pos = _uleb(ins, pos)
            v, pos = _uleb(ins, pos)
            rule.regs[r] = (OFFSET, v * da)
        elif op == 0x06:
            r, pos = _uleb(ins, pos)
            _restore(rule, r, initial)
        elif op == 0x07:
            r, pos = _uleb(ins, pos)
            rule.regs[r] = (UNDEF, None)
        elif op == 0x08:
            r, pos = _uleb(ins, pos)
            rule.regs[r] = (SAME, None)
        elif op == 0x09:
            r, pos = _uleb(ins, pos)
            r2, pos = _uleb(ins, pos)
            rule.regs[r] = (REGISTER, r2)
        elif op == 0x0A:
            stack.append((rule.cfa_reg, rule.cfa_off, rule.cfa_expr, dict(rule.regs)))
        elif op == 0x0B:
            if stack:
                rule.cfa_reg, rule.cfa_off, rule.cfa_expr, rule.regs = stack.pop()
        elif op == 0x0C:
            rule.cfa_reg, pos = _uleb(ins, pos)
            rule.cfa_off, pos = _uleb(ins, pos)
            rule.cfa_expr = None
        elif op == 0x0D:
            rule.cfa_reg, pos = _uleb(ins, pos)
            rule.cfa_expr = None
        elif op == 0x0E:
            rule.cfa_off, pos = _uleb(ins, pos)
        elif op == 0x0F:
            ln, pos = _uleb(ins, pos)
            rule.cfa_expr = ins[pos:pos + ln]
            rule.cfa_reg = None
            pos += ln
        elif op in (0x10, 0x16):
            r, pos = _uleb(ins, pos)
            ln, pos = _uleb(ins, pos)
            rule.regs[r] = (EXPR if op == 0x10 else VAL_EXPR, ins[pos:pos + ln])
            pos += ln
        elif op == 0x11:
            r, pos = _uleb(ins, pos)
            v, pos = _sleb(ins, pos)
            rule.regs[r] = (OFFSET, v * da)
        elif op == 0x12:
            rule.cfa_reg, pos = _uleb(ins, pos)
            v, pos = _sleb(ins, pos)
            rule.cfa_off = v * da
            rule.cfa_expr = None
        elif op == 0x13:
            v, pos = _sleb(ins, pos)
            rule.cfa_off = v * da
        elif op in (0x14, 0x15):
            r, pos = _uleb(ins, pos)
            v, pos = (_uleb if op == 0x14 else _sleb)(ins, pos)
            rule.regs[r] = (VAL_OFFSET, v * da)
        elif op == 0x2E:  # GNU_args_size
            _v, pos = _uleb(ins, pos)
        elif op == 0x2F:  # GNU_negative_offset_extended
            r, pos = _uleb(ins, pos)
            v, pos = _uleb(ins, pos)
            rule.regs[r] = (OFFSET, -v * da)
        else:
            raise CfiError("CFA opcode 0x%x" % op)
    return dict(rule.regs)


def _restore(rule: FrameRule, r: int, initial: Optional[Dict[int, Tuple[int, object]]]) -> None:
    if initial is not None and r in initial:
        rule.regs[r] = initial[r]
    else:
        rule.regs.pop(r, None)


# ------------------------------------------------------------------------------ expressions
def evaluate(expr: bytes, regs: List[Optional[int]], read64: Callable[[int], int],
             push_first: Optional[int] = None) -> int:
    """A DWARF expression as ``.eh_frame`` uses them (no DW_OP_piece, no calls)."""
    st: List[int] = [] if push_first is None else [push_first]
    pos, n, steps = 0, len(expr), 0
    m64 = 0xFFFFFFFFFFFFFFFF
    while pos < n:
        steps += 1
        if steps > 1000:
            raise CfiError("expression loops")
        op = expr[pos]
        pos += 1
        if 0x30 <= op <= 0x4F:
            st.append(op - 0x30)
        elif 0x50 <= op <= 0x6F:
            v = regs[op - 0x50] if op - 0x50 < len(regs) else None
            if v is None:
                raise CfiError("register %d unknown" % (op - 0x50))
            st.append(v)
        elif 0x70 <= op <= 0x8F:
            off, pos = _sleb(expr, pos)
            v = regs[op - 0x70] if op - 0x70 < len(regs) else None
            if v is None:
                raise CfiError("register %d unknown" % (op - 0x70))
            st.append((v + off) & m64)
        elif op == 0x92:
            r, pos = _uleb(expr, pos)
            off, pos = _sleb(expr, pos)
            v = regs[r] if r < len(regs) else None
            if v is None:
                raise CfiError("register %d unknown" % r)
            st.append((v + off) & m64)
        elif op == 0x03:
            st.append(struct.unpack_from("<Q", expr, pos)[0])
            pos += 8
        elif op in (0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F):
            size = {0x08: 1, 0x09: 1, 0x0A: 2, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8, 0x0F: 8}[op]
            signed = op in (0x09, 0x0B, 0x0D, 0x0F)
            st.append(int.from_bytes(expr[pos:pos + size], "little", signed=signed) & m64)
            pos += size
        elif op == 0x10:
            v, pos = _uleb(expr, pos)
            st.append(v)
        elif op == 0x11:
            v, pos = _sleb(expr, pos)
            st.append(v & m64)
        elif op == 0x12:
            st.append(st[-1])
        elif op == 0x13:
            st.pop()
        elif op == 0x14:
            st.append(st[-2])
        elif op == 0x15:
            idx = expr[pos]
            pos += 1
            st.append(st[-1 - idx])
        elif op == 0x16:
            st[-1], st[-2] = st[-2], st[-1]
        elif op == 0x17:
            st[-1], st[-2], st[-3] = st[-2], st[-3], st[-1]
        elif op == 0x06:
            st.append(read64(st.pop()))
        elif op == 0x94:
            size = expr[pos]
            pos += 1
            st.append(read64(st.pop()) & ((1 << (8 * size)) - 1))
        elif op == 0x23:
            v, pos = _uleb(expr, pos)
            st.append((st.pop() + v) & m64)
        elif op == 0x96:
            pass
        elif op == 0x2F:
            off = struct.unpack_from("<h", expr, pos)[0]
            pos += 2 + off
        elif op == 0x28:
            off = struct.unpack_from("<h", expr, pos)[0]
            pos += 2
            if st.pop():
                pos += off
        elif op in _BINOPS:
            b, a = st.pop(), st.pop()
            st.append(_BINOPS[op](a, b) & m64)
        elif op == 0x19:
            v = st.pop()
            st.append(v if v < 1 << 63 else (-(v - (1 << 64))) & m64)
        elif op == 0x1F:
            st.append((-st.pop()) & m64)
        elif op == 0x20:
            st.append((~st.pop()) & m64)
        else:
            raise CfiError("DWARF op 0x%x" % op)
    if not st:
        raise CfiError("empty expression")
    return st[-1]


def _s(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


_BINOPS: Dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b,
    0x1B: lambda a, b: _s(a) // _s(b) if b else 0,
    0x1C: lambda a, b: a - b,
    0x1D: lambda a, b: a % b if b else 0,
    0x1E: lambda a, b: a * b,
    0x21: lambda a, b: a | b,
    0x22: lambda a, b: a + b,
    0x24: lambda a, b: a << b if b < 64 else 0,
    0x25: lambda a, b: a >> b if b < 64 else 0,
    0x26: lambda a, b: (_s(a) >> b) if b < 64 else 0,
    0x27: lambda a, b: a ^ b,
    0x29: lambda a, b: int(a == b),
    0x2A: lambda a, b: int(_s(a) >= _s(b)),
    0x2B: lambda a, b: int(_s(a) > _s(b)),
    0x2C: lambda a, b: int(_s(a) <= _s(b)),
    0x2D: lambda a, b: int(_s(a) < _s(b)),
    0x2E: lambda a, b: int(a != b),
}
