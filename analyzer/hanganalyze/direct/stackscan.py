"""What gdb and lldb try before giving up where ``.eh_frame`` has no answer for a pc: the
frame-pointer chain, then a scan of the stack for a return address.

Stripped GPU libraries (libcuda.so, libnvidia-*.so) ship without unwind tables for much of their
code; a rank spinning in ``cuStreamSynchronize`` would otherwise show only its Python frame and
the job verdict would blame it without evidence.  Both heuristics are validated, since a wrong
frame is worse than a missing one:

* a frame pointer counts only if it lies at or above the current sp, inside the mapping that holds the
  thread's stack, 8-byte aligned, and the return address beside it is a return address;
* a return address is a word pointing into an executable mapping whose preceding bytes decode as
  an x86-64 call (``e8 rel32``, or ``ff /2`` in all its ModRM/SIB/displacement forms, with an
  optional REX or ``notrack`` prefix);
* the scan reads at most ``MAX_SCAN_WORDS`` words, and never past the stack mapping.

Where a frame pointer and a scanned word disagree, the scanned word wins only when its call is a
direct one whose target lies just before the callee's pc in the same file (the callee's own
entry): a function built without frame pointers leaves its caller's rbp untouched, and following
that would silently skip frames.
"""

from __future__ import annotations

import bisect
import struct
from typing import Callable, List, Optional, Tuple

#: Words read by one stack scan (16 KiB): far more than any real frame's locals, bounded for
#: garbage stacks.
MAX_SCAN_WORDS = 2048
#: Without a known stack mapping, how far above sp a frame pointer may lie.
FALLBACK_STACK_SPAN = 1 << 24
#: A confirmed direct call's target is at most this far before the callee's pc.
MAX_FUNCTION_SIZE = 1 << 20

FP, SCAN = "fp", "scan"


class Regions:
    """Every mapping of the process, file-backed or not: ``(start, end, executable)``.  Live
    processes give them from ``/proc/PID/maps``, cores from their ``PT_LOAD`` headers (which
    list code segments too, with their flags, though their bytes are not dumped)."""

    def __init__(self, rows: List[Tuple[int, int, bool]]):
        self._rows = sorted(r for r in rows if r[1] > r[0])
        self._starts = [r[0] for r in self._rows]

    def _at(self, addr: int) -> Optional[Tuple[int, int, bool]]:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._rows[i][1]:
            return self._rows[i]
        return None

    def executable(self, addr: int) -> bool:
        r = self._at(addr)
        return bool(r and r[2])

    def bounds(self, addr: int) -> Optional[Tuple[int, int]]:
        """The mapping that holds ``addr`` (for sp: the thread's stack)."""
        r = self._at(addr)
        return (r[0], r[1]) if r else None


def _modrm_len(code: bytes, i: int) -> Optional[int]:
    """Length of a ModRM operand (ModRM byte, SIB, displacement) starting at ``code[i]``, or None
    when its reg field is not /2 (call near indirect)."""
    if i >= len(code):
        return None
    modrm = code[i]
    mod, reg, rm = modrm >> 6, (modrm >> 3) & 7, modrm & 7
    if reg != 2:
        return None
    if mod == 3:
        return 1
    n = 1
    if rm == 4:  # SIB follows
        if i + 1 >= len(code):
            return None
        n += 1
        if mod == 0 and code[i + 1] & 7 == 5:
            return n + 4  # no base: disp32
    elif mod == 0 and rm == 5:
        return n + 4  # rip + disp32
    return n + (0, 1, 4)[mod]


def call_before(code: bytes) -> Optional[Tuple[str, int]]:
    """Whether the bytes ``code`` that end at a return address end with a call instruction:
    ``("direct", rel32)`` or ``("indirect", 0)``, else None."""
    n = len(code)
    if n >= 5 and code[n - 5] == 0xE8:
        return "direct", struct.unpack_from("<i", code, n - 4)[0]
    for start in range(max(0, n - 9), n - 1):
        i = start
        if code[i] == 0x3E:  # notrack (CET)
            i += 1
        if i < n and 0x40 <= code[i] <= 0x4F:  # REX
            i += 1
        if i >= n or code[i] != 0xFF:
            continue
        length = _modrm_len(code, i + 1)
        if length is not None and i + 1 + length == n:
            return "indirect", 0
    return None


class Heuristics:
    """The validated frame-pointer and stack-scan steps for one process."""

    def __init__(self, read: Callable[[int, int], Optional[bytes]], regions: Optional[Regions],
                 module_of: Callable[[int], Optional[object]], executable: Callable[[int], bool]):
        self.read = read
        self.regions = regions
        self.module_of = module_of
        self._executable = executable

    def is_code(self, addr: int) -> bool:
        """Executable by the process's own mapping flags, or by the mapped file's segment flags
        (gdb's gcore leaves code segments out of a core's program headers altogether)."""
        return (self.regions is not None and self.regions.executable(addr)) or self._executable(addr)

    def stack_bounds(self, sp: int) -> Tuple[int, int]:
        if self.regions is not None:
            b = self.regions.bounds(sp)
            if b is not None:
                return b
            return sp, sp  # sp outside every mapping: no stack to read
        return sp, sp + FALLBACK_STACK_SPAN

    def _word(self, addr: int) -> Optional[int]:
        b = self.read(addr, 8)
        if b is None or len(b) != 8:
            return None
        return struct.unpack("<Q", b)[0]

    def return_address(self, ra: int) -> Optional[Tuple[str, int]]:
        """The call before ``ra`` when ``ra`` is a plausible return address, else None."""
        if ra < 4096 or ra >= 1 << 47 or not self.is_code(ra) or not self.is_code(ra - 1):
            return None
        code = self.read(ra - 9, 9) or self.read(ra - 5, 5)
        if code is None:
            return None
        return call_before(code)

    def _confirms(self, ra: int, call: Tuple[str, int], callee_pc: int) -> bool:
        """A direct call whose target is the entry of the function that holds ``callee_pc``."""
        if call[0] != "direct":
            return False
        target = (ra + call[1]) & 0xFFFFFFFFFFFFFFFF
        mod = self.module_of(callee_pc)
        if mod is not None and self.module_of(target) is not mod:
            target = self._plt_target(target)  # a call into another library goes through the caller's PLT
        return (mod is not None and target is not None and self.module_of(target) is mod
                and 0 <= callee_pc - target < MAX_FUNCTION_SIZE)

    def _plt_target(self, stub: int) -> Optional[int]:
        """Where a PLT stub jumps: ``jmp *disp(%rip)`` (``ff 25``), after ``endbr64`` and a ``bnd``
        prefix in an IBT build's ``.plt.sec``; the GOT slot read from the process (None if it is not one)."""
        code = self.read(stub, 16)
        if code is None or len(code) < 16:
            return None
        i = 4 if code[:4] == b"\xf3\x0f\x1e\xfa" else 0
        i += 1 if code[i:i + 1] == b"\xf2" else 0
        if code[i:i + 2] != b"\xff\x25":
            return None
        disp = struct.unpack("<i", code[i + 2:i + 6])[0]
        return self._word((stub + i + 6 + disp) & 0xFFFFFFFFFFFFFFFF)

    def step(self, cur: List[Optional[int]]) -> Tuple[Optional[List[Optional[int]]], Optional[str]]:
        """The caller's registers and how they were found (``"fp"`` or ``"scan"``), or (None, None).
        Only rip, rsp (and rbp for a frame-pointer frame) are recovered; the other registers keep
        their values, as gdb assumes for a frame it cannot describe."""
        pc, sp, rbp = cur[16], cur[7], cur[6]
        if not pc or not sp:
            return None, None
        lo, hi = self.stack_bounds(sp)
        fp_ra = fp_call = None
        if rbp and sp <= rbp and lo <= rbp and rbp + 16 <= hi and not rbp & 7:
            fp_ra = self._word(rbp + 8)
            fp_call = self.return_address(fp_ra) if fp_ra is not None else None
        limit = min(hi, sp + 8 * MAX_SCAN_WORDS)
        fp_confirmed = False
        if fp_call is not None:
            limit = min(limit, rbp + 8)
            fp_confirmed = self._confirms(fp_ra or 0, fp_call, pc)
        addr = sp
        first: Optional[Tuple[int, int]] = None  # the first plausible return address, unconfirmed
        while addr + 8 <= limit and not fp_confirmed:
            word = self._word(addr)
            if word is None:
                break
            call = self.return_address(word)
            # a word whose call provably entered this function beats a stale return address above it
            # (an earlier call's, left in this frame's locals); below a frame pointer only such a word
            if call is not None and self._confirms(word, call, pc):
                first = (word, addr)
                break
            if call is not None and fp_call is None and first is None:
                first = (word, addr)
            addr += 8
        if first is not None:
            nxt = list(cur)
            nxt[16], nxt[7] = first[0], first[1] + 8
            return nxt, SCAN
        if fp_call is not None and rbp is not None:
            saved = self._word(rbp)
            if saved is None:
                return None, None
            nxt = list(cur)
            nxt[16], nxt[6], nxt[7] = fp_ra, saved, rbp + 16
            return nxt, FP
        return None, None
