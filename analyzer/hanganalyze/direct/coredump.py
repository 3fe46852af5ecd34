"""A core file as a stopped process: registers from each ``NT_PRSTATUS``, memory from the
``PT_LOAD`` segments (read with ``pread``: a 300 GB sparse core costs what its notes cost), and
what cores leave out -- code and read-only data of mapped files -- from the files on disk at the
offsets ``NT_FILE`` records, checked against the build-ids the core holds.
"""

from __future__ import annotations

import bisect
import os
import struct
from typing import List, Optional, Tuple

from hanganalyze.acquire.corefile import CoreInfo, iter_notes
from hanganalyze.direct import DirectUnsupported
from hanganalyze.direct.mapped import MappedProcess
from hanganalyze.direct.stackscan import Regions
from hanganalyze.direct.unwind import GREG_NAMES, ModuleMap

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_NT_PRSTATUS = 1
_PR_PID = 32
_PR_REG = 112
_REGS = struct.Struct("<27Q")


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

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> CoreProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_headers(self) -> None:
        head = os.pread(self._fd, _EHDR.size, 0)
        if len(head) < _EHDR.size:
            raise DirectUnsupported("core header cut short")
        ident, _t, machine, _v, _e, phoff, _sh, _f, _eh, phentsize, phnum, _se, _sn, _ss = _EHDR.unpack(head)
        if ident[4] != 2 or ident[5] != 1 or machine != 62:
            raise DirectUnsupported("not an x86-64 core")
        raw = os.pread(self._fd, phentsize * phnum, phoff)
        loads: List[Tuple[int, int, int]] = []
        notes: List[Tuple[int, int]] = []
        regions: List[Tuple[int, int, bool]] = []
        for i in range(phnum):
            if (i + 1) * phentsize > len(raw):
                break
            p_type, p_flags, off, vaddr, _pa, filesz, memsz, _al = _PHDR.unpack_from(raw, i * phentsize)
            if p_type == 1:
                regions.append((vaddr, vaddr + memsz, bool(p_flags & 1)))  # code too, dumped or not
            if p_type == 1 and filesz:
                loads.append((vaddr, filesz, off))
            elif p_type == 4:
                notes.append((off, filesz))
        loads.sort()
        self.regions = Regions(regions)
        self._loads = loads
        self._starts = [seg[0] for seg in loads]
        for off, size in notes:
            data = os.pread(self._fd, size, off)
            try:
                for name, ntype, desc in iter_notes(data):
                    if name == b"CORE" and ntype == _NT_PRSTATUS and len(desc) >= _PR_REG + _REGS.size:
                        tid = struct.unpack_from("<i", desc, _PR_PID)[0]
                        self.regs[tid] = dict(zip(GREG_NAMES, _REGS.unpack_from(desc, _PR_REG)))
                        self.names[tid] = None
            except ValueError:
                continue
        if not self.regs:
            raise DirectUnsupported("no thread registers in the core")

    def executable(self) -> Optional[str]:
        return self._exe

    def read(self, addr: int, size: int) -> Optional[bytes]:
        if self._fd is None or addr <= 0 or size <= 0:
            return None
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            vaddr, filesz, off = self._loads[i]
            if addr + size <= vaddr + filesz:
                b = os.pread(self._fd, size, off + addr - vaddr)
                if len(b) == size:
                    return b
                return None  # beyond the end of a truncated core
        # not dumped: file-backed memory the kernel leaves out (code, read-only data)
        mod = self.modules.find(addr) if self.modules else None
        if mod is not None and mod.image is not None:
            return mod.image.read_vaddr(addr - mod.bias, size)
        return None
