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
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Dict, List, Optional, Tuple

from hanganalyze import elf
from hanganalyze.corestack import CoreMemory, argv_from_stack, initial_stack
from hanganalyze.elf import build_id_from_notes, build_id_of_file
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model.signals import fatal_signal

#: Read from here by other modules and tests (the one ELF reader lives in ``hanganalyze.elf``).
__all__ = ["CoreMemory", "argv_from_stack", "initial_stack", "build_id_from_notes", "build_id_of_file",
           "build_id_in_memory"]

# auxv keys we use
AT_NULL = 0
AT_PHDR = 3
AT_ENTRY = 9
AT_EXECFN = 31

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


def _elf_kind(e_type: int, pie: bool) -> str:
    if e_type == elf.ET_EXEC or (e_type == elf.ET_DYN and pie):
        return "an ELF executable"
    if e_type == elf.ET_DYN:
        return "an ELF shared object"
    if e_type == elf.ET_REL:
        return "an ELF object file"
    return "an ELF file of type %d" % e_type


_ELF64_EHDR = 64  # bytes of an ELF64 file header


#: How an unfinished core is explained (it is still being written, or the disk filled up).
_INCOMPLETE = "%s is incomplete: cut %s (%s; still being written, or the disk filled up)"


def _check_headers_present(path: Path, hdr: elf.Header, size: int) -> None:
    """A core cut inside its program header table is unfinished: say so before reading what is
    not there (the table would just look short)."""
    if hdr.bits != 64 or not hdr.little:  # not ELF64 little-endian: read_core says so after parsing
        return
    expected = hdr.ph_end
    if hdr.type == elf.ET_CORE and expected > size:
        raise InputError(_INCOMPLETE % (path, "inside its program headers", "the file has %d bytes, they end at %d"
                                        % (size, expected)))


def _check_size(path: Path, segs: List[elf.Phdr], size: int) -> int:
    """The size the core should have (the end of its last segment).  Memory may be missing (the
    core is cut short but usable: every thread's registers are in the notes), the notes may not:
    a core cut inside its notes is unfinished, one error."""
    expected = 0
    for seg in segs:
        if not seg.filesz:
            continue
        end = seg.offset + seg.filesz
        expected = max(expected, end)
        if seg.type == elf.PT_NOTE and end > size:
            if seg.offset < size:
                where, what = "inside its notes", "the file has %d bytes, the notes end at %d" % (size, end)
            else:  # gdb's gcore writes the notes after the memory
                where = "before its notes"
                what = "the file has %d bytes, the notes start at %d" % (size, seg.offset)
            raise InputError(_INCOMPLETE % (path, where, what))
    return expected


# ------------------------------------------------------------------------------------- notes

#: A note segment larger than this is corrupt (a 1,000-thread core's notes are a few MB).
_MAX_NOTE_SEGMENT = 512 << 20


def _read_notes(fh: BinaryIO, segs: List[elf.Phdr], info: CoreInfo) -> Tuple[Optional[str], List[int],
                                                                           Optional[int], bytes]:
    """Fill info from the PT_NOTE segments (read by offset); returns (psargs, cursigs, first
    NT_SIGINFO signo, raw NT_AUXV bytes)."""
    psargs: Optional[str] = None
    cursigs: List[int] = []
    siginfo: Optional[int] = None
    auxv_bytes = b""
    for seg in segs:
        if seg.type != elf.PT_NOTE or not seg.filesz:
            continue
        if seg.filesz > _MAX_NOTE_SEGMENT:
            raise ValueError("note segment of %d bytes" % seg.filesz)
        fh.seek(seg.offset)
        for name, ntype, desc in elf.iter_notes(fh.read(seg.filesz)):
            if name == b"GDB":
                info.written_by_gdb = True  # gdb's target description note (0xff000000)
            if name != b"CORE":
                continue
            if ntype == elf.NT_PRSTATUS:
                st = elf.prstatus(desc)
                if st is not None:
                    cursigs.append(st.cursig)
                    info.tids.append(st.tid)
            elif ntype == elf.NT_PRPSINFO:
                ps = elf.prpsinfo(desc)
                if ps is not None:
                    info.pid = info.pid or ps[0]
                    psargs = ps[1]
            elif ntype == elf.NT_SIGINFO and siginfo is None:
                siginfo = elf.siginfo_signo(desc)
            elif ntype == elf.NT_AUXV and not auxv_bytes:
                auxv_bytes = desc
                info.auxv = elf.auxv(desc)
            elif ntype == elf.NT_FILE:
                info.mappings.extend(Mapping(*row) for row in elf.nt_file(desc))
    return psargs, cursigs, siginfo, auxv_bytes


def _decide_signal(info: CoreInfo, cursigs: List[int], siginfo: Optional[int]) -> None:
    signo = next((s for s in cursigs if s), 0) or (siginfo or 0)
    if not signo:
        return
    info.raw_signo = signo
    # None for the stop of a gcore of a running process: the stop is ours, not the program's
    info.signal = fatal_signal(signo)


# ----------------------------------------------------------------------------------- build-ids


def build_id_in_memory(mem: CoreMemory, base: int) -> Optional[str]:
    """The build-id of the ELF mapped at `base`, from the first page the core dumped (the kernel
    keeps first pages of ELF mappings by default: coredump_filter bit 4)."""
    return elf.build_id(lambda off, size: mem.read(base + off, size), limit=4096)


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
        if not elf.is_elf(head):
            raise InputError("%s is not an ELF core file" % path)
        if size < _ELF64_EHDR:
            raise InputError(_INCOMPLETE % (path, "inside its ELF header", "%d of %d bytes" % (size, _ELF64_EHDR)))
        try:
            hdr = elf.parse_header(head)
        except elf.ElfError as e:
            raise InputError("%s is not a readable ELF file: %s" % (path, e)) from None
        _check_headers_present(path, hdr, size)
        read = elf.file_reader(fh.fileno())
        try:
            segs = elf.read_phdrs(hdr, read)  # program headers, once
            if hdr.type != elf.ET_CORE:
                pie = hdr.type == elf.ET_DYN and elf.is_pie_executable(hdr, segs, read)
                raise InputError("%s is %s, not a core" % (path, _elf_kind(hdr.type, pie)))
            if hdr.bits != 64 or not hdr.little:
                raise InputError("%s: only 64-bit little-endian cores are supported" % path)
            expected = _check_size(path, segs, size)
            info = CoreInfo(path=str(path), file_size=size, expected_size=max(expected, size))
            psargs, cursigs, siginfo, auxv_bytes = _read_notes(fh, segs, info)
            loads = [(s.vaddr, s.memsz, s.offset, s.filesz) for s in segs if s.type == elf.PT_LOAD]
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001 - corrupt notes fail in many ways (struct, ValueError, memory)
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


def _wrong_exe(recorded: str, want: str, given: str, have: str, locate: Locate) -> Tuple[str, str]:
    """``--exe`` names another build than the core ran: (the executable to use, the warning).

    The warning names the executable the core ran (its mapping of AT_ENTRY, from NT_FILE) and its
    build-id, so a wrong ``--exe`` is never silent.  When that file is here (``locate``) with the
    core's build-id it is used instead: with the wrong binary gdb's symbols, and every finding on
    them, would be lost."""
    real = recorded[: -len(" (deleted)")] if recorded.endswith(" (deleted)") else recorded
    # "does not match": the report puts this line at the top either way (render.view's doubts)
    head = "the core was made by %s (build-id %s); --exe names %s (build-id %s), which does not match" % (
        real, want, given, have)
    found = locate(real)
    if found is not None and build_id_of_file(found) == want:
        return found, "%s: using %s instead, the build the core ran" % (head, found)
    why = ("%s is not on this machine" % real if found is None
           else "%s here is another build (build-id %s)" % (found, build_id_of_file(found)))
    return given, "%s: stacks may be wrong (%s)" % (head, why)


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
            if not elf.is_elf(fh.read(4)):
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
        if exe is not None and recorded:
            chosen, warning = _wrong_exe(recorded, want, chosen, have, locate)
            warnings.append(warning)
        else:
            warnings.append(
                "executable %s has build-id %s but the core ran build-id %s: stacks may be wrong" % (chosen, have, want)
            )
    if libraries:
        warnings.extend(library_warnings(info))
    return chosen, warnings


def is_library(path: str) -> bool:
    """A shared library's file name (``libc.so.6``, ``_C.cpython-311-x86_64-linux-gnu.so``)."""
    name = os.path.basename(path)
    return ".so" in name and (name.endswith(".so") or ".so." in name)


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
