"""Versions of libraries that are not mapped as their own file: linked statically into another
file (NCCL inside TensorFlow, XLA/jaxlib, source builds of PyTorch) or mapped under a name without
a full version (pip wheels' ``libnccl.so.2``).

NCCL embeds ``"NCCL version " MAJOR.MINOR.PATCH SUFFIX "+cuda" X.Y`` as one pre-processed string
(src/init.cc, ``VERSION_STRING``: "so that running strings on the lib can quickly reveal the
version") and prints it at start-up with NCCL_DEBUG=INFO/VERSION, so the same regex reads a binary,
a core's memory or a log line.

Representation (``Process.libraries``): a statically linked library is a ``Library`` whose path
is ``"<file where the string was found> (static libnccl.so)"`` and whose version is the embedded
one; ``static_name(path)`` gives the library name back ("libnccl.so") and the matcher checks
``conditions: libraries`` against that name.  A mapped ``libnccl.so.2`` whose own string is read
just gets its ``version`` filled in.

Bounded: only the data sections of the executable, of libraries whose names suggest an ML
framework (or of every mapped file when there are few), capped per section and per process; a
core's own memory is scanned (capped) only when no file gave a version; and only for processes
with a frame naming NCCL (``mentions_nccl``), the only library a version condition names today.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import re
from typing import Dict, Iterable, List, Optional, Tuple

from hanganalyze import datapaths, elf
from hanganalyze.direct.elfimage import store_cached
from hanganalyze.libversions import EMBEDDED, disk_path, drop_shadowed, static_path
from hanganalyze_gdbext.model import Library, Process

_PREFIX = b"NCCL version "

#: Files whose names suggest they may carry NCCL linked in.
_CANDIDATE = re.compile(r"tensorflow|_pywrap|xla|jax|torch|c10|nccl|rccl|paddle|mxnet|onnxruntime|deepspeed|"
                        r"triton|horovod|megatron|cupy", re.I)
_SECTIONS = (".rodata", ".lrodata", ".data", ".data.rel.ro", ".ldata")
#: Scan every mapped file (not only framework-looking ones) when the process maps at most this many.
FEW_FILES = 12
MAX_SECTION_BYTES = 256 << 20
MAX_FILE_BYTES_TOTAL = 1 << 30
MAX_CORE_BYTES = 512 << 20
_CHUNK = 8 << 20


def _first_match(buf, start: int, end: int) -> Optional[str]:
    pat = EMBEDDED[0][1]
    pos = start
    while True:
        i = buf.find(_PREFIX, pos, end)
        if i < 0:
            return None
        m = pat.match(buf, i, min(end, i + 64))
        if m:
            return m.group(1).decode("ascii")
        pos = i + 1


def version_in_file(path: str, budget: List[int]) -> Optional[str]:
    """The embedded NCCL version in the file's data sections (``hanganalyze.elf`` for the section
    table, mmap for the bytes); ``budget[0]`` (bytes left to read) is decreased."""
    try:
        with open(path, "rb") as fh:
            read = elf.file_reader(fh.fileno())
            spans = []
            for sec in elf.read_shdrs(elf.parse_header(read(0, 64) or b""), read):
                if sec.name in _SECTIONS and sec.type != elf.SHT_NOBITS and sec.size:
                    spans.append((sec.offset, min(sec.size, MAX_SECTION_BYTES)))
            if not spans:
                return None
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                for off, size in spans:
                    size = min(size, budget[0], len(mm) - off)
                    if size <= 0:
                        continue
                    budget[0] -= size
                    v = _first_match(mm, off, off + size)
                    if v:
                        return v
    except Exception:  # noqa: BLE001 - not an ELF file, unreadable, truncated: no version
        return None
    return None


#: Version scans kept per file: "dev:ino:size:mtime_ns" -> version ("" where the file has none).
VERSIONS_FILE = "versions.json"
#: A kept table of more entries than this is started afresh (libraries of old environments).
MAX_KEPT = 4096


class KeptVersions:
    """``versions.json`` of the cache folder, read once and written back once if it changed."""

    def __init__(self) -> None:
        d = datapaths.cache_dir()
        self.path = None if d is None else str(d / VERSIONS_FILE)
        self.table: Dict[str, str] = {}
        self.changed = False
        if self.path is None:
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                table = json.load(f)
            if isinstance(table, dict):
                self.table = {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, str)}
        except (OSError, ValueError):
            pass  # no table yet, or a broken one: scan, and write a good one

    @staticmethod
    def key(path: str) -> Optional[str]:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return "%d:%d:%d:%d" % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def put(self, key: Optional[str], version: Optional[str]) -> None:
        if key is not None and self.path is not None:
            if len(self.table) >= MAX_KEPT:
                self.table = {}
            self.table[key] = version or ""
            self.changed = True

    def save(self) -> None:
        if self.changed and self.path is not None:
            text = json.dumps(self.table, sort_keys=True).encode()
            store_cached(self.path, lambda f: f.write(text))


def _next_data(fd: int, pos: int, end: int) -> int:
    """The first offset >= pos that is not in a hole of the file (``end`` when none before it)."""
    try:
        return min(os.lseek(fd, pos, os.SEEK_DATA), end)
    except OSError as e:
        # ENXIO: nothing but a hole up to the end of the file; else the file system cannot say
        return end if e.errno == errno.ENXIO else pos


def version_in_core(core: str, mappings: Iterable[Tuple[int, int, str]] = ()) -> Optional[Tuple[str, str]]:
    """(version, where) from a bounded scan of the core's PT_LOAD segments; ``where`` is the mapped
    file holding the address (from NT_FILE ``mappings``: (start, end, path)) or "memory of CORE"."""
    try:
        with open(core, "rb") as fh:
            read = elf.file_reader(fh.fileno())
            loads = [(s.vaddr, s.offset, s.filesz) for s in elf.read_phdrs(elf.parse_header(read(0, 64) or b""), read)
                     if s.type == elf.PT_LOAD and s.filesz]
            left = MAX_CORE_BYTES
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                for vaddr, off, filesz in loads:
                    end = min(off + filesz, len(mm))
                    pos = off
                    while pos < end and left > 0:
                        pos = _next_data(fh.fileno(), pos, end)  # holes (sparse GPU mappings) cost nothing
                        if pos >= end:
                            break
                        stop = min(end, pos + _CHUNK, pos + left)
                        v = _first_match(mm, pos, min(end, stop + 64))
                        if v:
                            i = mm.find(_PREFIX, pos, min(end, stop + 64))
                            addr = vaddr + (i - off)
                            where = next((p for lo, hi, p in mappings if lo <= addr < hi), None)
                            return v, where or "memory of %s" % core
                        left -= stop - pos
                        pos = stop
                    if left <= 0:
                        break
    except Exception:  # noqa: BLE001 - unreadable core: no version
        return None
    return None


def add_embedded_versions(libraries: List[Library], files: Iterable[str], executable: Optional[str] = None,
                          core: Optional[str] = None,
                          mappings: Iterable[Tuple[int, int, str]] = ()) -> List[Library]:
    """Fill ``libraries`` (in place, also returned) with the NCCL versions read from the files
    mapped by the process (paths) and, failing that, from the core's memory."""
    name = EMBEDDED[0][0]
    paths: List[str] = []
    for p in files:
        p = disk_path(p)
        if p not in paths and not p.startswith(("/dev/", "/memfd:", "/SYSV")):
            paths.append(p)
    if executable:
        exe = disk_path(executable)
        if exe in paths:
            paths.remove(exe)
        paths.insert(0, exe)

    def full_version(lib: Library) -> bool:
        v = lib.version or ""
        return v.count(".") >= 1

    by_path: Dict[str, Library] = {lib.path: lib for lib in libraries}
    known = any(os.path.basename(lib.path).startswith(name) and full_version(lib) for lib in libraries)
    if known:
        return libraries
    few = len(paths) <= FEW_FILES
    budget = [MAX_FILE_BYTES_TOTAL]
    kept = KeptVersions()
    found = False
    for p in paths:
        base = os.path.basename(p)
        is_nccl = base.startswith(name)
        if not (few or is_nccl or p == (executable and disk_path(executable)) or _CANDIDATE.search(base)):
            continue
        if budget[0] <= 0 or not os.path.isfile(p):
            continue
        key = kept.key(p)
        if key is not None and key in kept.table:
            v = kept.table[key] or None
        else:
            v = version_in_file(p, budget)
            if budget[0] > 0:  # a scan the budget cut short says nothing of the file's end
                kept.put(key, v)
        if not v:
            continue
        found = True
        if is_nccl:
            lib = by_path.get(p)
            if lib is None:
                lib = Library(path=p)
                libraries.append(lib)
            lib.version = v  # the library's own string: more precise than its soname
        else:
            libraries.append(Library(path=static_path(p, name), version=v))
    kept.save()
    if not found and core:
        hit = version_in_core(core, mappings)
        if hit:
            v, where = hit
            if os.path.basename(where).startswith(name) and where in by_path:
                by_path[where].version = v
            else:
                libraries.append(Library(path=static_path(where, name), version=v))
    return drop_shadowed(libraries)


def mentions_nccl(proc: Process) -> bool:
    """Only a process with an NCCL frame is worth a scan (the version conditions are on NCCL)."""
    for t in proc.threads:
        for f in t.all_frames():
            if f.function and "nccl" in f.function.lower():
                return True
    return False
