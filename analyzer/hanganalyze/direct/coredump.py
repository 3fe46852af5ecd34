"""A core file as a stopped process: registers from each ``NT_PRSTATUS``, memory from the
``PT_LOAD`` segments (read with ``pread``: a 300 GB sparse core costs what its notes cost), and
what cores leave out -- code and read-only data of mapped files -- from the files on disk at the
offsets ``NT_FILE`` records, checked against the build-ids the core holds.
"""

from __future__ import annotations

import os
from typing import Optional

from hanganalyze import elf
from hanganalyze.corefile import CoreInfo
from hanganalyze.direct import DirectUnsupported
from hanganalyze.direct.mapped import AT_SYSINFO_EHDR, MappedProcess
from hanganalyze.direct.stackscan import Regions
from hanganalyze.direct.unwind import GREG_NAMES, ModuleMap


class CoreProcess(MappedProcess):
    kind = "core"

    def __init__(self, path: str, info: CoreInfo, executable: Optional[str], exe_file: Optional[str] = None):
        super().__init__()
        self.path = path
        self.info = info
        self.pid = info.pid
        self._exe = executable
        self._fd = os.open(path, os.O_RDONLY)
        try:
            self._read_headers()
        except BaseException:
            os.close(self._fd)
            raise
        self.mappings = [(m.start, m.end, m.offset, m.path) for m in info.mappings]
        found = {f.path: f for f in info.files}

        def resolve(p: str) -> Optional[str]:
            if exe_file and p == info.executable:
                return exe_file  # --exe: the user's copy of the executable the core names
            f = found.get(p)
            if f is None or not f.on_disk:
                return None
            if f.mismatch:
                return None  # another build than the one that ran: its unwind tables would lie
            return f.found or p

        self.modules = ModuleMap(self.mappings, resolve)
        self.add_vdso(info.auxv.get(AT_SYSINFO_EHDR))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> CoreProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_headers(self) -> None:
        read = elf.file_reader(self._fd)
        try:
            hdr = elf.parse_header(read(0, 64) or b"")
        except elf.ElfError:
            raise DirectUnsupported("core header cut short") from None
        if hdr.bits != 64 or not hdr.little or hdr.machine != elf.EM_X86_64:
            raise DirectUnsupported("not an x86-64 core")
        phdrs = elf.read_phdrs(hdr, read)
        self._loads = elf.LoadMap([(p.vaddr, p.filesz, p.offset, p.filesz) for p in phdrs
                                   if p.type == elf.PT_LOAD and p.filesz])
        # Every PT_LOAD, dumped or not (gcore leaves code out): which addresses are executable.
        self.regions = Regions([(p.vaddr, p.vaddr + p.memsz, bool(p.flags & 1)) for p in phdrs
                                if p.type == elf.PT_LOAD])
        for p in phdrs:
            if p.type != elf.PT_NOTE:
                continue
            try:
                for name, ntype, desc in elf.iter_notes(read(p.offset, p.filesz) or b""):
                    st = elf.prstatus(desc) if name == b"CORE" and ntype == elf.NT_PRSTATUS else None
                    if st is not None and st.regs is not None:
                        self.regs[st.tid] = dict(zip(GREG_NAMES, st.regs))
                        self.names[st.tid] = None
            except ValueError:
                continue
        if not self.regs:
            raise DirectUnsupported("no thread registers in the core")

    def executable(self) -> Optional[str]:
        return self._exe

    def read(self, addr: int, size: int) -> Optional[bytes]:
        if self._fd is None or addr <= 0 or size <= 0:
            return None
        off = self._loads.file_offset(addr, size)
        if off is not None:
            b = os.pread(self._fd, size, off)
            if len(b) == size:
                return b
            return None  # beyond the end of a truncated core
        # not dumped: file-backed memory the kernel leaves out (code, read-only data)
        mod = self.modules.find(addr) if self.modules else None
        if mod is not None and mod.image is not None:
            return mod.image.read_vaddr(addr - mod.bias, size)
        return None
