"""The one ELF reader: file header, program and section headers, notes (thread registers, mapped
files, build-ids), memory by virtual address over ``PT_LOAD``, and the one magic test.

Why our own and not pyelftools: its construct objects cost ~70,000 ``_parse`` calls for one GPU
rank (a core with thousands of segments and notes, hundreds of mapped libraries), a third of the
run; the few fixed layouts we need are one ``struct.unpack_from`` each.  Everything here reads
through a ``read(offset, size)`` callable, so a file (``pread``), an ``mmap`` and a core's memory
(the first page of a mapped library) are read by the same code.  The analyzer no longer imports
pyelftools (DWARF and CFI are read by ``direct/cfi.py`` and gdb); only ``scripts/fuzz.py`` and a
test still use it, as an independent second reader.

Both classes and byte orders are decoded for headers and build-ids (a foreign core's libraries);
the register layout is the 64-bit Linux ``struct elf_prstatus`` (x86-64 and aarch64 share it).
"""

from __future__ import annotations

import bisect
import os
import struct
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

ELF_MAGIC = b"\x7fELF"
ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
SHT_NOBITS = 8
EM_X86_64 = 62
NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_GNU_BUILD_ID = 1, 3, 6, 3
NT_SIGINFO, NT_FILE = 0x53494749, 0x46494C45
DT_NULL, DT_SONAME, DT_FLAGS_1 = 0, 14, 0x6FFFFFFB
DF_1_PIE = 0x08000000
#: Offsets in the 64-bit Linux ``struct elf_prstatus`` and ``struct elf_prpsinfo``.
PRSTATUS_CURSIG, PRSTATUS_PID, PRSTATUS_REG = 12, 32, 112
PRPSINFO_PID, PRPSINFO_PSARGS = 24, 56
#: ``elf_gregset_t``: 27 registers of x86-64 (``user_regs_struct`` order).
GREGS = struct.Struct("<27Q")
#: More program headers than any real file has: a corrupt count is not a 4 GB read.
MAX_PHNUM = 1 << 20

#: ``read(offset, size)``: the bytes there (fewer at the end of the data, None or b"" if none).
Reader = Callable[[int, int], Optional[bytes]]


class ElfError(ValueError):
    """Bytes that are not the ELF structure they should be (a one-line reason)."""


def is_elf(head: bytes) -> bool:
    """The one magic test: ``head`` (the first bytes of a file or a mapping) starts an ELF file."""
    return head[:4] == ELF_MAGIC


def is_elf_file(path) -> bool:
    """True when the file at ``path`` starts with the ELF magic (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return is_elf(f.read(4))
    except OSError:
        return False


class Header(NamedTuple):
    """The ELF file header, both classes and byte orders."""

    bits: int  # 32 or 64
    little: bool
    type: int
    machine: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def endian(self) -> str:
        return "<" if self.little else ">"

    @property
    def ph_end(self) -> int:
        """Where the program header table ends (a file shorter than this is cut inside it)."""
        return self.phoff + self.phentsize * self.phnum


def header_size(head: bytes) -> int:
    """Bytes of the file header ``head`` starts (64 for ELF64, 52 for ELF32)."""
    return 64 if len(head) > 4 and head[4] == 2 else 52


def parse_header(head: bytes) -> Header:
    """Decode the file header at the start of ``head``; ElfError when it is none."""
    if not is_elf(head):
        raise ElfError("not an ELF file")
    if len(head) < 6 or head[4] not in (1, 2) or head[5] not in (1, 2):
        raise ElfError("unknown ELF class or byte order")
    e = "<" if head[5] == 1 else ">"
    if len(head) < header_size(head):
        raise ElfError("ELF header cut short")
    if head[4] == 2:
        t, m, _v, _entry, phoff, shoff, _fl, _eh, phent, phnum, shent, shnum, shstr = struct.unpack_from(
            e + "HHIQQQIHHHHHH", head, 16)
        bits = 64
    else:
        t, m, _v, _entry, phoff, shoff, _fl, _eh, phent, phnum, shent, shnum, shstr = struct.unpack_from(
            e + "HHIIIIIHHHHHH", head, 16)
        bits = 32
    return Header(bits, e == "<", t, m, phoff, phent, phnum, shoff, shent, shnum, shstr)


class Phdr(NamedTuple):
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


def parse_phdrs(hdr: Header, table: bytes) -> List[Phdr]:
    """The program headers in ``table`` (the bytes at ``phoff``); a short table gives fewer."""
    e, ent = hdr.endian, hdr.phentsize
    if hdr.bits == 64:
        if ent < 56:
            raise ElfError("program header entries of %d bytes" % ent)
        st = struct.Struct(e + "IIQQQQQ")
        rows = (st.unpack_from(table, k * ent) for k in range(min(hdr.phnum, len(table) // ent)))
        return [Phdr(t, f, o, v, fs, ms) for t, f, o, v, _p, fs, ms in rows]
    if ent < 32:
        raise ElfError("program header entries of %d bytes" % ent)
    st = struct.Struct(e + "IIIIIII")
    rows32 = (st.unpack_from(table, k * ent) for k in range(min(hdr.phnum, len(table) // ent)))
    return [Phdr(t, f, o, v, fs, ms) for t, o, v, _p, fs, ms, f in rows32]


def read_phdrs(hdr: Header, read: Reader) -> List[Phdr]:
    """The program headers, read through ``read`` (those past the end of the data are left out)."""
    if not hdr.phnum or not hdr.phoff:
        return []
    if hdr.phnum > MAX_PHNUM:
        raise ElfError("%d program headers" % hdr.phnum)
    return parse_phdrs(hdr, read(hdr.phoff, hdr.phentsize * hdr.phnum) or b"")


class Shdr(NamedTuple):
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


def read_shdrs(hdr: Header, read: Reader) -> List[Shdr]:
    """The section headers with their names (none when the table is absent or cut)."""
    if not hdr.shoff or not hdr.shnum or hdr.shnum > MAX_PHNUM:
        return []
    e, ent = hdr.endian, hdr.shentsize
    fmt = e + ("IIQQQQIIQQ" if hdr.bits == 64 else "IIIIIIIIII")
    if ent < struct.calcsize(fmt):
        return []
    table = read(hdr.shoff, ent * hdr.shnum) or b""
    if len(table) < ent * hdr.shnum:
        return []
    raw = [struct.unpack_from(fmt, table, k * ent) for k in range(hdr.shnum)]
    names = b""
    if hdr.shstrndx < len(raw):
        strtab = raw[hdr.shstrndx]
        names = read(strtab[4], strtab[5]) or b""
    out = []
    for r in raw:
        stop = names.find(b"\0", r[0])
        name = names[r[0]:stop if stop >= 0 else len(names)].decode("utf-8", "replace")
        out.append(Shdr(name, r[1], r[2], r[3], r[4], r[5], r[6], r[9]))
    return out


# ------------------------------------------------------------------------------------- notes


def iter_notes(data: bytes, little: bool = True, strict: bool = True) -> Iterator[Tuple[bytes, int, bytes]]:
    """(name, type, desc) of each note in a ``PT_NOTE`` segment's bytes (4-byte aligned).  A note
    running past the data raises ValueError when ``strict`` (a core's notes: corrupt), else ends
    the walk (a library's notes read from a page of memory)."""
    hdr = struct.Struct("<III" if little else ">III")
    i, n = 0, len(data)
    while i + 12 <= n:
        namesz, descsz, ntype = hdr.unpack_from(data, i)
        i += 12
        name = bytes(data[i:i + namesz]).rstrip(b"\0")
        i += (namesz + 3) & ~3
        if i + descsz > n:
            if strict:
                raise ValueError("note of type %#x runs past its segment" % ntype)
            return
        desc = data[i:i + descsz]
        i += (descsz + 3) & ~3
        yield name, ntype, desc


def build_id_from_notes(data: bytes, little: bool = True) -> Optional[str]:
    """The NT_GNU_BUILD_ID in a run of ELF notes (the bytes of a PT_NOTE segment)."""
    for name, ntype, desc in iter_notes(data, little, strict=False):
        if ntype == NT_GNU_BUILD_ID and name == b"GNU" and desc:
            return bytes(desc).hex()
    return None


class Prstatus(NamedTuple):
    tid: int
    cursig: int
    #: The 27 general registers (x86-64 order), None when the note is too short to hold them.
    regs: Optional[Tuple[int, ...]]


def prstatus(desc: bytes) -> Optional[Prstatus]:
    """A thread's NT_PRSTATUS (64-bit Linux); None when too short to name the thread."""
    if len(desc) < PRSTATUS_PID + 4:
        return None
    cursig = struct.unpack_from("<h", desc, PRSTATUS_CURSIG)[0]
    tid = struct.unpack_from("<i", desc, PRSTATUS_PID)[0]
    regs = GREGS.unpack_from(desc, PRSTATUS_REG) if len(desc) >= PRSTATUS_REG + GREGS.size else None
    return Prstatus(tid, cursig, regs)


def prpsinfo(desc: bytes) -> Optional[Tuple[int, str]]:
    """(pid, the first 80 bytes of the command line) of NT_PRPSINFO; None when too short."""
    if len(desc) < PRPSINFO_PSARGS + 80:
        return None
    pid = struct.unpack_from("<i", desc, PRPSINFO_PID)[0]
    raw = bytes(desc[PRPSINFO_PSARGS:PRPSINFO_PSARGS + 80]).split(b"\0", 1)[0]
    return pid, raw.decode("utf-8", "surrogateescape").strip()


def siginfo_signo(desc: bytes) -> Optional[int]:
    """``si_signo`` of NT_SIGINFO."""
    return struct.unpack_from("<i", desc, 0)[0] if len(desc) >= 4 else None


def auxv(desc: bytes) -> Dict[int, int]:
    """NT_AUXV as {key: value} (the first of each key, up to AT_NULL)."""
    out: Dict[int, int] = {}
    for i in range(0, len(desc) - 15, 16):
        key, val = struct.unpack_from("<QQ", desc, i)
        if key == 0:
            break
        out.setdefault(key, val)
    return out


def nt_file(desc: bytes) -> List[Tuple[int, int, int, str]]:
    """NT_FILE as (start, end, file offset in bytes, path); ValueError when its count lies."""
    if len(desc) < 16:
        return []
    count, page = struct.unpack_from("<QQ", desc, 0)
    if count > len(desc) // 24:
        raise ValueError("NT_FILE claims %d entries" % count)
    names = bytes(desc[16 + 24 * count:]).split(b"\0")
    out = []
    for k in range(count):
        start, end, pgoff = struct.unpack_from("<QQQ", desc, 16 + 24 * k)
        name = names[k].decode("utf-8", "surrogateescape") if k < len(names) else "?"
        out.append((start, end, pgoff * (page or 1), name))
    return out


# ---------------------------------------------------------------------------------- whole files


def build_id(read: Reader, limit: Optional[int] = None) -> Optional[str]:
    """The GNU build-id of the ELF image ``read`` reads: header, program headers, PT_NOTEs only.
    ``limit``: bytes readable from the start (a library's first page in a core's memory)."""
    try:
        head = read(0, 64) or b""
        hdr = parse_header(head)
        if limit is not None and (not hdr.phnum or hdr.ph_end > limit):
            return None
        for ph in read_phdrs(hdr, read):
            if ph.type == PT_NOTE and 0 < ph.filesz <= 1 << 20:
                if limit is not None and ph.offset + ph.filesz > limit:
                    continue
                bid = build_id_from_notes(read(ph.offset, ph.filesz) or b"", hdr.little)
                if bid:
                    return bid
    except (ElfError, struct.error):
        return None
    return None


def file_reader(fd: int) -> Reader:
    """``read(offset, size)`` over an open file descriptor (``pread``: no shared file position)."""

    def read(offset: int, size: int) -> Optional[bytes]:
        if offset < 0 or size < 0 or offset >= 1 << 63:
            return None
        try:
            return os.pread(fd, size, offset)
        except (OSError, OverflowError):
            return None

    return read


def _with_file(path: str, fn: Callable[[Reader], object]):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return fn(file_reader(fd))
    finally:
        os.close(fd)


def build_id_of_file(path: str) -> Optional[str]:
    """The GNU build-id of an ELF file on disk (None when it has none or is no ELF file)."""
    return _with_file(path, build_id)  # type: ignore[return-value]


def load_vaddr(path: str) -> Optional[int]:
    """The link-time address of a file's first PT_LOAD, page-aligned (0 for ordinary shared
    objects); None when it is no 64-bit ELF file."""

    def first(read: Reader) -> Optional[int]:
        try:
            hdr = parse_header(read(0, 64) or b"")
            if hdr.bits != 64:
                return None
            for ph in read_phdrs(hdr, read):
                if ph.type == PT_LOAD:
                    return (ph.vaddr - ph.offset) & ~0xFFF
        except (ElfError, struct.error):
            return None
        return None

    return _with_file(path, first)  # type: ignore[return-value]


def dynamic_entries(hdr: Header, phdrs: Sequence[Phdr], read: Reader) -> Iterator[Tuple[int, int]]:
    """(tag, value) of the PT_DYNAMIC segment, up to DT_NULL."""
    fmt = struct.Struct(hdr.endian + ("qQ" if hdr.bits == 64 else "iI"))
    for ph in phdrs:
        if ph.type != PT_DYNAMIC or ph.filesz > 1 << 24:
            continue
        data = read(ph.offset, ph.filesz) or b""
        for i in range(0, len(data) - fmt.size + 1, fmt.size):
            tag, val = fmt.unpack_from(data, i)
            if tag == DT_NULL:
                return
            yield tag, val


def is_pie_executable(hdr: Header, phdrs: Sequence[Phdr], read: Reader) -> bool:
    """ET_DYN is both PIE executables and shared objects: DF_1_PIE, else an interpreter and no
    soname, says executable (libc.so.6 has an interpreter too, and a soname)."""
    interp = any(ph.type == PT_INTERP for ph in phdrs)
    soname = False
    try:
        for tag, val in dynamic_entries(hdr, phdrs, read):
            if tag == DT_FLAGS_1 and val & DF_1_PIE:
                return True
            soname = soname or tag == DT_SONAME
    except struct.error:
        pass
    return interp and not soname


class LoadMap:
    """Memory by virtual address over ``PT_LOAD`` segments, (vaddr, memsz, offset, filesz) sorted
    by vaddr; a binary search per read (GPU cores have thousands of segments)."""

    def __init__(self, loads: Sequence[Tuple[int, int, int, int]]) -> None:
        self.loads = sorted(loads)
        self._starts = [seg[0] for seg in self.loads]

    def segment(self, addr: int) -> Optional[Tuple[int, int, int, int]]:
        """The segment whose memory holds ``addr``."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            seg = self.loads[i]
            if addr < seg[0] + seg[1]:
                return seg
        return None

    def file_offset(self, addr: int, size: int) -> Optional[int]:
        """Where the file holds [addr, addr+size), None when not all of it is in the file."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            vaddr, _memsz, off, filesz = self.loads[i]
            if addr + size <= vaddr + filesz:
                return off + addr - vaddr
        return None
