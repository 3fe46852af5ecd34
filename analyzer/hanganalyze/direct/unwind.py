"""Native unwinding of one thread from its registers, through ``.eh_frame`` of the mapped files.

The loop is the textbook one (and what libunwind, py-spy's and gdb's DWARF unwinders do): find
the FDE of the pc (``pc - 1`` for callers, so a call at the end of a function still finds it;
``pc`` after a signal frame), compute the CFA and the caller's registers, stop where the return
address is undefined (``_start``, ``clone3``), unreadable or zero, or the stack does not grow.
Without an FDE (stripped GPU libraries, JIT code) the validated frame-pointer chain and stack scan
of ``stackscan`` find the caller, as gdb's and lldb's heuristics would, and CFI takes over again
in the first caller that has it.  Frames found so are marked (``RawFrame.how``); where the unwind
ends for any reason but the outermost frame, the last frame says why (``RawFrame.gave_up``).
"""

from __future__ import annotations

import bisect
import struct
from typing import Callable, Dict, List, Optional, Tuple

from hanganalyze.direct import cfi
from hanganalyze.direct.elfimage import ElfImage, open_image
from hanganalyze.direct.stackscan import Heuristics, Regions

MAX_FRAMES = 1024
#: x86-64 ``user_regs_struct`` / ``elf_gregset_t`` order -> DWARF register number.
GREG_NAMES = ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi",
              "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs")
DWARF_NAMES = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
               "r14", "r15", "rip")
_DWARF_INDEX = {n: i for i, n in enumerate(DWARF_NAMES)}
_DWARF_INDEX["sp"] = 7
_DWARF_INDEX["pc"] = 16


def dwarf_regs(gregs: Dict[str, int]) -> List[Optional[int]]:
    return [gregs.get(n) for n in DWARF_NAMES]


class Module:
    """One mapped ELF file: its address range in the process and link-time -> run-time bias."""

    __slots__ = ("path", "start", "end", "bias", "image", "_eh", "_eh_done")

    def __init__(self, path: str, start: int, end: int, bias: int, image: Optional[ElfImage]):
        self.path, self.start, self.end, self.bias, self.image = path, start, end, bias, image
        self._eh: Optional[cfi.EhFrame] = None
        self._eh_done = False

    @property
    def eh(self) -> Optional[cfi.EhFrame]:
        if not self._eh_done:
            self._eh_done = True
            if self.image is not None:
                try:
                    self._eh = cfi.EhFrame(self.image)
                except (cfi.CfiError, struct.error, IndexError, ValueError):
                    self._eh = None
        return self._eh


class ModuleMap:
    """Address -> module, from the process's file mappings ``(start, end, file offset, path)``."""

    def __init__(self, mappings: List[Tuple[int, int, int, str]],
                 resolve: Callable[[str], Optional[str]] = lambda p: p):
        by_path: Dict[str, List[Tuple[int, int, int]]] = {}
        for start, end, offset, path in mappings:
            by_path.setdefault(path, []).append((start, end, offset))
        self.modules: List[Module] = []
        self._ranges: List[Tuple[int, int, Module]] = []
        for path, maps in by_path.items():
            disk = resolve(path)
            img = open_image(disk) if disk else None
            bias = None
            if img is not None:
                for start, _end, offset in sorted(maps):
                    for s in img.segments:
                        if s.offset - s.offset % 4096 == offset:
                            bias = start - (s.vaddr - s.offset % 4096)
                            break
                    if bias is not None:
                        break
            if bias is None:
                low = min(m[0] for m in maps if m[2] == 0) if any(m[2] == 0 for m in maps) else min(m[0] for m in maps)
                bias = low - (img.first_vaddr if img is not None else 0)
            mod = Module(path, min(m[0] for m in maps), max(m[1] for m in maps), bias, img)
            self.modules.append(mod)
            for start, end, _off in maps:
                self._ranges.append((start, end, mod))
        self._ranges.sort(key=lambda r: r[0])
        self._starts = [r[0] for r in self._ranges]

    def add(self, mod: Module) -> None:
        """A module no file mapping names (the vDSO, whose image is read from memory)."""
        self.modules.append(mod)
        self._ranges.append((mod.start, mod.end, mod))
        self._ranges.sort(key=lambda r: r[0])
        self._starts = [r[0] for r in self._ranges]

    def find(self, addr: int) -> Optional[Module]:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._ranges[i][1]:
            return self._ranges[i][2]
        return None

    def executable(self, addr: int) -> bool:
        """Whether ``addr`` lies in an executable segment of a mapped file (used where the process's
        own mapping flags are not known)."""
        mod = self.find(addr)
        if mod is None or mod.image is None:
            return False
        link = addr - mod.bias
        return any(s.flags & 1 and s.vaddr <= link < s.vaddr + s.memsz for s in mod.image.segments)


class RawFrame:
    """One unwound frame: pc, the registers as they are in this frame (callee-saved ones recovered),
    and whether the unwinder stopped because memory could not be read."""

    __slots__ = ("pc", "regs", "module", "signal", "stop", "how", "gave_up")

    def __init__(self, pc: int, regs: List[Optional[int]], module: Optional[Module], signal: bool,
                 how: Optional[str] = None):
        self.pc, self.regs, self.module, self.signal = pc, regs, module, signal
        self.stop: Optional[str] = None
        #: None where CFI (or the registers) gave this frame; "fp" / "scan" where a heuristic did.
        self.how = how
        #: On the last frame: why the unwind ended before the outermost frame, for people.
        self.gave_up: Optional[str] = None

    @property
    def sp(self) -> Optional[int]:
        return self.regs[7]

    def reg(self, name: str) -> Optional[int]:
        i = _DWARF_INDEX.get(name)
        return self.regs[i] if i is not None else None


class Unreadable(Exception):
    def __init__(self, addr: int):
        super().__init__("Cannot access memory at address 0x%x" % addr)
        self.addr = addr


def _where(pc: int, mod: Optional[Module]) -> str:
    if mod is None:
        return "pc 0x%x outside every mapped file" % pc
    return "pc 0x%x in %s" % (pc, mod.path.rsplit("/", 1)[-1])


def unwind(regs: List[Optional[int]], modules: ModuleMap, read: Callable[[int, int], Optional[bytes]],
           max_frames: int = MAX_FRAMES, regions: Optional[Regions] = None) -> List[RawFrame]:
    """Frames of one thread, innermost first; never raises.  ``regions`` (every mapping with its
    flags) lets the heuristics check stack bounds and executable memory exactly."""

    def read64(addr: int) -> int:
        b = read(addr, 8)
        if b is None or len(b) != 8:
            raise Unreadable(addr)
        return struct.unpack("<Q", b)[0]

    heur = Heuristics(read, regions, modules.find, modules.executable)
    out: List[RawFrame] = []
    cur = list(regs)
    how: Optional[str] = None
    after_signal = True  # the innermost frame's pc is exact, like a signal frame's caller
    while True:
        pc = cur[16]
        if not pc:
            break
        mod = modules.find(pc)
        frame = RawFrame(pc, cur, mod, False, how)
        out.append(frame)
        if len(out) >= max_frames:
            frame.gave_up = "more than %d frames" % max_frames
            break
        if mod is None and not heur.is_code(pc):
            frame.gave_up = "pc 0x%x is not in executable memory" % pc
            break
        lookup = pc if after_signal else pc - 1
        eh = mod.eh if mod is not None else None
        rule = eh.rule_at(lookup - mod.bias) if eh is not None and mod is not None else None
        try:
            if rule is None:
                nxt, how = heur.step(cur)
                after_signal = False
                if nxt is None:
                    frame.gave_up = "no CFI for %s and no valid frame pointer or return address on the stack" % (
                        _where(pc, mod))
                    break
            else:
                nxt = _apply(rule, cur, read64)
                how = None
                frame.signal = rule.signal
                after_signal = rule.signal
        except Unreadable as e:
            frame.stop = str(e)
            frame.gave_up = "%s (unwinding %s)" % (e, _where(pc, mod))
            break
        except (cfi.CfiError, IndexError, struct.error, KeyError, TypeError):
            frame.gave_up = "the CFI for %s could not be evaluated" % _where(pc, mod)
            break
        if nxt is None:
            break  # the return address is undefined: the outermost frame
        if nxt[7] is None or cur[7] is None or (nxt[7] <= cur[7] and not frame.signal):
            frame.gave_up = "the stack did not grow past %s" % _where(pc, mod)
            break
        if not nxt[16]:
            break
        cur = nxt
    return out


def _apply(rule: cfi.FrameRule, cur: List[Optional[int]],
           read64: Callable[[int], int]) -> Optional[List[Optional[int]]]:
    if rule.cfa_expr is not None:
        cfa = cfi.evaluate(rule.cfa_expr, cur, read64)
    else:
        base = cur[rule.cfa_reg] if rule.cfa_reg is not None and rule.cfa_reg < len(cur) else None
        if base is None:
            return None
        cfa = (base + rule.cfa_off) & 0xFFFFFFFFFFFFFFFF
    nxt: List[Optional[int]] = list(cur)
    ra_rule = rule.regs.get(cfi.RA)
    if ra_rule is None or ra_rule[0] == cfi.UNDEF:
        return None  # outermost frame
    for r, (kind, arg) in rule.regs.items():
        if r >= len(nxt):
            continue
        if kind == cfi.OFFSET:
            nxt[r] = read64((cfa + arg) & 0xFFFFFFFFFFFFFFFF)
        elif kind == cfi.VAL_OFFSET:
            nxt[r] = (cfa + arg) & 0xFFFFFFFFFFFFFFFF
        elif kind == cfi.REGISTER:
            nxt[r] = cur[arg] if arg < len(cur) else None
        elif kind == cfi.EXPR:
            nxt[r] = read64(cfi.evaluate(arg, cur, read64, push_first=cfa))
        elif kind == cfi.VAL_EXPR:
            nxt[r] = cfi.evaluate(arg, cur, read64, push_first=cfa)
        elif kind == cfi.UNDEF:
            nxt[r] = None
    nxt[7] = cfa
    return nxt
