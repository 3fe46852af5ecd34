"""Read what an ELF core says about its process, without gdb: pid, executable, argv, signal,
threads and mapped files with their build-ids.

Why not let gdb do it: gdb needs the right executable *before* it can open the core, and its
own messages about a wrong or missing one are easy to miss.  Reading the notes first lets us
pick the executable, check its build-id and say clearly what is wrong, in milliseconds.

Cores can be hundreds of GB and sparse (GPU processes map huge device address ranges), so this
module never reads a core as a whole: it reads the ELF/program headers, the PT_NOTE segments by
offset, and a few pages of memory (the first page of each mapped ELF file, the initial stack for
argv) through `CoreMemory`, which seeks to exactly the bytes it needs.

Signals: the kernel writes the fatal signal in NT_PRSTATUS ``pr_cursig`` (and NT_SIGINFO).  A core
written by gdb's ``gcore`` of a running process has ``pr_cursig`` 0 and NT_SIGINFO ``SIGSTOP``
(the stop caused by ptrace-attaching, not something that happened to the program).  We present
``signal = None`` for those, as pystack and py-spy do for live snapshots, and keep real signals
(a ``gcore`` taken at an abort under gdb reports ``SIGABRT``).
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

from hanganalyze.errors import InputError
from hanganalyze_gdbext.model.signals import fatal_signal

# Offsets in the 64-bit Linux ``struct elf_prstatus`` (the same on x86-64 and aarch64).
_PRSTATUS_CURSIG = 12  # short, after struct elf_siginfo {int si_signo, si_code, si_errno}
_PRSTATUS_PID = 32  # pid_t pr_pid

# auxv keys we use
AT_NULL = 0
AT_PHDR = 3
AT_ENTRY = 9
AT_EXECFN = 31

#: pyelftools names program header types; we compare numbers.
_P_TYPES = {"PT_NULL": 0, "PT_LOAD": 1, "PT_DYNAMIC": 2, "PT_INTERP": 3, "PT_NOTE": 4}

#: Upper bound on bytes read from the initial stack to find argv (argv+envp strings live there).
_STACK_READ_MAX = 8 << 20
#: Environment variables read from a core's initial stack (a real one has a few hundred).
_MAX_ENV = 4096
#: Upper bound on mapped files whose build-id we read from disk (GPU processes map thousands).
_MAX_BUILD_ID_FILES = 2000
#: Libraries whose build-id differs that we name one by one (a core from another host: hundreds).
_MAX_LIB_WARNINGS = 5


@dataclass
class Mapping:
    """One file-backed mapping from NT_FILE."""

    start: int
    end: int
    offset: int  # file offset in bytes
    path: str


#: Mapped "files" that are not files to look for on disk: devices (GPU, /dev/zero), POSIX and
#: System V shared memory, memfds.
_SPECIAL_PREFIXES = ("/dev/", "/memfd:", "/SYSV", "/anon_hugepage", "/drm mm object", "/[")


@dataclass
class MappedFile:
    """A file mapped into the process, with the build-ids we could find."""

    path: str
    base: int  # lowest address of its mappings
    build_id: Optional[str] = None  # from the core's memory (what the process really ran)
    disk_build_id: Optional[str] = None  # from the file on disk now
    on_disk: bool = False
    #: Where this machine has the file (``--sysroot`` / ``--solib-search-path`` applied; the file
    #: gdb used for a library), None when it was not found.
    found: Optional[str] = None

    @property
    def mismatch(self) -> bool:
        """True when the file on disk is not the one the process mapped."""
        return bool(self.build_id and self.disk_build_id and self.build_id != self.disk_build_id)

    @property
    def status(self) -> str:
        """``match`` / ``mismatch`` (build-ids of the core and the file found), ``missing`` (no file
        found), ``present`` (found, but there is no pair of build-ids to compare: a data file, or
        the core does not hold the file's first page), ``special`` (a device, shared memory or a
        memfd: nothing to find on disk)."""
        if self.path.startswith(_SPECIAL_PREFIXES):
            return "special"
        if not self.on_disk:
            return "missing"
        if self.build_id and self.disk_build_id:
            return "mismatch" if self.mismatch else "match"
        return "present"


@dataclass
class CoreInfo:
    path: str
    pid: Optional[int] = None
    executable: Optional[str] = None
    argv: Optional[List[str]] = None
    signal: Optional[str] = None
    #: Raw signal number found in the notes (also for SIGSTOP of gcore'd cores).
    raw_signo: Optional[int] = None
    nthreads: int = 0
    tids: List[int] = field(default_factory=list)
    written_by_gdb: bool = False
    files: List[MappedFile] = field(default_factory=list)
    mappings: List[Mapping] = field(default_factory=list)
    auxv: Dict[int, int] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    #: The environment the process started with (initial stack); only read, never shown whole.
    environ: Dict[str, str] = field(default_factory=dict)
    #: Bytes in the file, and bytes its headers say it should have (the end of its last segment):
    #: ``file_size < expected_size`` for a core cut short (systemd's ProcessSizeMax, a full disk).
    file_size: int = 0
    expected_size: int = 0
    #: PT_LOAD segments (vaddr, memsz, file offset, filesz), sorted by vaddr.
    loads: List[Tuple[int, int, int, int]] = field(default_factory=list)

    def file(self, path: Optional[str]) -> Optional[MappedFile]:
        for f in self.files:
            if f.path == path:
                return f
        return None

    @property
    def truncated(self) -> bool:
        """True when memory the core should hold lies beyond the end of the file."""
        return self.expected_size > self.file_size

    def missing(self, addr: int) -> bool:
        """True when the core should hold the byte at `addr` but the file ends before it."""
        if not self.truncated:
            return False
        i = bisect.bisect_right(self.loads, (addr, 1 << 64)) - 1
        if i < 0:
            return False
        vaddr, _memsz, off, filesz = self.loads[i]
        return addr < vaddr + filesz and off + (addr - vaddr) >= self.file_size

    def missing_ranges(self) -> List[Tuple[int, int]]:
        """[lo, hi) address ranges the core should hold but the file ends before, merged across
        unmapped gaps (not across memory that is there), sorted."""
        out: List[Tuple[int, int]] = []
        run_open = False  # the last segment seen was missing up to its end
        for vaddr, memsz, off, filesz in self.loads:
            if not filesz or off + filesz <= self.file_size:
                if memsz:
                    run_open = False
                continue
            lo = vaddr + max(0, self.file_size - off)
            if run_open and lo == vaddr and out:
                out[-1] = (out[-1][0], vaddr + filesz)
            else:
                out.append((lo, vaddr + filesz))
            run_open = filesz == memsz
        return out

    def truncation_warning(self) -> Optional[str]:
        """The report's first line for a truncated core: how much of it is there."""
        if not self.truncated:
            return None
        return "core truncated: %s of %s present (%d%%); memory beyond that is missing" % (
            human_size(self.file_size), human_size(self.expected_size), 100 * self.file_size // self.expected_size)


def human_size(n: int) -> str:
    """``1.2 GB``, ``512 kB``, ``300 B`` (decimal units, one decimal from kB on)."""
    if n < 1000:
        return "%d B" % n
    value = float(n)
    for unit in ("kB", "MB", "GB"):
        value /= 1000.0
        if value < 999.95:
            return "%.1f %s" % (value, unit)
    return "%.1f TB" % (value / 1000.0)


class CoreMemory:
    """Read the process's memory as the core stored it, by seeking (never loading the core)."""

    def __init__(self, fh: BinaryIO, loads: List[Tuple[int, int, int, int]]) -> None:
        # (vaddr, memsz, offset, filesz), sorted by vaddr
        self._fh = fh
        self._loads = self.loads = sorted(loads)
        self._starts = [seg[0] for seg in self._loads]

    def segment(self, addr: int) -> Optional[Tuple[int, int, int, int]]:
        """The PT_LOAD holding addr (binary search: GPU cores have thousands of segments)."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            seg = self._loads[i]
            if addr < seg[0] + seg[1]:
                return seg
        return None

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


# ----------------------------------------------------------------------------------- validation

#: Compressed files users hand us instead of the core (systemd-coredump stores cores as .zst).
_COMPRESSED = (
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"),
    (b"\x1f\x8b", "gzip", "gunzip"),
    (b"\xfd7zXZ\x00", "xz", "unxz"),
    (b"\x04\x22\x4d\x18", "lz4", "lz4 -d"),
    (b"BZh", "bzip2", "bunzip2"),
)


def compressed_kind(head: bytes) -> Optional[Tuple[str, str]]:
    """(format, decompress command) when `head` starts like a compressed file, else None."""
    for magic, kind, cmd in _COMPRESSED:
        if head.startswith(magic):
            return kind, cmd
    return None



def _is_pie_executable(elf) -> bool:
    """ET_DYN is both PIE executables and shared objects: DF_1_PIE, else an interpreter and no
    soname, says executable (libc.so.6 has an interpreter too, and a soname)."""
    interp, soname = False, False
    try:
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_INTERP":
                interp = True
            elif seg["p_type"] == "PT_DYNAMIC":
                for tag in seg.iter_tags():
                    if tag.entry.d_tag == "DT_FLAGS_1" and tag.entry.d_val & 0x08000000:  # DF_1_PIE
                        return True
                    if tag.entry.d_tag == "DT_SONAME":
                        soname = True
    except Exception:  # noqa: BLE001 - odd dynamic sections: fall back to what we saw
        pass
    return interp and not soname


def _elf_kind(e_type: str, pie: bool) -> str:
    if e_type == "ET_EXEC" or (e_type == "ET_DYN" and pie):
        return "an ELF executable"
    if e_type == "ET_DYN":
        return "an ELF shared object"
    if e_type == "ET_REL":
        return "an ELF object file"
    return "an ELF file of type %s" % e_type


def _open_elf(path: Path, fh: BinaryIO):
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        return ELFFile(fh)
    except (ELFError, struct.error, ValueError, OSError) as e:
        raise InputError("%s is not a readable ELF file: %s" % (path, e)) from None


_ELF64_EHDR = 64  # bytes of an ELF64 file header


#: How an unfinished core is explained (it is still being written, or the disk filled up).
_INCOMPLETE = "%s is incomplete: cut %s (%s; still being written, or the disk filled up)"


def _check_headers_present(path: Path, head: bytes, size: int) -> None:
    """A core cut inside its ELF header or program header table is unfinished: say so before
    pyelftools parses what is not there (it would report a puzzling struct error)."""
    if size < _ELF64_EHDR:
        raise InputError(_INCOMPLETE % (path, "inside its ELF header", "%d of %d bytes" % (size, _ELF64_EHDR)))
    if head[4] != 2 or head[5] != 1:  # not ELF64 little-endian: read_core says so after parsing
        return
    e_type, = struct.unpack_from("<H", head, 16)
    e_phoff, = struct.unpack_from("<Q", head, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", head, 54)
    expected = e_phoff + e_phentsize * e_phnum
    if e_type == 4 and expected > size:  # ET_CORE
        raise InputError(_INCOMPLETE % (path, "inside its program headers", "the file has %d bytes, they end at %d"
                                        % (size, expected)))


def _check_size(path: Path, segs: List[Dict[str, int]], size: int) -> int:
    """The size the core should have (the end of its last segment).  Memory may be missing (the
    core is cut short but usable: every thread's registers are in the notes), the notes may not:
    a core cut inside its notes is unfinished, one error."""
    expected = 0
    for seg in segs:
        if not seg["p_filesz"]:
            continue
        end = seg["p_offset"] + seg["p_filesz"]
        expected = max(expected, end)
        if seg["p_type"] == 4 and end > size:  # PT_NOTE
            if seg["p_offset"] < size:
                where, what = "inside its notes", "the file has %d bytes, the notes end at %d" % (size, end)
            else:  # gdb's gcore writes the notes after the memory
                where = "before its notes"
                what = "the file has %d bytes, the notes start at %d" % (size, seg["p_offset"])
            raise InputError(_INCOMPLETE % (path, where, what))
    return expected


# ------------------------------------------------------------------------------------- notes


def _parse_auxv(desc: bytes) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for i in range(0, len(desc) - 15, 16):
        key, val = struct.unpack_from("<QQ", desc, i)
        if key == AT_NULL:
            break
        out.setdefault(key, val)
    return out


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


#: Raw note types (pyelftools' note parsing builds construct objects per note: far too slow for
#: the thousands of notes of a 200-thread core, so the few formats we need are decoded here).
_NT_PRSTATUS, _NT_PRPSINFO, _NT_AUXV = 1, 3, 6
_NT_SIGINFO, _NT_FILE = 0x53494749, 0x46494C45
_PRPSINFO_PID, _PRPSINFO_PSARGS = 24, 56  # struct elf_prpsinfo, 64-bit Linux
_MAX_NOTE_SEGMENT = 512 << 20


def iter_notes(data: bytes) -> Iterator[Tuple[bytes, int, bytes]]:
    """(name, type, desc) of each ELF note in a PT_NOTE segment's bytes (4-byte aligned)."""
    i, n = 0, len(data)
    while i + 12 <= n:
        namesz, descsz, ntype = struct.unpack_from("<III", data, i)
        i += 12
        name = data[i : i + namesz].rstrip(b"\0")
        i += (namesz + 3) & ~3
        if i + descsz > n:
            raise ValueError("note of type %#x runs past its segment" % ntype)
        desc = data[i : i + descsz]
        i += (descsz + 3) & ~3
        yield name, ntype, desc


def _parse_nt_file(desc: bytes) -> List[Mapping]:
    count, page = struct.unpack_from("<QQ", desc, 0)
    if count > len(desc) // 24:
        raise ValueError("NT_FILE claims %d entries" % count)
    names = desc[16 + 24 * count :].split(b"\0")
    out = []
    for k in range(count):
        start, end, pgoff = struct.unpack_from("<QQQ", desc, 16 + 24 * k)
        name = names[k].decode("utf-8", "surrogateescape") if k < len(names) else "?"
        out.append(Mapping(start, end, pgoff * (page or 1), name))
    return out


def _read_notes(fh: BinaryIO, segs: List[Dict[str, int]], info: CoreInfo) -> Tuple[Optional[str], List[int],
                                                                                    Optional[int], bytes]:
    """Fill info from the PT_NOTE segments (read by offset); returns (psargs, cursigs, first
    NT_SIGINFO signo, raw NT_AUXV bytes)."""
    psargs: Optional[str] = None
    cursigs: List[int] = []
    siginfo: Optional[int] = None
    auxv_bytes = b""
    for seg in segs:
        if seg["p_type"] != 4 or not seg["p_filesz"]:  # PT_NOTE
            continue
        if seg["p_filesz"] > _MAX_NOTE_SEGMENT:
            raise ValueError("note segment of %d bytes" % seg["p_filesz"])
        fh.seek(seg["p_offset"])
        for name, ntype, desc in iter_notes(fh.read(seg["p_filesz"])):
            if name == b"GDB":
                info.written_by_gdb = True  # gdb's target description note (0xff000000)
            if name != b"CORE":
                continue
            if ntype == _NT_PRSTATUS and len(desc) >= _PRSTATUS_PID + 4:
                cursigs.append(struct.unpack_from("<h", desc, _PRSTATUS_CURSIG)[0])
                info.tids.append(struct.unpack_from("<i", desc, _PRSTATUS_PID)[0])
            elif ntype == _NT_PRPSINFO and len(desc) >= _PRPSINFO_PSARGS + 80:
                info.pid = info.pid or struct.unpack_from("<i", desc, _PRPSINFO_PID)[0]
                psargs = _cstr(desc[_PRPSINFO_PSARGS : _PRPSINFO_PSARGS + 80]).strip()
            elif ntype == _NT_SIGINFO and siginfo is None and len(desc) >= 4:
                siginfo = struct.unpack_from("<i", desc, 0)[0]
            elif ntype == _NT_AUXV and not auxv_bytes:
                auxv_bytes = desc
                info.auxv = _parse_auxv(desc)
            elif ntype == _NT_FILE and len(desc) >= 16:
                info.mappings.extend(_parse_nt_file(desc))
    return psargs, cursigs, siginfo, auxv_bytes


def _decide_signal(info: CoreInfo, cursigs: List[int], siginfo: Optional[int]) -> None:
    signo = next((s for s in cursigs if s), 0) or (siginfo or 0)
    if not signo:
        return
    info.raw_signo = signo
    # None for the stop of a gcore of a running process: the stop is ours, not the program's
    info.signal = fatal_signal(signo)


# ----------------------------------------------------------------------------------- build-ids


def build_id_from_notes(data: bytes, little: bool = True) -> Optional[str]:
    """The NT_GNU_BUILD_ID in a run of ELF notes (the bytes of a PT_NOTE segment)."""
    fmt = "<III" if little else ">III"
    i = 0
    while i + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from(fmt, data, i)
        i += 12
        name = data[i : i + namesz]
        i += (namesz + 3) & ~3
        desc = data[i : i + descsz]
        i += (descsz + 3) & ~3
        if ntype == 3 and name.rstrip(b"\0") == b"GNU" and desc:
            return desc.hex()
    return None


def build_id_of_file(path: str) -> Optional[str]:
    """The GNU build-id of an ELF file on disk: reads the ELF header, the program headers and the
    PT_NOTE segments only (pyelftools' segment objects parse dynamic sections too: slow for the
    hundreds of libraries of a CUDA process)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2):
                return None
            e = "<" if head[5] == 1 else ">"
            if head[4] == 2:
                phoff = struct.unpack_from(e + "Q", head, 32)[0]
                phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
                phfmt, ent = e + "IIQQQQ", 56
            else:
                phoff = struct.unpack_from(e + "I", head, 28)[0]
                phentsize, phnum = struct.unpack_from(e + "HH", head, 42)
                phfmt, ent = e + "IIIIII", 32
            if phentsize < ent or phnum > 4096:
                return None
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            for k in range(min(phnum, len(table) // phentsize)):
                fields = struct.unpack_from(phfmt, table, k * phentsize)
                if head[4] == 2:
                    p_type, p_offset, p_filesz = fields[0], fields[2], fields[5]
                else:
                    p_type, p_offset, p_filesz = fields[0], fields[1], fields[4]
                if p_type == 4 and 0 < p_filesz <= 1 << 20:
                    fh.seek(p_offset)
                    bid = build_id_from_notes(fh.read(p_filesz), e == "<")
                    if bid:
                        return bid
    except (OSError, struct.error):
        return None
    return None


def build_id_in_memory(mem: CoreMemory, base: int) -> Optional[str]:
    """The build-id of the ELF mapped at `base`, from the first page the core dumped (the kernel
    keeps first pages of ELF mappings by default: coredump_filter bit 4)."""
    head = mem.read(base, 64)
    if not head or head[:4] != b"\x7fELF" or head[4] != 2:  # ELFCLASS64 only
        return None
    little = head[5] == 1
    e = "<" if little else ">"
    phoff = struct.unpack_from(e + "Q", head, 32)[0]
    phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
    if not phnum or phentsize < 56 or phoff + phnum * phentsize > 4096:
        return None
    phdrs = mem.read(base + phoff, phnum * phentsize)
    if phdrs is None:
        return None
    for k in range(phnum):
        p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(e + "IIQQQQ", phdrs, k * phentsize)
        if p_type == 4 and p_filesz and p_offset + p_filesz <= 4096:  # PT_NOTE in the first page
            data = mem.read(base + p_offset, p_filesz)
            if data:
                bid = build_id_from_notes(data, little)
                if bid:
                    return bid
    return None


# -------------------------------------------------------------------------------------- argv


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


# --------------------------------------------------------------------------------------- main


def _choose_executable(info: CoreInfo, execfn: Optional[str], psargs: Optional[str]) -> Optional[str]:
    """The mapping holding AT_ENTRY is the executable (argv[0] may be a symlink or a script)."""
    entry = info.auxv.get(AT_ENTRY) or info.auxv.get(AT_PHDR)
    if entry:
        for m in info.mappings:
            if m.start <= entry < m.end:
                return m.path
    if info.mappings:
        return info.mappings[0].path  # the kernel lists mappings by address; the exe comes first
    return execfn or (psargs.split()[0] if psargs else None)


#: ``locate(path)``: where this machine has the file a core names (``--sysroot`` applied), or None.
Locate = Callable[[str], Optional[str]]


def _here(path: str) -> Optional[str]:
    """The default ``locate``: the file at the path the core names, on this machine."""
    return path if os.path.isfile(path) else None


def _collect_files(info: CoreInfo, mem: CoreMemory, locate: Optional[Locate] = None) -> None:
    locate = locate or _here
    seen: Dict[str, MappedFile] = {}
    for m in info.mappings:
        f = seen.get(m.path)
        if f is None:
            f = seen[m.path] = MappedFile(path=m.path, base=m.start)
            info.files.append(f)
        f.base = min(f.base, m.start)
        if m.offset == 0 and f.build_id is None:
            f.build_id = build_id_in_memory(mem, m.start)
    for n, f in enumerate(info.files):
        path = f.path[: -len(" (deleted)")] if f.path.endswith(" (deleted)") else f.path
        f.found = None if path.startswith(_SPECIAL_PREFIXES) else locate(path)
        f.on_disk = f.found is not None
        if f.found is not None and n < _MAX_BUILD_ID_FILES:
            f.disk_build_id = build_id_of_file(f.found)


def read_core(path, locate: Optional[Locate] = None) -> CoreInfo:
    """Parse a core's notes (and a few pages of its memory) into a CoreInfo.

    Raises InputError with one line for anything that is not an ELF core, and for a core cut
    inside its headers or notes (unfinished).  A core cut inside its memory is read: the
    CoreInfo says so (``truncated``, ``truncation_warning``); gdb reads the rest.
    ``locate`` finds the mapped files on this machine (``--sysroot``); default: where the core says.
    """
    path = Path(path)
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(_ELF64_EHDR)
        if head[:4] != b"\x7fELF":
            raise InputError("%s is not an ELF core file" % path)
        _check_headers_present(path, head, size)
        fh.seek(0)
        elf = _open_elf(path, fh)
        try:
            e_type = elf.header["e_type"]
            if e_type != "ET_CORE":
                pie = e_type == "ET_DYN" and _is_pie_executable(elf)
                raise InputError("%s is %s, not a core" % (path, _elf_kind(e_type, pie)))
            if elf.elfclass != 64 or not elf.little_endian:
                raise InputError("%s: only 64-bit little-endian cores are supported" % path)
            segs = [dict(seg.header) for seg in elf.iter_segments()]  # program headers, once
            for seg in segs:
                seg["p_type"] = _P_TYPES.get(seg["p_type"], seg["p_type"])
            expected = _check_size(path, segs, size)
            info = CoreInfo(path=str(path), file_size=size, expected_size=max(expected, size))
            psargs, cursigs, siginfo, auxv_bytes = _read_notes(fh, segs, info)
            loads = [(s["p_vaddr"], s["p_memsz"], s["p_offset"], s["p_filesz"]) for s in segs if s["p_type"] == 1]
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001 - pyelftools raises many types on corrupt notes
            raise InputError("%s: corrupt core notes (%s: %s)" % (path, type(e).__name__, e)) from None
        if not info.tids:
            raise InputError("%s: core has no thread (NT_PRSTATUS) notes" % path)
        info.nthreads = len(info.tids)
        info.pid = info.pid or info.tids[0]
        _decide_signal(info, cursigs, siginfo)
        mem = CoreMemory(fh, loads)
        info.loads = mem.loads
        execfn_addr = info.auxv.get(AT_EXECFN)
        execfn = mem.read_cstring(execfn_addr) if execfn_addr else None
        info.executable = _choose_executable(info, execfn, psargs)
        found = initial_stack(mem, auxv_bytes, execfn_addr)
        if found:
            info.argv, info.environ = found
        if not info.argv and psargs:
            info.argv = psargs.split()  # best effort: the kernel joined argv with spaces
        _collect_files(info, mem, locate)
    return info


def check_executable(info: CoreInfo, exe: Optional[Path], locate: Optional[Locate] = None,
                     where: str = "", libraries: bool = True) -> Tuple[str, List[str]]:
    """Pick the executable for gdb (``--exe`` wins) and explain any doubt about it.

    Returns (path, warnings).  Raises InputError when there is no usable executable: without it
    gdb cannot find the shared libraries and every stack would be wrong.  ``locate`` finds the
    recorded path on this machine (``--sysroot``), ``where`` says where it looked ("under --sysroot X");
    ``libraries=False`` leaves the libraries' warnings to ``library_warnings`` (called later).
    """
    locate = locate or _here
    warnings: List[str] = []
    recorded = info.executable
    if exe is not None:
        if not exe.is_file():
            raise InputError("--exe %s: no such file" % exe)
        with open(exe, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                raise InputError("--exe %s is not an ELF executable" % exe)
        chosen = str(exe)
    else:
        if not recorded:
            raise InputError("%s: the core does not name its executable; pass --exe PATH" % info.path)
        deleted = recorded.endswith(" (deleted)")
        chosen = recorded[: -len(" (deleted)")] if deleted else recorded
        found = locate(chosen)
        if found is None and "\\012" in chosen:
            # gcore copies names from /proc/PID/maps, where the kernel writes a newline as \012
            found = locate(chosen.replace("\\012", "\n"))
        if found is None:
            if where:
                raise InputError("the executable of core %s, %s, is not %s; pass --exe PATH"
                                 % (info.path, chosen, where))
            if deleted:
                raise InputError(
                    "the executable of core %s, %s, was deleted while the process ran; pass --exe PATH "
                    "(a copy of the same build)" % (info.path, chosen)
                )
            raise InputError(
                "the executable of core %s, %s, is gone (deleted or on another machine); pass --exe PATH"
                % (info.path, chosen)
            )
        chosen = found
    mf = info.file(recorded)
    want = mf.build_id if mf else None
    have = build_id_of_file(chosen)
    if want and have and want != have:
        warnings.append(
            "executable %s has build-id %s but the core ran build-id %s: stacks may be wrong" % (chosen, have, want)
        )
    if libraries:
        warnings.extend(library_warnings(info))
    return chosen, warnings


def library_warnings(info: CoreInfo) -> List[str]:
    """One line per mapped file (the executable aside) whose file on disk is another build."""
    warnings: List[str] = []
    mf = info.file(info.executable)
    changed = [f for f in info.files if f is not mf and f.mismatch]
    for f in changed[:_MAX_LIB_WARNINGS]:
        warnings.append(
            "%s on disk (build-id %s) is not the file the process mapped (build-id %s): its frames may be wrong"
            % (f.found if f.found and f.found != f.path else f.path, f.disk_build_id, f.build_id)
        )
    if len(changed) > _MAX_LIB_WARNINGS:
        warnings.append("%d more mapped files differ from the ones on disk" % (len(changed) - _MAX_LIB_WARNINGS))
    return warnings
