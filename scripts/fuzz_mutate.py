"""The fuzzing campaign's mutators (scripts/fuzz.py): byte patches of a real core's ELF header,
program headers, notes, thread stacks and interpreter memory, and mutations of pasted text, JSON
trees and signature strings.  Kept apart from the campaign's runner so each holds one concern: what
an input becomes, and how a run of it is judged."""

from __future__ import annotations

import contextlib
import copy
import os
import random
import struct
from pathlib import Path
from typing import Any, List, Optional, Tuple

PHDR = struct.Struct("<IIQQQQQQ")


def interesting(rng: random.Random, orig: int, bits: int) -> int:
    top = (1 << bits) - 1
    choice = rng.randrange(10)
    if choice == 0:
        return 0
    if choice == 1:
        return top
    if choice == 2:
        return top >> 1
    if choice == 3:
        return (orig + rng.choice((1, -1, 8, -8, 4096, -4096))) & top
    if choice == 4:
        return (orig * 2) & top
    if choice == 5:
        return orig ^ (1 << rng.randrange(bits))
    if choice == 6:
        return rng.choice((1, 2, 3, 7, 56, 64, 4095, 4096, 65535)) & top
    return rng.getrandbits(bits)


# ------------------------------------------------------------------------------------ cores


class Core:
    """A real core on disk, its program headers and notes (offsets), to mutate in place and restore."""

    def __init__(self, path: Path):
        self.path = path
        with open(path, "rb") as f:
            self.head = f.read(64)
            phoff = struct.unpack_from("<Q", self.head, 32)[0]
            phentsize, phnum = struct.unpack_from("<HH", self.head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            self.phoff, self.phentsize = phoff, phentsize
            self.phdrs = [PHDR.unpack_from(table, k * phentsize) for k in range(phnum)]
            self.notes: List[Tuple[int, bytes, int, int, int]] = []  # (offset, name, type, desc off, descsz)
            for p_type, _fl, off, _va, _pa, filesz, _ms, _al in self.phdrs:
                if p_type != 4:
                    continue
                f.seek(off)
                data = f.read(filesz)
                i = 0
                while i + 12 <= len(data):
                    namesz, descsz, ntype = struct.unpack_from("<III", data, i)
                    name = data[i + 12:i + 12 + namesz].rstrip(b"\0")
                    d = i + 12 + ((namesz + 3) & ~3)
                    self.notes.append((off + i, name, ntype, off + d, descsz))
                    i = d + ((descsz + 3) & ~3)
        self.size = path.stat().st_size
        self.threads = self._threads()

    def note_types(self) -> List[Tuple[bytes, int]]:
        seen: List[Tuple[bytes, int]] = []
        for _o, name, t, _d, _s in self.notes:
            if (name, t) not in seen:
                seen.append((name, t))
        return seen

    def _threads(self) -> List[Tuple[int, int]]:
        """(rsp, rbp) of each NT_PRSTATUS (x86-64 pr_reg at 112: rbp is word 4, rsp word 19)."""
        out = []
        with open(self.path, "rb") as f:
            for _o, name, t, d, s in self.notes:
                if name == b"CORE" and t == 1 and s >= 112 + 27 * 8:
                    f.seek(d + 112)
                    regs = struct.unpack("<27Q", f.read(27 * 8))
                    out.append((regs[19], regs[4]))
        return out

    def file_offset(self, addr: int) -> Optional[Tuple[int, int]]:
        """(file offset of addr, bytes of that segment in the file from there)."""
        for p_type, _fl, off, va, _pa, filesz, _ms, _al in self.phdrs:
            if p_type == 1 and va <= addr < va + filesz:
                return off + (addr - va), filesz - (addr - va)
        return None

    def loads(self, writable_anon: bool = False) -> List[Tuple[int, int, int]]:
        return [(va, off, filesz) for p_type, fl, off, va, _pa, filesz, _ms, _al in self.phdrs
                if p_type == 1 and filesz and (not writable_anon or fl & 2)]


def mutate_core(core: Core, part: str, rng: random.Random, runtime: Optional[int] = None) -> List[Tuple[int, bytes]]:
    """Byte patches (offset, new bytes) for one mutation of `part` of the core."""
    patches: List[Tuple[int, bytes]] = []
    if part == "elf-header":
        fields = [(4, 1), (5, 1), (6, 1), (7, 1), (16, 2), (18, 2), (20, 4), (24, 8), (32, 8), (40, 8), (48, 4),
                  (52, 2), (54, 2), (56, 2), (58, 2), (60, 2), (62, 2)]
        for _ in range(rng.choice((1, 1, 2, 3))):
            off, n = rng.choice(fields)
            orig = int.from_bytes(core.head[off:off + n], "little")
            patches.append((off, interesting(rng, orig, 8 * n).to_bytes(n, "little")))
    elif part == "program-headers":
        fields = [(0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8), (48, 8)]
        for _ in range(rng.choice((1, 1, 2))):
            k = rng.randrange(len(core.phdrs))
            off, n = rng.choice(fields)
            base = core.phoff + k * core.phentsize
            orig = PHDR.pack(*core.phdrs[k])[off:off + n]
            value = interesting(rng, int.from_bytes(orig, "little"), 8 * n)
            if rng.random() < 0.2 and n == 8:
                value = core.size + rng.choice((0, 1, 4096, 1 << 40))
            patches.append((base + off, value.to_bytes(n, "little")))
    elif part == "notes":
        types = core.note_types()
        name, ntype = types[rng.randrange(len(types))]
        cands = [n for n in core.notes if n[1] == name and n[2] == ntype]
        noff, _name, _t, doff, dsz = rng.choice(cands)
        how = rng.randrange(6)
        if how == 0:  # the note header: namesz, descsz, type
            field = rng.choice((0, 4, 8))
            orig = (len(name) + 1, dsz, ntype)[field // 4]
            patches.append((noff + field, interesting(rng, orig, 32).to_bytes(4, "little")))
        elif how == 1 and dsz:  # random bytes in the descriptor
            for _ in range(rng.randrange(1, 9)):
                patches.append((doff + rng.randrange(dsz), bytes([rng.getrandbits(8)])))
        elif how == 2 and dsz >= 8:  # an aligned word of the descriptor to an interesting value
            w = rng.randrange(dsz // 8) * 8
            patches.append((doff + w, interesting(rng, 0, 64).to_bytes(8, "little")))
        elif how == 3 and dsz and ntype == 0x46494C45:  # NT_FILE: count, page size, an entry, a name
            which = rng.randrange(4)
            if which < 2:
                patches.append((doff + 8 * which, interesting(rng, 1, 64).to_bytes(8, "little")))
            elif which == 2 and dsz > 40:
                patches.append((doff + 16 + 8 * rng.randrange(3), interesting(rng, 0, 64).to_bytes(8, "little")))
            else:
                junk = rng.choice((b"\n<script>", b"\0\0\0", b"\xff\xfe", b"../../", b"\x1b[2J", b"%s%n"))
                patches.append((doff + max(16, dsz - rng.randrange(1, min(dsz, 200))), junk))
        elif dsz:  # a run of the descriptor zeroed or filled
            start = rng.randrange(dsz)
            n = min(dsz - start, rng.randrange(1, 64))
            patches.append((doff + start, bytes([rng.choice((0, 0xFF, 0x41))]) * n))
        else:
            patches.append((noff + 4, interesting(rng, 0, 32).to_bytes(4, "little")))
    elif part == "thread-stacks":
        rsp, rbp = rng.choice(core.threads)
        for _ in range(rng.randrange(1, 24)):
            addr = rng.choice((rsp, rbp)) + rng.randrange(-256, 16384) // 8 * 8
            where = core.file_offset(addr)
            if where is None or where[1] < 8:
                continue
            value = rng.choice((0, rng.getrandbits(64), addr, addr + 8, (1 << 64) - 1, rsp, 0x41414141))
            patches.append((where[0], value.to_bytes(8, "little")))
    elif part == "interpreter-memory":
        if runtime is not None and rng.random() < 0.5:
            for _ in range(rng.randrange(1, 32)):
                where = core.file_offset(runtime + rng.randrange(0, 0x10000) // 8 * 8)
                if where and where[1] >= 8:
                    patches.append((where[0], rng.getrandbits(64).to_bytes(8, "little")))
        else:
            segs = core.loads(writable_anon=True)
            for _ in range(rng.randrange(50, 3000)):
                _va, off, filesz = rng.choice(segs)
                patches.append((off + rng.randrange(filesz), bytes([rng.getrandbits(8)])))
    patches = [(o, b) for o, b in patches if 0 <= o and o + len(b) <= core.size]
    return patches or [(rng.randrange(64, 128), bytes([rng.getrandbits(8)]))]


@contextlib.contextmanager
def patched(path: Path, patches: List[Tuple[int, bytes]]):
    """Apply byte patches in place; restore the original bytes afterwards, whatever happens."""
    saved = []
    with open(path, "r+b") as f:
        for off, data in patches:
            f.seek(off)
            saved.append((off, f.read(len(data))))
            f.seek(off)
            f.write(data)
    try:
        yield
    finally:
        with open(path, "r+b") as f:
            for off, data in reversed(saved):
                f.seek(off)
                f.write(data)


def pyruntime_address(core_path: Path) -> Optional[int]:
    """Where ``_PyRuntime`` was in the process (libpython's symbol plus its load base from NT_FILE)."""
    from elftools.elf.elffile import ELFFile

    from hanganalyze.corefile import read_core

    info = read_core(core_path)
    for f in info.files:
        if "libpython" in f.path and os.path.isfile(f.path):
            with open(f.path, "rb") as fh:
                elf = ELFFile(fh)
                for name in (".symtab", ".dynsym"):
                    sec = elf.get_section_by_name(name)
                    if sec is None:
                        continue
                    syms = sec.get_symbol_by_name("_PyRuntime")
                    if syms:
                        first_load = min(s["p_vaddr"] - s["p_offset"] for s in elf.iter_segments()
                                         if s["p_type"] == "PT_LOAD")
                        return f.base - first_load + syms[0]["st_value"]
    return None


# ------------------------------------------------------------------------------------ texts / JSON / YAML


def mutate_text(data: bytes, rng: random.Random, other: bytes) -> bytes:
    lines = data.splitlines(keepends=True) or [data]
    how = rng.randrange(11)
    if how == 0:
        return data[: rng.randrange(len(data) + 1)]
    if how == 1:
        b = bytearray(data)
        for _ in range(rng.randrange(1, 40)):
            if b:
                b[rng.randrange(len(b))] = rng.getrandbits(8)
        return bytes(b)
    if how == 2:
        rng.shuffle(lines)
        return b"".join(lines)
    if how == 3:
        return b"".join(x for x in lines if rng.random() > 0.3)
    if how == 4:
        return b"".join(x * rng.choice((1, 1, 2, 50)) for x in lines)
    if how == 5:
        junk = rng.choice((b"\x1b[31m", b"\0", b"\xff\xfe", "\u202e".encode(), b"\r", b"(" * 5000, b"#" * 20000,
                           b"0x" + b"f" * 40, b" at " * 1000, b"Thread 1 (", b"Traceback (most recent call last):\n"))
        i = rng.randrange(len(data) + 1)
        return data[:i] + junk + data[i:]
    if how == 6:  # splice two samples
        ol = other.splitlines(keepends=True)
        cut = rng.randrange(len(lines) + 1)
        return b"".join(lines[:cut] + ol[rng.randrange(len(ol) + 1):])
    if how == 7:  # numbers to extremes
        import re as _re

        return _re.sub(rb"\d+", lambda m: rng.choice((b"0", b"-1", b"99999999999999999999999", m.group(0))), data)
    if how == 8:  # indentation / quoting as issue templates do
        prefix = rng.choice((b"> ", b"    ", b"\t", b"| ", b"```\n"))
        return b"".join(prefix + x for x in lines)
    if how == 9:
        return (b"\n".join(x.rstrip(b"\n") for x in lines) + b"\n") * rng.randrange(1, 4)
    return data.decode("utf-8", "replace").encode("utf-16") if rng.random() < 0.3 else data.upper()


def random_value(rng: random.Random, depth: int = 0) -> Any:
    k = rng.randrange(14)
    if k == 0:
        return None
    if k == 1:
        return rng.choice((True, False))
    if k == 2:
        return rng.choice((0, -1, 1, 2**63, -(2**63), 2**64 + 1, 10**30))
    if k == 3:
        return rng.choice((1e308, -0.0, 3.5))
    if k == 4:
        return rng.choice(("", "x" * 100000, "<script>alert(1)</script>", "\x1b[2J", "\u202eevil", "../../etc/passwd",
                           "0x" + "f" * 40, "re:(a+)+$", "??", "\ud800".encode("utf-8", "surrogatepass").decode(
                               "utf-8", "replace")))
    if k == 5:
        return []
    if k == 6:
        return {}
    if k == 7 and depth < 3:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(1, 4))]
    if k == 8 and depth < 3:
        return {rng.choice(("kind", "function", "x", "", "frames")): random_value(rng, depth + 1)}
    if k == 9:
        v: Any = []
        for _ in range(rng.choice((50, 500, 900))):
            v = [v]
        return v
    return rng.choice(("native", "python", "SIGABRT", "hang", "mutex", "0x1000", 12345, "main"))


def _nodes(obj: Any, path=()) -> List[tuple]:
    out = [path]
    if len(path) > 30:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_nodes(v, path + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:40]):
            out.extend(_nodes(v, path + (i,)))
    return out


#: Strings a valid signature may well hold: odd patterns the loader must vet and the matcher run.
ODD_STRINGS = ("??", "*", "re:.*", "re:(a|a)*$", "re:(a+)+$", "re:^(?:x|y){1000}$", "lib*.so*", "[", "re:[",
               "main", "pthread_cond_wait", "take_a_then_b", "std::mutex::lock", "\x1b[2J", "<b>x</b>", "",
               "a" * 5000, "re:" + "a?" * 50 + "a" * 50, "0x0", "hang", "crash", "futex_wait")


def mutate_strings(obj: Any, rng: random.Random) -> Any:
    """Only string leaves replaced (types kept): files that may load, with patterns the guards vet."""
    obj = copy.deepcopy(obj)
    paths = [p for p in _nodes(obj) if p]
    for _ in range(rng.randrange(1, 6)):
        if not paths:
            break
        path = rng.choice(paths)
        parent = obj
        for p in path[:-1]:
            parent = parent[p]
        if isinstance(parent[path[-1]], str) and path[-1] not in ("id",):
            parent[path[-1]] = rng.choice(ODD_STRINGS)
    return obj


def mutate_tree(obj: Any, rng: random.Random) -> Any:
    """Structure-aware: a random node replaced, removed, duplicated, or a key added."""
    obj = copy.deepcopy(obj)
    for _ in range(rng.choice((1, 1, 2, 4))):
        nodes = _nodes(obj)
        path = rng.choice(nodes)
        if not path:
            if rng.random() < 0.1:
                obj = random_value(rng)
            continue
        parent = obj
        for p in path[:-1]:
            parent = parent[p]
        key = path[-1]
        how = rng.randrange(4)
        if how == 0 and isinstance(parent, dict):
            del parent[key]
        elif how == 1 and isinstance(parent, list):
            try:
                parent.insert(key, copy.deepcopy(parent[key]))
            except RecursionError:  # a deep nest put there by an earlier round: leave it
                pass
        elif how == 2 and isinstance(parent, dict):
            parent[rng.choice(("extra", "waits", "rank", "dist", "mapped_files", "coredump", "collectives",
                               "job", "label", "python"))] = random_value(rng)
        else:
            parent[key] = random_value(rng)
    return obj
