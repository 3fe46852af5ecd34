"""Reading CPython objects out of raw inferior memory: str, bytes, int, dict, instance attributes.

Everything goes through ``Memory.read`` (one ``Inferior.read_memory`` per struct, unpacked with
``struct``), never through gdb.Value: typed access is far slower and needs DWARF that distro
builds do not ship.  Every read of an untrusted pointer may fail or return garbage, so callers
get ``ReadError`` (never a gdb exception) and every loop is capped.
"""

import struct
from typing import Callable, Dict, List, Optional, Tuple

from .tables import TPFLAGS_INLINE_VALUES, TPFLAGS_MANAGED_DICT, Features

_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")

MAX_STR = 4096
MAX_DICT_ENTRIES = 1 << 16
USER_SPACE_END = 1 << 47


class ReadError(Exception):
    """An address could not be read (unmapped, not in the core, or obviously not a pointer)."""


PAGE = 4096


class Memory:
    """Bounds-checked reads with a page cache and a counter.

    Small reads are served from whole 4 KiB pages read once: 3.11+ frames sit next to each
    other in the thread's data stack, so one page read answers several frame reads.  A Memory
    lives for one walk of a stopped process (or a core), so the cache never goes stale."""

    def __init__(self, read_fn: Callable[[int, int], object]):
        self._read_fn = read_fn
        self._pages: Dict[int, Optional[bytes]] = {}
        self.reads = 0

    def _raw(self, addr: int, size: int) -> bytes:
        self.reads += 1
        try:
            return bytes(self._read_fn(addr, size))
        except Exception as e:  # noqa: BLE001 - gdb.MemoryError, gdb.error, ValueError...
            raise ReadError("cannot read 0x%x: %s" % (addr, e)) from None

    def read(self, addr: int, size: int) -> bytes:
        if addr < 4096 or addr + size > USER_SPACE_END or size < 0 or size > (1 << 24):
            raise ReadError("bad address 0x%x" % addr)
        base = addr & ~(PAGE - 1)
        if addr + size > base + PAGE:
            return self._raw(addr, size)
        page = self._pages.get(base, b"")
        if page == b"":
            try:
                page = self._raw(base, PAGE)
            except ReadError:
                page = None  # partly readable (e.g. a core without this page): read exactly
            self._pages[base] = page
        if page is None:
            return self._raw(addr, size)
        off = addr - base
        return page[off:off + size]

    def u64(self, addr: int) -> int:
        return _U64.unpack(self.read(addr, 8))[0]

    def u32(self, addr: int) -> int:
        return _U32.unpack(self.read(addr, 4))[0]

    def i32(self, addr: int) -> int:
        return _I32.unpack(self.read(addr, 4))[0]


def u64_at(buf: bytes, off: int) -> int:
    return _U64.unpack_from(buf, off)[0]


def i64_at(buf: bytes, off: int) -> int:
    return _I64.unpack_from(buf, off)[0]


def i32_at(buf: bytes, off: int) -> int:
    return _I32.unpack_from(buf, off)[0]


class Objects:
    """Object readers for one process: its offsets table (``t``) and layout families (``features``)."""

    def __init__(self, mem: Memory, t: Dict[str, int], features: Features):
        self.mem = mem
        self.t = t
        self.features = features
        self._str_cache: Dict[int, Optional[str]] = {}
        self._type_cache: Dict[int, Tuple[int, int, int, int]] = {}

    # --- str / bytes / int -------------------------------------------------------------------
    def str(self, addr: int) -> Optional[str]:
        """A ``str`` object's text (cached by address: names and filenames are shared)."""
        if addr in self._str_cache:
            return self._str_cache[addr]
        try:
            text = self._read_str(addr)
        except (ReadError, struct.error, UnicodeDecodeError):
            text = None
        self._str_cache[addr] = text
        return text

    def _read_str(self, addr: int) -> Optional[str]:
        t = self.t
        head_size = t["str.ascii_size"]
        try:
            buf = self.mem.read(addr, head_size + 64)  # header + a short name in one read
        except ReadError:
            buf = self.mem.read(addr, head_size)
        length = i64_at(buf, t["str.length"])
        state = _U32.unpack_from(buf, t["str.state"])[0] >> t.get("str.kind_shift", 2)
        kind = state & 7
        compact = (state >> 3) & 1
        ascii_ = (state >> 4) & 1
        if length < 0 or length > MAX_STR or kind not in (1, 2, 4):
            return None
        if compact and ascii_:
            if head_size + length <= len(buf):
                data = buf[head_size:head_size + length]
            else:
                data = self.mem.read(addr + head_size, length)
            return data.decode("latin-1")
        if compact:
            data_at = addr + t.get("str.compact_size", head_size + (24 if head_size == 48 else 16))
        else:  # legacy (non-compact) string: data pointer after the compact header
            data_at = self.mem.u64(addr + t.get("str.compact_size", 72))
        data = self.mem.read(data_at, length * kind)
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return data.decode(codec, "replace")

    def bytes(self, addr: int, limit: int = 1 << 20) -> bytes:
        t = self.t
        size = i64_at(self.mem.read(addr + t["bytes.ob_size"], 8), 0)
        if size < 0 or size > limit:
            raise ReadError("implausible bytes size %d at 0x%x" % (size, addr))
        return self.mem.read(addr + t["bytes.ob_sval"], size) if size else b""

    def int(self, addr: int) -> Optional[int]:
        """A small-to-medium Python ``int`` (at most 4 digits: thread idents, counts)."""
        t = self.t
        buf = self.mem.read(addr + t["long.size"], 8 + 4 * 4)
        tag = i64_at(buf, 0)
        if self.features.long == "lv_tag":
            ndigits, negative = tag >> 3, (tag & 3) == 2
        else:
            ndigits, negative = abs(tag), tag < 0
        if ndigits > 4:
            return None
        val = 0
        for i in range(ndigits):
            val |= (_U32.unpack_from(buf, 8 + 4 * i)[0] & 0x3FFFFFFF) << (30 * i)
        return -val if negative else val

    # --- types ---------------------------------------------------------------------------------
    def type_of(self, addr: int) -> int:
        return self.mem.u64(addr + self.t["ob.type"])

    def type_info(self, tp: int) -> Tuple[int, int, int, int]:
        """(tp_flags, tp_basicsize, tp_dictoffset, ht_cached_keys) of a type object."""
        hit = self._type_cache.get(tp)
        if hit is not None:
            return hit
        t = self.t
        flags = self.mem.u64(tp + t["tp.flags"])
        basic = i64_at(self.mem.read(tp + t.get("tp.basicsize", 32), 8), 0)
        dictoff = i64_at(self.mem.read(tp + t.get("tp.dictoffset", 288), 8), 0)
        cached = 0
        if "ht.cached_keys" in t and flags & (1 << 9):  # Py_TPFLAGS_HEAPTYPE
            cached = self.mem.u64(tp + t["ht.cached_keys"])
        info = (flags, basic, dictoff, cached)
        self._type_cache[tp] = info
        return info

    def type_name(self, tp: int) -> Optional[str]:
        try:
            name_ptr = self.mem.u64(tp + self.t["tp.name"])
            raw = self.mem.read(name_ptr, 64)
        except ReadError:
            return None
        return raw.split(b"\0", 1)[0].decode("latin-1")

    # --- dicts ---------------------------------------------------------------------------------
    def _keys_entries(self, keys: int) -> List[Tuple[int, int]]:
        """(key, value-in-entry) for every used slot of a PyDictKeysObject, in entry order."""
        t = self.t
        if self.features.dict_keys == "dk_size":
            head = self.mem.read(keys, t["dk.indices"])
            size = i64_at(head, t["dk.size"])
            n = i64_at(head, t["dk.nentries"])
            if size <= 0 or size > MAX_DICT_ENTRIES * 2 or n < 0 or n > size:
                raise ReadError("implausible dict keys at 0x%x" % keys)
            width = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
            entry_size, key_off = 24, 8
            start = keys + t["dk.indices"] + size * width
        else:
            head = self.mem.read(keys, t["dk.indices"])
            log2_size = head[t["dk.log2_size"]]
            log2_index_bytes = head[t["dk.log2_index_bytes"]]
            kind = head[t["dk.kind"]]
            n = i64_at(head, t["dk.nentries"])
            if log2_size > 20 or log2_index_bytes > 24 or n < 0 or n > (1 << log2_size):
                raise ReadError("implausible dict keys at 0x%x" % keys)
            entry_size, key_off = (24, 8) if kind == 0 else (16, 0)
            start = keys + t["dk.indices"] + (1 << log2_index_bytes)
        if n == 0:
            return []
        raw = self.mem.read(start, n * entry_size)
        out = []
        for i in range(n):
            base = i * entry_size
            out.append((u64_at(raw, base + key_off), u64_at(raw, base + key_off + 8)))
        return out

    def _split_values(self, values: int, n: int) -> List[int]:
        if n == 0:
            return []
        raw = self.mem.read(values + self.t.get("dv.values", 0), 8 * n)
        return [u64_at(raw, 8 * i) for i in range(n)]

    def dict_items(self, addr: int) -> List[Tuple[int, int]]:
        """(key, value) object pointers of a dict (combined or split table); NULL slots skipped."""
        t = self.t
        head = self.mem.read(addr, t["dict.ma_values"] + 8)
        keys = u64_at(head, t["dict.ma_keys"])
        values = u64_at(head, t["dict.ma_values"])
        entries = self._keys_entries(keys)
        if values:
            vals = self._split_values(values, len(entries))
            entries = [(k, v) for (k, _), v in zip(entries, vals)]
        return [(k, v) for k, v in entries if k and v]

    def dict_get_str(self, addr: int, name: str) -> Optional[int]:
        for k, v in self.dict_items(addr):
            if self.str(k) == name:
                return v
        return None

    def _instance_storage(self, obj: int) -> Tuple[int, int, int]:
        """Where an instance keeps its attributes, however the version stores them: (its dict,
        or 0; the shared keys of its split values, or 0; those values, or 0).  tp_dictoffset
        (3.8-3.10 and unmanaged types), 3.11 values before the object, 3.12 a tagged pointer,
        3.13+ values inline after the object."""
        flags, basic, dictoff, cached = self.type_info(self.type_of(obj))
        kind = self.features.instance_dict
        if kind != "dictoffset" and flags & TPFLAGS_MANAGED_DICT:
            slot = self.mem.u64(obj + self.t.get("ob.managed_dict", -24))
            if kind == "tagged_values":
                return (0, cached, slot + 1) if slot & 1 else (slot, 0, 0)
            if slot:
                return slot, 0, 0
            if kind == "preheader_values":
                return 0, cached, self.mem.u64(obj - 32)
            if flags & TPFLAGS_INLINE_VALUES and self.mem.read(obj + basic, 4)[3]:  # PyDictValues.valid
                return 0, cached, obj + basic
            return 0, 0, 0
        if dictoff > 0:
            return self.mem.u64(obj + dictoff), 0, 0
        return 0, 0, 0

    def instance_attr(self, obj: int, name: str) -> Optional[int]:
        """The object stored under ``name`` in an instance's ``__dict__`` (``_instance_storage``)."""
        d, keys, values = self._instance_storage(obj)
        if d:
            return self.dict_get_str(d, name)
        return self._cached_keys_get(keys, values, name)

    def _cached_keys_get(self, keys: int, values: int, name: str) -> Optional[int]:
        if not keys or not values:
            return None
        entries = self._keys_entries(keys)
        for i, (k, _) in enumerate(entries):
            if self.str(k) == name:
                return self._split_values(values, i + 1)[i] or None
        return None

    # --- sequences and whole instance dicts (naming locks by the attribute that holds them) ------
    def tuple_items(self, addr: int, limit: int = 64) -> List[int]:
        """Item pointers of a tuple (the first ``limit``): ob_size @16, items inline @24."""
        t = self.t
        size = i64_at(self.mem.read(addr + t.get("var.ob_size", 16), 8), 0)
        if size < 0 or size > 1 << 24:
            raise ReadError("implausible tuple size %d at 0x%x" % (size, addr))
        n = min(size, limit)
        raw = self.mem.read(addr + t.get("tuple.ob_item", 24), 8 * n) if n else b""
        return [u64_at(raw, 8 * i) for i in range(n)]

    def list_items(self, addr: int, limit: int = 64) -> List[int]:
        """Item pointers of a list (the first ``limit``): ob_size @16, ``ob_item`` array @24."""
        t = self.t
        head = self.mem.read(addr + t.get("var.ob_size", 16), 16)
        size, items = i64_at(head, 0), u64_at(head, t.get("list.ob_item", 24) - t.get("var.ob_size", 16))
        if size < 0 or size > 1 << 28:
            raise ReadError("implausible list size %d at 0x%x" % (size, addr))
        n = min(size, limit)
        if not n or not items:
            return []
        raw = self.mem.read(items, 8 * n)
        return [u64_at(raw, 8 * i) for i in range(n)]

    def instance_items(self, obj: int, limit: int = 64) -> List[Tuple[int, int]]:
        """(key, value) pointers of an instance's attributes (``_instance_storage``), at most
        ``limit``; [] when it has none."""
        d, keys, values = self._instance_storage(obj)
        if d:
            return self.dict_items(d)[:limit]
        if not keys or not values:
            return []
        names = [k for k, _ in self._keys_entries(keys)][:limit]
        vals = self._split_values(values, len(names))
        return [(k, v) for k, v in zip(names, vals) if k and v]
