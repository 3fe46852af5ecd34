"""A core's memory as the core stored it (read by seeking, never loaded), and what the process's
initial stack holds: argv and the environment it started with.  Split from ``corefile.py``, which
reads the notes; ``read_core`` uses both.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Dict, List, Optional, Tuple

from hanganalyze.elf import LoadMap

#: Upper bound on bytes read from the initial stack to find argv (argv+envp strings live there).
_STACK_READ_MAX = 8 << 20
#: Environment variables read from a core's initial stack (a real one has a few hundred).
_MAX_ENV = 4096


class CoreMemory:
    """Read the process's memory as the core stored it, by seeking (never loading the core)."""

    def __init__(self, fh: BinaryIO, loads: List[Tuple[int, int, int, int]]) -> None:
        # (vaddr, memsz, offset, filesz), sorted by vaddr
        self._fh = fh
        self._map = LoadMap(loads)
        self.loads = self._map.loads

    def segment(self, addr: int) -> Optional[Tuple[int, int, int, int]]:
        """The PT_LOAD holding addr (binary search: GPU cores have thousands of segments)."""
        return self._map.segment(addr)

    def read(self, addr: int, size: int) -> Optional[bytes]:
        """Bytes at [addr, addr+size) if the core holds all of them, else None."""
        seg = self.segment(addr)
        if seg is None:
            return None
        vaddr, _memsz, off, filesz = seg
        if addr + size > vaddr + filesz:
            return None  # not dumped (e.g. read-only file pages the kernel skipped)
        data = self._read_at(off + (addr - vaddr), size)
        return data if data is not None and len(data) == size else None

    def _read_at(self, pos: int, size: int) -> Optional[bytes]:
        """The file's bytes at ``pos``; None where a corrupt program header points outside any
        file (a negative or 64-bit offset that cannot even be sought to)."""
        if pos < 0 or pos >= 1 << 63 or size < 0:
            return None
        try:
            self._fh.seek(pos)
            return self._fh.read(size)
        except (OSError, ValueError, OverflowError):
            return None

    def read_cstring(self, addr: int, limit: int = 4096) -> Optional[str]:
        seg = self.segment(addr)
        if seg is None:
            return None
        vaddr, _memsz, off, filesz = seg
        avail = min(limit, vaddr + filesz - addr)
        if avail <= 0:
            return None
        data = self._read_at(off + (addr - vaddr), avail)
        if data is None:
            return None
        end = data.find(b"\0")
        if end < 0:
            return None
        return data[:end].decode("utf-8", "surrogateescape")


def argv_from_stack(mem: CoreMemory, auxv_bytes: bytes, execfn: Optional[int]) -> Optional[List[str]]:
    """argv from the process's initial stack (see ``initial_stack``)."""
    found = initial_stack(mem, auxv_bytes, execfn)
    return found[0] if found else None


def initial_stack(
    mem: CoreMemory, auxv_bytes: bytes, execfn: Optional[int]
) -> Optional[Tuple[List[str], Dict[str, str]]]:
    """argv and the environment from the initial stack: ``argc, argv[], NULL, envp[], NULL, auxv[]``.

    NT_PRPSINFO only has the first 80 characters of the command line, and gdb's gcore writes just
    argv[0] there; the stack has all of it, and the environment the process was started with
    (where a launcher such as torchrun put RANK and WORLD_SIZE).  We find the auxv vector (its
    bytes equal NT_AUXV) in the stack mapping that holds AT_EXECFN, then walk backwards over envp
    and argv.  Environment strings that cannot be read are skipped, never guessed.
    """
    if not execfn or len(auxv_bytes) < 32:
        return None
    seg = mem.segment(execfn)
    if seg is None:
        return None
    vaddr, _memsz, _off, filesz = seg
    lo = max(vaddr, vaddr + filesz - _STACK_READ_MAX)
    data = mem.read(lo, vaddr + filesz - lo)
    if not data:
        return None
    pos = data.rfind(auxv_bytes[:32])
    if pos < 0 or pos % 8:
        return None

    def word(i: int) -> int:
        return struct.unpack_from("<Q", data, i)[0]

    i = pos - 8
    if i < 0 or word(i) != 0:  # NULL ending envp
        return None
    i -= 8
    env_ptrs: List[int] = []
    while i >= 0 and word(i) != 0:  # envp pointers
        env_ptrs.append(word(i))
        i -= 8
    i -= 8  # skip the NULL ending argv
    ptrs: List[int] = []
    while i >= 0:
        w = word(i)
        if w == len(ptrs) and (ptrs or w == 0):  # argc
            break
        if not (vaddr <= w < vaddr + filesz):
            return None
        ptrs.append(w)
        i -= 8
    else:
        return None
    argv = []
    for p in reversed(ptrs):
        s = mem.read_cstring(p, limit=128 * 1024)
        if s is None:
            return None
        argv.append(s)
    env: Dict[str, str] = {}
    for p in reversed(env_ptrs[:_MAX_ENV]):
        if not (vaddr <= p < vaddr + filesz):
            continue
        s = mem.read_cstring(p, limit=32 * 1024)
        if s and "=" in s:
            key, _, value = s.partition("=")
            env.setdefault(key, value)
    return (argv, env) if argv else None
