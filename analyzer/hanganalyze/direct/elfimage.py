"""One ELF file on disk, read lazily through mmap: segments, sections, build-id, symbols.

Only what the stacks need is ever decoded: the symbol table is sorted by address once per file
(a C-speed ``array`` sort, names decoded only for the symbols that are hit), a name is found
through ``.gnu.hash``, and unwind tables are left to ``cfi.py``.  Little-endian ELF64 only
(x86-64); anything else is ``DirectUnsupported``.
"""

from __future__ import annotations

import array
import bisect
import mmap
import os
import struct
from typing import BinaryIO, Callable, Dict, List, Optional, Sequence, Tuple

from hanganalyze import datapaths, elf
from hanganalyze.direct import DirectUnsupported

EM_X86_64 = elf.EM_X86_64
STT_OBJECT, STT_FUNC, STT_GNU_IFUNC = 1, 2, 10
SHN_UNDEF = 0
DEBUG_ROOT = "/usr/lib/debug"
#: Symbols of a code address, in gdb's order of preference at one address (functions first).
_CODE_TYPES = (STT_FUNC, STT_GNU_IFUNC, 0)  # 0 = NOTYPE (assembler labels, e.g. _start)


#: A PT_LOAD program header (offset, vaddr, filesz, memsz, flags) and a section header (name, type,
#: addr, offset, size, link, entsize): the one ELF reader's records.
Segment = elf.Phdr
Section = elf.Shdr


class SymbolTable:
    """Address-sorted view of one ``.symtab``/``.dynsym``: parallel arrays, names decoded on use."""

    def __init__(self, img: ElfImage, sec: Section, strsec: Section):
        self.img = img
        self.strsec = strsec
        n = sec.size // 24
        raw = memoryview(img.data)[sec.offset:sec.offset + n * 24]
        if len(raw) != n * 24:
            raise DirectUnsupported("%s: symbol table beyond the end of the file" % img.path)
        words = raw.cast("B").cast("Q")
        self.words = words
        self.n = n
        self.addrs: Sequence[int]
        self.index: Sequence[int]
        cached = _load_sorted(img, sec, n)
        if cached is not None:
            self.addrs, self.index = cached
            return
        values = array.array("Q", words[1::3])
        order = sorted(range(n), key=values.__getitem__)
        self.addrs = array.array("Q", [values[i] for i in order])
        self.index = array.array("I", order)
        _store_sorted(img, sec, self.addrs, self.index)

    def entry(self, i: int) -> Tuple[int, int, int, int, int]:
        """(name offset, type, bind, shndx, size) of symbol i."""
        w0 = self.words[3 * i]
        info = (w0 >> 32) & 0xFF
        return w0 & 0xFFFFFFFF, info & 0xF, info >> 4, (w0 >> 48) & 0xFFFF, self.words[3 * i + 2]

    def name(self, name_off: int) -> str:
        return self.img.cstring(self.strsec.offset + name_off, self.strsec.offset + self.strsec.size)

    def lookup(self, vaddr: int, types=_CODE_TYPES) -> Optional[Tuple[str, int, int]]:
        """(name, start, size) of the symbol of these types that starts nearest below ``vaddr``.

        As gdb's minimal symbols: a sized symbol that ends before ``vaddr`` answers nothing ("??"),
        an unsized one (an assembler label) covers everything up to the next symbol; of several
        names at one address, functions before labels, global before weak before local."""
        k = bisect.bisect_right(self.addrs, vaddr) - 1
        scanned = 0
        while k >= 0 and scanned < 256:
            start = self.addrs[k]
            if start == 0:
                return None
            cands = []
            while k >= 0 and self.addrs[k] == start and scanned < 256:
                noff, typ, bind, shndx, size = self.entry(self.index[k])
                scanned += 1
                k -= 1
                if shndx != SHN_UNDEF and typ in types:
                    cands.append((noff, typ, bind, size))
            if cands:
                best = min(cands, key=lambda c: self._rank(c, types))
                if best[3] and vaddr >= start + best[3]:
                    return None
                return self.name(best[0]), start, best[3]
        return None

    def _rank(self, cand, types) -> tuple:
        """Which of several names at one address to show: sized functions, then exported names
        without a symbol version (``clock_nanosleep`` over ``__clock_nanosleep_2`` or
        ``clock_nanosleep@GLIBC_2.2.5``), then the shortest."""
        noff, typ, bind, size = cand
        name = self.name(noff)
        return (types.index(typ), 0 if size else 1, "@" in name, {1: 0, 2: 1}.get(bind, 2), len(name), name)

    def find(self, name: str) -> Optional[int]:
        """Address of a defined symbol by name: a linear scan (only for the few CPython names)."""
        want = name.encode()
        data, base, end = self.img.data, self.strsec.offset, self.strsec.offset + self.strsec.size
        for i in range(self.n):
            w0 = self.words[3 * i]
            if (w0 >> 48) & 0xFFFF == SHN_UNDEF:
                continue
            off = base + (w0 & 0xFFFFFFFF)
            if data[off:off + len(want) + 1] == want + b"\0" and off < end:
                return self.words[3 * i + 1]
        return None


#: Tables this large are sorted once per build and kept: reading the kept order back is far cheaper
#: than sorting libtorch_cpu.so's symbols again.
CACHE_MIN_SYMBOLS = 20000


def cache_dir() -> Optional[str]:
    """Where sorted symbol tables are kept (``datapaths.cache_dir``'s ``symbols``)."""
    d = datapaths.cache_dir("symbols")
    return None if d is None else str(d)


def _cache_path(img: ElfImage, sec: Section, n: int) -> Optional[str]:
    d = cache_dir()
    bid = img.build_id
    if d is None or not bid or n < CACHE_MIN_SYMBOLS:
        return None
    return os.path.join(d, "%s-%x-%d.sorted" % (bid, sec.offset, n))


def _load_sorted(img: ElfImage, sec: Section, n: int) -> Optional[Tuple[Sequence[int], Sequence[int]]]:
    """The address order of a symbol table, kept by build-id (a file's build-id names its bytes;
    the section offset and count guard against a debug file sharing it).  Mapped, not read: a
    lookup touches the few pages its binary search visits, where reading libtorch_cuda.so's
    tables whole cost a warm GPU-rank sample ~9 ms (issue 21)."""
    path = _cache_path(img, sec, n)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size != 12 * n:
                return None  # cut short (a full disk) or another layout: sort again
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    view = memoryview(mm)
    return view[:8 * n].cast("Q"), view[8 * n:12 * n].cast("I")


def store_cached(path: Optional[str], write: Callable[[BinaryIO], None]) -> None:
    """Write a cache file whole or not at all: into a temporary file of its own (several inputs
    of one run are read by threads of one process, which may store the same file at once), then
    renamed over ``path``.  A read-only home costs only the work again next time."""
    if path is None:
        return
    import tempfile  # only on a cache miss: its imports cost every warm run ~8 ms

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def _store_sorted(img: ElfImage, sec: Section, addrs: array.array, index: array.array) -> None:
    def write(f: BinaryIO) -> None:
        addrs.tofile(f)
        index.tofile(f)

    store_cached(_cache_path(img, sec, len(addrs)), write)


class ElfImage:
    """An ELF file mapped read-only.  Opened once per path per run (``open_image``)."""

    def __init__(self, path: str, data: Optional[bytes] = None):
        """``data``: the image's bytes where no file holds it (the kernel's vDSO, read from the
        process or the core); ``path`` then only names it."""
        self.path = path
        if data is not None:
            if len(data) < 64:
                raise DirectUnsupported("%s: not an ELF image" % path)
            self.data = data
        else:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < 64:
                    raise DirectUnsupported("%s: not an ELF file" % path)
                self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data = self.data

        def read(off: int, n: int) -> bytes:
            return data[off:off + n]

        try:
            hdr = elf.parse_header(data[:64])
        except elf.ElfError:
            hdr = None
        if hdr is None or hdr.bits != 64 or not hdr.little:
            raise DirectUnsupported("%s: not a little-endian ELF64 file" % path)
        if hdr.machine != EM_X86_64:
            raise DirectUnsupported("%s: not x86-64 (machine %d)" % (path, hdr.machine))
        self.e_type = hdr.type
        phdrs = elf.read_phdrs(hdr, read)
        self.segments: List[Segment] = [p for p in phdrs if p.type == elf.PT_LOAD]
        self.notes: List[Tuple[int, int]] = [(p.offset, p.filesz) for p in phdrs if p.type == elf.PT_NOTE]
        self._hdr = hdr
        self._section_list: Optional[List[Section]] = None  # read on first use (``section_list``)
        self._sections: Dict[str, Section] = {}
        self._symtab: Optional[SymbolTable] = None
        self._symtab_done = False
        self._dynsym: Optional[SymbolTable] = None
        self._dynsym_done = False
        self._build_id: Optional[str] = None
        self._debug: Optional[ElfImage] = None
        self._debug_done = False

    # -------------------------------------------------------------------------------- basics

    @property
    def section_list(self) -> List[Section]:
        """The section headers, read on first use: most mapped libraries of a process have no frame
        on any stack and need only their program headers (start-up time, issue 21)."""
        if self._section_list is None:
            data = self.data
            self._section_list = elf.read_shdrs(self._hdr, lambda off, n: data[off:off + n])
            for sec in self._section_list:
                self._sections.setdefault(sec.name, sec)
        return self._section_list

    @property
    def sections(self) -> Dict[str, Section]:
        if self._section_list is None:
            self.section_list  # noqa: B018 - fills _sections
        return self._sections

    def cstring(self, off: int, end: int) -> str:
        stop = self.data.find(b"\0", off, min(end, off + 65536))
        if stop < 0:
            stop = min(end, off + 65536)
        return self.data[off:stop].decode("utf-8", "replace")

    @property
    def first_vaddr(self) -> int:
        """Link-time address of the lowest PT_LOAD page (0 for shared objects and PIEs)."""
        return min((s.vaddr - s.offset for s in self.segments), default=0)

    def section_data(self, name: str) -> Optional[Tuple[int, memoryview]]:
        """(link-time address, bytes) of an allocated section, None when absent or not in the file."""
        s = self.sections.get(name)
        if s is None or s.type == 8 or s.offset + s.size > len(self.data):  # SHT_NOBITS
            return None
        return s.addr, memoryview(self.data)[s.offset:s.offset + s.size]

    def read_vaddr(self, vaddr: int, size: int) -> Optional[bytes]:
        """File bytes at a link-time address (code and read-only data: what cores leave out)."""
        for s in self.segments:
            if s.vaddr <= vaddr and vaddr + size <= s.vaddr + s.filesz:
                off = s.offset + vaddr - s.vaddr
                return bytes(self.data[off:off + size])
        return None

    @property
    def has_dwarf(self) -> bool:
        return ".debug_info" in self.sections and ".debug_line" in self.sections

    @property
    def build_id(self) -> Optional[str]:
        if self._build_id is None:
            for off, size in self.notes:
                self._build_id = elf.build_id_from_notes(self.data[off:off + size])
                if self._build_id:
                    break
        return self._build_id

    @property
    def debuglink(self) -> Optional[str]:
        sec = self.sections.get(".gnu_debuglink")
        if sec is None:
            return None
        return self.cstring(sec.offset, sec.offset + sec.size) or None

    def debug_image(self) -> Optional[ElfImage]:
        """The separate debug file of a stripped file (``/usr/lib/debug/.build-id/xx/rest.debug``,
        or the ``.gnu_debuglink`` name next to it or under ``/usr/lib/debug``), as gdb finds it;
        None when there is none or it belongs to another build."""
        if self._debug_done:
            return self._debug
        self._debug_done = True
        cands = []
        bid = self.build_id
        if bid and len(bid) > 2:
            cands.append(os.path.join(DEBUG_ROOT, ".build-id", bid[:2], bid[2:] + ".debug"))
        link = self.debuglink
        if link and "/" not in link:
            d = os.path.dirname(os.path.realpath(self.path))
            cands += [os.path.join(d, link), os.path.join(d, ".debug", link), DEBUG_ROOT + os.path.join(d, link)]
        for c in cands:
            if c == self.path or not os.path.isfile(c):
                continue
            img = open_image(c)
            if img is not None and (not bid or img.build_id in (None, bid)):
                self._debug = img
                break
        return self._debug

    # ------------------------------------------------------------------------------- symbols
    def _table(self, name: str) -> Optional[SymbolTable]:
        s = self.sections.get(name)
        if s is None or not s.size or s.link >= len(self.section_list):
            return None
        return SymbolTable(self, s, self.section_list[s.link])

    @property
    def symtab(self) -> Optional[SymbolTable]:
        if not self._symtab_done:
            self._symtab_done = True
            self._symtab = self._table(".symtab")
        return self._symtab

    @property
    def dynsym(self) -> Optional[SymbolTable]:
        if not self._dynsym_done:
            self._dynsym_done = True
            self._dynsym = self._table(".dynsym")
        return self._dynsym

    def plt_name(self, vaddr: int) -> Optional[Tuple[str, int, int]]:
        """``name@plt`` for an address in a PLT stub (``.plt.sec``, or ``.plt`` after its header), as
        gdb names it: the stub's ``.rela.plt`` entry names the function it jumps to.  No symbol covers
        a stub; the nearest one below is ``_init``, which is not where the thread is."""
        for name, first in ((".plt.sec", 0), (".plt", 1)):
            sec = self.sections.get(name)
            if sec is None or not sec.addr <= vaddr < sec.addr + sec.size:
                continue
            idx = (vaddr - sec.addr) // 16 - first
            rela = self.sections.get(".rela.plt")
            if (idx < 0 or rela is None or rela.type == 8  # SHT_NOBITS: a separate debug file's copy
                    or (idx + 1) * 24 > rela.size or rela.offset + rela.size > len(self.data)):
                return None
            info = struct.unpack_from("<Q", self.data, rela.offset + idx * 24 + 8)[0]
            table = self._table(self.section_list[rela.link].name) if rela.link < len(self.section_list) else None
            if not info >> 32 or table is None or info >> 32 >= table.n:
                return None  # an IRELATIVE slot (no symbol), or no symbol table
            return table.name(table.entry(info >> 32)[0]) + "@plt", sec.addr + (idx + first) * 16, 16
        return None

    def function_at(self, vaddr: int) -> Optional[Tuple[str, int, int]]:
        """Symbol covering a code address: ``.symtab`` when present (static functions too), else
        ``.dynsym`` (what a stripped library still exports), as gdb's minimal symbols do; a PLT
        stub by the function it calls (``plt_name``)."""
        plt = self.plt_name(vaddr)
        if plt is not None:
            return plt
        for table in (self.symtab, self.dynsym):
            if table is not None:
                hit = table.lookup(vaddr)
                if hit is not None:
                    return hit
                if table is self.symtab:
                    continue
        return None

    def data_symbol_at(self, vaddr: int) -> Optional[Tuple[str, int, int]]:
        for table in (self.symtab, self.dynsym):
            if table is not None:
                hit = table.lookup(vaddr, types=(STT_OBJECT, 0))
                if hit is not None:
                    return hit
        return None

    def symbol_address(self, name: str) -> Optional[int]:
        """Link-time address of a defined symbol: ``.gnu.hash`` of ``.dynsym`` first (O(1)), then a
        scan of ``.symtab`` (CPython's runtime is not always exported)."""
        hit = self._gnu_hash_lookup(name)
        if hit is not None:
            return hit
        table = self.symtab
        return table.find(name) if table is not None else None

    def _gnu_hash_lookup(self, name: str) -> Optional[int]:
        gh = self.sections.get(".gnu.hash")
        dyn = self.dynsym
        if gh is None or dyn is None:
            return None
        d, o = self.data, gh.offset
        try:
            nbuckets, symoffset, bloom_size, _shift = struct.unpack_from("<IIII", d, o)
            h = 5381
            for c in name.encode():
                h = (h * 33 + c) & 0xFFFFFFFF
            buckets = o + 16 + bloom_size * 8
            chain = buckets + nbuckets * 4
            i = struct.unpack_from("<I", d, buckets + (h % nbuckets) * 4)[0]
            if i < symoffset:
                return None
            while True:
                ch = struct.unpack_from("<I", d, chain + (i - symoffset) * 4)[0]
                if (ch | 1) == (h | 1):
                    noff, _t, _b, shndx, _s = dyn.entry(i)
                    if shndx != SHN_UNDEF and dyn.name(noff) == name:
                        return dyn.words[3 * i + 1]
                if ch & 1:
                    return None
                i += 1
        except (struct.error, ZeroDivisionError, IndexError):
            return None


_IMAGES: Dict[Tuple[str, int, int], Optional[ElfImage]] = {}


def open_image(path: str) -> Optional[ElfImage]:
    """The image of a file, shared by every reader of this run; None when it cannot be read
    (deleted, not ELF, another architecture)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_ino, int(st.st_mtime))
    if key not in _IMAGES:
        try:
            _IMAGES[key] = ElfImage(path)
        except (OSError, ValueError, struct.error, DirectUnsupported):
            _IMAGES[key] = None
    return _IMAGES[key]
