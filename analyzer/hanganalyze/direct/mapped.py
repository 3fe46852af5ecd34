"""What the live and the core reader share: the ``ProcessTarget`` answers that come from the
mapped ELF files (symbols, sections) and the stopped threads' registers.

Symbols are looked up in the executable and libpython first and nowhere else: the walker only
asks for CPython's own names, and scanning libtorch's 530,000 symbols for ``_PyRuntime`` would
cost what gdb costs.
"""

from __future__ import annotations

import os
import struct
from typing import Dict, List, Optional

from hanganalyze import elf
from hanganalyze.direct import DirectUnsupported
from hanganalyze.direct.elfimage import ElfImage
from hanganalyze.direct.stackscan import Regions
from hanganalyze.direct.unwind import Module, ModuleMap
from hanganalyze_gdbext.pyframes.target import ProcessTarget

#: The kernel's vDSO: no file maps it, so its image is read from the process (or the core, which
#: keeps it); ``/proc/PID/maps`` and gdb name it so.  A thread caught in ``clock_gettime`` runs there.
VDSO = "[vdso]"
#: AT_SYSINFO_EHDR, the auxv entry with the vDSO's address; and a bound on its size (two pages today).
AT_SYSINFO_EHDR = 33
VDSO_MAX = 1 << 20


class MappedProcess(ProcessTarget):
    """Subclasses set ``modules``, ``regs`` ({lwp: {register: value}}), ``names`` and ``read``."""

    modules: Optional[ModuleMap] = None
    #: Every mapping with its executable flag, for the unwinder's heuristics (None: not known).
    regions: Optional[Regions] = None

    def __init__(self) -> None:
        self.regs: Dict[int, Dict[str, int]] = {}
        self.names: Dict[int, Optional[str]] = {}

    def read(self, addr: int, size: int) -> Optional[bytes]:
        raise NotImplementedError

    def add_vdso(self, base: Optional[int]) -> None:
        """Add the vDSO at ``base`` to ``modules`` from its image in memory, so a thread stopped in
        it is named (``clock_gettime``, as gdb names it) and unwound by its own CFI; nothing when it
        cannot be read whole."""
        head = self.read(base, 64) if base and self.modules is not None else None
        if not head:
            return
        try:
            hdr = elf.parse_header(head)
        except elf.ElfError:
            return
        size = max(hdr.shoff + hdr.shentsize * hdr.shnum, hdr.phoff + hdr.phentsize * hdr.phnum)
        data = self.read(base, size) if 64 <= size <= VDSO_MAX else None
        if data is None:
            return
        try:
            img = ElfImage(VDSO, data)
            end = base + max((p.vaddr + p.memsz for p in img.segments), default=size) - img.first_vaddr
        except (DirectUnsupported, elf.ElfError, ValueError, struct.error):
            return
        self.modules.add(Module(VDSO, base, max(end, base + size), base - img.first_vaddr, img))

    def executable(self) -> Optional[str]:
        raise NotImplementedError

    def read_memory(self, addr: int, size: int) -> bytes:
        b = self.read(addr, size)
        if b is None:
            raise ValueError("Cannot access memory at address 0x%x" % addr)
        return b

    def thread_handles(self) -> Dict[int, int]:
        # x86-64 glibc: pthread_self() is the thread pointer, i.e. fs_base
        return {tid: r["fs_base"] for tid, r in self.regs.items() if r.get("fs_base")}

    def lwps(self) -> List[int]:
        return list(self.regs)

    def object_files(self) -> List[str]:
        exe = self.executable()
        paths = [m.path for m in self.modules.modules] if self.modules else []
        return ([exe] if exe else []) + [p for p in paths if p != exe]

    def python_modules(self) -> List[Module]:
        """The executable and the libpython (where CPython's symbols live), executable first."""
        exe = self.executable()
        mods = self.modules.modules if self.modules else []
        out = [m for m in mods if m.path == exe]
        out += [m for m in mods if m.path != exe and os.path.basename(m.path).startswith("libpython")]
        return out

    def python_has_dwarf(self) -> Optional[bool]:
        mods = [m for m in self.python_modules() if m.image is not None]
        lib = [m for m in mods if "libpython" in m.path]
        return any(m.image.has_dwarf for m in (lib or mods))

    def symbol_address(self, name: str) -> Optional[int]:
        for m in self.python_modules():
            if m.image is None:
                continue
            a = m.image.symbol_address(name)
            if a:
                return a + m.bias
        return None

    def sections(self, names) -> List[tuple]:
        rows = []
        for m in self.python_modules():
            if m.image is None:
                continue
            for s in m.image.section_list:
                if s.name in names and s.addr:
                    rows.append((s.addr + m.bias, s.addr + m.bias + s.size, m.path, s.name))
        return rows

    def section_address(self, section: str) -> Optional[int]:
        rows = self.sections((section,))
        return rows[0][0] if rows else None

    def symbol_at(self, addr: int) -> Optional[str]:
        m = self.modules.find(addr) if self.modules else None
        if m is None or m.image is None:
            return None
        hit = m.image.data_symbol_at(addr - m.bias)
        if hit is None:
            return None
        name, start, _size = hit
        off = addr - m.bias - start
        return name + ("+%d" % off if off else "")
