"""Stable bucket id: the same bug gets the same short id on every machine, run and Python version.

Bug trackers use it to spot duplicates ("b1-3f9a0c1d2e4b" already reported in #123).  The id is
``b1-`` + 12 hex digits of a SHA-256 over a normalized key; the ``b1`` prefix is the algorithm
version, so a future change to the key is a new prefix instead of a silent regrouping.

The key (algorithm b1):

* With findings: the top finding's signature id, plus the normalized top frames of the threads
  responsible for it (its evidence threads, else ``Finding.threads``).  A finding spanning several
  threads (a lock-order cycle) contributes the *sorted set* of their stacks, at most
  ``MAX_THREADS``, so the id does not depend on which thread got the smaller tid.
* Without findings: if a process died of a fatal signal, ``signal`` + the current (signalled)
  thread's top frames; otherwise ``None`` - a hang without any finding carries no evidence of
  *which* bug it is, and a bucket from an arbitrary thread would merge unrelated reports.

Frame normalization drops whatever varies for the same bug:

* addresses, line numbers, C++ parameter lists, template arguments, ABI tags, compiler clone
  suffixes (``.isra.0``, ``.cold``, ``.constprop.1``, ``.part.2``, ``.lto_priv.0``, ``[clone ...]``);
* paths: Python files keep only their basename (``/home/u/venv/lib/python3.12/threading.py`` and
  ``.../python3.10/threading.py`` are the same frame), Python function names keep only the last
  component (``Worker.run`` from 3.11's ``co_qualname`` equals 3.10's ``run``); libraries keep
  the basename without the version (``libnccl.so.2.21.5`` -> ``libnccl.so``);
* interpreter internals (frames in libpython / the python executable, or named ``_Py*``/``Py*``)
  and C runtime internals (libc, libpthread, ld.so, libstdc++, libgcc_s) are skipped, because they
  change with every CPython and glibc release; they are used only when nothing else remains.
"""

from __future__ import annotations

import hashlib
import re
from typing import List, Optional

from hanganalyze.analyze.signatures import normalize_function
from hanganalyze.gdbext.model import Frame, Snapshot, Thread

VERSION = "b1"
#: Frames per thread that enter the key.
TOP_FRAMES = 5
#: Threads per finding that enter the key.
MAX_THREADS = 3
#: Signals that mean the process crashed (a no-finding core is bucketed only for these).
FATAL_SIGNALS = frozenset({"SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS"})

_INTERPRETER_LIB = re.compile(r"^(lib)?python\d(\.\d+)?")
_RUNTIME_LIB = re.compile(r"^(libc[.-]|libpthread|ld-linux|ld-\d|libstdc\+\+|libgcc_s|libm[.-]|libdl[.-]|librt[.-])")
_PY_API = re.compile(r"^_?Py[A-Z_]")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_OPERATORS = ("operator()", "operator<<=", "operator>>=", "operator<<", "operator>>", "operator<=",
              "operator>=", "operator<", "operator>", "operator->*", "operator->")


def _strip_balanced(s: str, open_ch: str, close_ch: str) -> str:
    out: List[str] = []
    depth = 0
    for ch in s:
        if ch == open_ch:
            depth += 1
        elif ch == close_ch and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def normalize_native_name(name: str) -> str:
    """``ns::Foo<int>::bar(int, char*) const [clone .isra.0]`` -> ``ns::Foo::bar``.

    The matcher's ``normalize_function`` decides which spellings are one symbol (parameter lists,
    ``[abi:…]``, clone suffixes, symbol versions); a bucket also drops template arguments and
    addresses, which differ between builds of the same code."""
    s = normalize_function(name)
    s = s.replace("(anonymous namespace)", "{anon}")
    protected = {}
    for i, op in enumerate(_OPERATORS):
        if op in s:
            token = "\x00%d\x00" % i
            protected[token] = op
            s = s.replace(op, token)
    s = _strip_balanced(s, "<", ">")
    s = _strip_balanced(s, "(", ")")
    for token, op in protected.items():
        s = s.replace(token, op)
    s = re.sub(r"\s+const\b.*$", "", s)
    s = _HEX.sub("", s.strip())
    return " ".join(s.split())


def library_base(path: Optional[str]) -> str:
    """``/usr/lib/libnccl.so.2.21.5`` -> ``libnccl.so``."""
    if not path:
        return ""
    base = path.rsplit("/", 1)[-1]
    m = re.match(r"^(.*?\.so)(\.[\d.]+)?$", base)
    return m.group(1) if m else base


def is_interpreter_frame(f: Frame) -> bool:
    """A native frame of CPython itself (libpython / the python executable, or a ``_Py*``/``Py*`` name)."""
    lib = library_base(f.library)
    if lib and _INTERPRETER_LIB.match(lib):
        return True
    return bool(f.function and _PY_API.match(f.function))


def is_runtime_frame(f: Frame) -> bool:
    """A frame of the C/C++ runtime (libc, libpthread, ld.so, libstdc++, libgcc_s, libm...)."""
    lib = library_base(f.library)
    return bool(lib and _RUNTIME_LIB.match(lib))


def frame_token(f: Frame) -> str:
    """One normalized frame: ``py:threading.py:run`` or ``c:libnccl.so:ncclCommDestroy``."""
    if f.kind == "python":
        file = (f.file or "").replace("\\", "/").rsplit("/", 1)[-1]
        func = (f.function or "?").rsplit(".", 1)[-1]
        return "py:%s:%s" % (file or f.module or "?", func)
    name = normalize_native_name(f.function) if f.function and f.function != "??" else "?"
    lib = library_base(f.library)
    if name == "?":
        return "c:%s:?" % lib
    return "c:%s" % name


def stack_tokens(thread: Thread, top: int = TOP_FRAMES) -> List[str]:
    """The normalized top frames of a thread, most significant (innermost relevant) first."""
    frames = [f for f in thread.all_frames() if not f.marker]
    relevant = [f for f in frames if f.kind == "python" or not (is_interpreter_frame(f) or is_runtime_frame(f))]
    if not relevant:
        relevant = [f for f in frames if f.kind == "python" or not is_interpreter_frame(f)] or frames
    tokens: List[str] = []
    for f in relevant:
        tok = frame_token(f)
        if tokens and tokens[-1] == tok:  # recursion / inlined duplicates
            continue
        tokens.append(tok)
        if len(tokens) >= top:
            break
    return tokens


def bucket_key(snapshot: Snapshot) -> Optional[str]:
    """The text that is hashed (exposed for tests and for ``--explain`` style debugging)."""
    if snapshot.findings:
        top = snapshot.findings[0]
        if not (0 <= top.process < len(snapshot.processes)):
            return "%s|finding:%s" % (VERSION, top.signature)
        proc = snapshot.processes[top.process]
        tids = [e.get("thread") for e in top.evidence if isinstance(e, dict) and e.get("thread") is not None]
        if not tids:
            tids = list(top.threads)
        stacks = set()
        for tid in tids:
            t = proc.thread_by_tid(tid)
            if t is not None:
                stacks.add(" > ".join(stack_tokens(t)))
        parts = sorted(stacks)[:MAX_THREADS]
        return "%s|finding:%s|%s" % (VERSION, top.signature, " || ".join(parts))
    for proc in snapshot.processes:
        if proc.signal in FATAL_SIGNALS:
            cur = next((t for t in proc.threads if t.current), None)
            if cur is not None:
                return "%s|signal:%s|%s" % (VERSION, proc.signal, " > ".join(stack_tokens(cur)))
    return None


def bucket_id(snapshot: Snapshot) -> Optional[str]:
    """``b1-<12 hex>`` for the top finding (or the crash), ``None`` when there is nothing to bucket."""
    key = bucket_key(snapshot)
    if key is None:
        return None
    return "%s-%s" % (VERSION, hashlib.sha256(key.encode("utf-8")).hexdigest()[:12])
