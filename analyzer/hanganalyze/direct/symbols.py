"""Names and source lines for the code addresses on the stacks, and nothing else.

* Libraries with DWARF (debug builds, pyenv's libpython, our fixtures): binutils' ``addr2line
  -f -i -C`` answers function, file:line and the chain of inlined calls, as gdb shows them, for
  exactly the addresses asked (one process per library, all started at once).  It is the DWARF
  reader every distribution ships; without it, symbol names only.
* Everything else: the ELF symbol table (``elfimage``), demangled by the C++ runtime.

Lookups use ``pc - 1`` for callers (the call instruction, not the one after it: gdb's
``get_frame_address_in_block``), so a call that ends a function or an inlined block is named
after that function and line.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Dict, Iterable, List, Optional, Tuple

from hanganalyze import datapaths
from hanganalyze.cnames import last_group_start
from hanganalyze.direct.demangle import demangle
from hanganalyze.direct.elfimage import store_cached
from hanganalyze.direct.unwind import Module

#: One frame's worth of answer: (function, file, line); a list is an inline chain, innermost first.
Chain = List[Tuple[Optional[str], Optional[str], Optional[int]]]

ADDR2LINE_TIMEOUT = 30.0
_ADDR = re.compile(r"^0x[0-9a-f]+$")
_LTO_PRIV = re.compile(r"\.lto_priv\.\d+$")


def symbolize(requests: Dict[Module, Iterable[int]],
              timeout: float = ADDR2LINE_TIMEOUT) -> Dict[Tuple[str, int], Chain]:
    """``{(module path, link-time address): chain}`` for every requested address."""
    return Symbolizing(requests, timeout).result()


class Symbolizing:
    """The lookups of one run, started at once (the DWARF readers work while the caller walks the
    Python frames) and answered by ``result()``.  DWARF answers are kept per build-id and tool
    (``~/.cache/hanganalyze/lines``): an address of a given build always names the same frames,
    so other ranks and later runs of the same job skip the DWARF reader."""

    def __init__(self, requests: Dict[Module, Iterable[int]], timeout: float = ADDR2LINE_TIMEOUT):
        self.out: Dict[Tuple[str, int], Chain] = {}
        self.timeout = timeout
        self.running: List[Tuple[Module, List[int], Dict[str, list], Optional[str], dict]] = []
        tool = _tool()
        for mod, addrs in requests.items():
            addrs = sorted(set(addrs))
            img = mod.image
            dwarf = None
            if img is not None:
                dwarf = img if img.has_dwarf else img.debug_image()
                dwarf = dwarf if dwarf is not None and dwarf.has_dwarf else None
            if not (tool and dwarf is not None):
                for a in addrs:
                    self.out[(mod.path, a)] = [(_elf_name(mod, a), None, None)]
                continue
            path = _lines_cache(dwarf, tool)
            cached = _load_lines(path)
            missing = [a for a in addrs if "%x" % a not in cached]
            job: dict = {}
            if missing:
                t = threading.Thread(target=_run_tool, args=(tool + ["-e", dwarf.path], missing, timeout, job),
                                     daemon=True)
                t.start()
                job["thread"] = t
            self.running.append((mod, addrs, cached, path, job))

    def result(self) -> Dict[Tuple[str, int], Chain]:
        for mod, addrs, cached, path, job in self.running:
            t = job.get("thread")
            if t is not None:
                t.join(self.timeout + 5)
                fresh = _parse_addr2line(job.get("text", ""))
                if fresh and job.get("complete"):
                    for a, chain in fresh.items():
                        cached["%x" % a] = [list(e) for e in chain]
                    _store_lines(path, cached)
                else:
                    for a, chain in fresh.items():
                        cached.setdefault("%x" % a, [list(e) for e in chain])
            for a in addrs:
                raw = [tuple(e) for e in cached.get("%x" % a) or []] or [(None, None, None)]
                chain = _collapse([(dwarf_style(f), fl, ln) for f, fl, ln in raw])
                name = chain[-1][0]
                if name is None or "@" in name or (chain[-1][1] is None and mod.image.plt_name(a)):
                    # LLVM fell back to the symbol table (which names a PLT stub ``_init``): ours picks
                    # as gdb does
                    name = _elf_name(mod, a)
                name = _LTO_PRIV.sub("", name) if name else name  # LTO's rename: not the DWARF name gdb shows
                self.out[(mod.path, a)] = chain[:-1] + [(name,) + chain[-1][1:]]
        self.running = []
        return self.out


def _run_tool(argv: List[str], addrs: List[int], timeout: float, job: dict) -> None:
    import subprocess  # here: only a cache miss runs addr2line (the import costs a warm run ~5 ms)

    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return
    try:
        text, _ = p.communicate("".join("0x%x\n" % a for a in addrs).encode(), timeout=timeout)
        job["text"] = text.decode("utf-8", "replace")
        job["complete"] = p.returncode == 0
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()


def _lines_cache(img, tool: List[str]) -> Optional[str]:
    d = datapaths.cache_dir("lines")
    bid = img.build_id
    if d is None or not bid:
        return None
    kind = "llvm" if "llvm" in os.path.basename(tool[0]) else "binutils"
    return os.path.join(str(d), "%s-%s.json" % (bid, kind))


def _load_lines(path: Optional[str]) -> Dict[str, list]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store_lines(path: Optional[str], data: Dict[str, list]) -> None:
    store_cached(path, lambda f: f.write(json.dumps(data).encode("utf-8")))


def _tool() -> Optional[List[str]]:
    """LLVM's addr2line (DWARF 5 file names right, paths relative to the build directory as gdb
    shows them), else binutils' (2.40 names the wrong file for some DWARF 5 lines)."""
    import shutil  # here: its imports (bz2, lzma) cost a warm run that never asks a few ms

    for name in ("llvm-addr2line",) + tuple("llvm-addr2line-%d" % v for v in range(20, 10, -1)):
        path = shutil.which(name)
        if path:
            return [path, "-a", "-f", "-i", "-C", "--relativenames"]
    path = shutil.which("addr2line")
    return [path, "-a", "-f", "-i", "-C"] if path else None


def _collapse(chain: Chain) -> Chain:
    """GCC nests an inlined copy of a function inside itself for some lexical blocks; gdb shows
    both frames at the inner one's line (the outer one's own line is the nested call site)."""
    out: Chain = []
    for entry in chain:
        if out and entry[0] is not None and entry[0] == out[-1][0]:
            entry = out[-1]
        out.append(entry)
    return out


def dwarf_style(name: Optional[str]) -> Optional[str]:
    """A demangled C++ name as gdb names a function it has DWARF for: no return type, no
    parameter list, no trailing qualifiers (``void std::__invoke_impl<void>(std::__invoke_other)``
    -> ``std::__invoke_impl<void>``; ``Foo::bar() const`` -> ``Foo::bar``).  C names pass through."""
    if not name or not name.endswith((")", "const", "volatile", "&")):
        return name
    n = name
    for q in (" &&", " &", " volatile", " const"):
        while n.endswith(q):
            n = n[: -len(q)]
    i = last_group_start(n)
    if not i or n[:i].endswith("operator"):
        return name
    head = n[:i]
    # the return type of a template function: text before the last space outside <...>/(...)
    depth, cut = 0, -1
    for k, c in enumerate(head):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == " " and depth == 0 and not head[:k].endswith(("operator", ",")):
            cut = k
    return head[cut + 1:] if cut >= 0 else head


def _elf_name(mod: Module, vaddr: int) -> Optional[str]:
    if mod.image is None:
        return None
    dbg = mod.image.debug_image()
    hit = (dbg.function_at(vaddr) if dbg is not None else None) or mod.image.function_at(vaddr)
    if hit and mod.path == "[vdso]" and hit[0].startswith("__vdso_"):
        return hit[0][len("__vdso_"):]  # the name callers use and gdb shows (its weak alias)
    return demangle(hit[0]) if hit else None


def _parse_addr2line(text: str) -> Dict[int, Chain]:
    """``addr2line -a -f -i``: an ``0x...`` line, then (function, file:line) pairs, innermost first."""
    out: Dict[int, Chain] = {}
    lines = text.splitlines()
    i, cur = 0, None
    while i < len(lines):
        line = lines[i]
        if _ADDR.match(line):
            cur = int(line, 16)
            out.setdefault(cur, [])
            i += 1
            continue
        if cur is None or i + 1 >= len(lines):
            i += 1
            continue
        func, loc = line, lines[i + 1]
        i += 2
        fname, _sep, lno = loc.rpartition(":")
        lno = lno.split(" ")[0]
        file_ = fname if fname and fname != "??" else None
        try:
            ln: Optional[int] = int(lno) or None
        except ValueError:
            ln = None
        out[cur].append((None if func == "??" else func, file_ if ln else None, ln if file_ else None))
    return out
