"""Comparing the direct reader's snapshot with gdb's for the same process or core.

What must be equal: the threads, every Python frame (function, file, line), each thread's
wait (kind, owner) and GIL state, and the findings.  Every native frame the direct reader
lists (function, source file, line) must be in gdb's list, in the same order and with the
Python frames between the same native frames.

What may differ, by design: gdb adds frames for tail calls it infers from DWARF call-site
records (``__new_sem_wait`` -> ``__new_sem_wait_slow64``, ``PyRun_AnyFileExFlags`` ->
``_PyRun_AnyFileObject``), which are not on the stack, so the direct list is a subsequence of
gdb's (and a frame next to such a call may be "inlined" in one list only); and gdb names a C
library function by whichever alias it meets first (``__GI___clock_nanosleep`` /
``clock_nanosleep``), so libc frames are compared alias-free; and where the line table has
several rows at the innermost frame's pc (a thread stopped right after glibc's ``syscall``
instruction in ``__lll_lock_wake``: line 64 is_stmt, then 65 not), gdb names the is_stmt row and
``llvm-addr2line`` the last one, so the innermost native frame is compared without its line
when function and file agree.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from hanganalyze.names import normalize_function

_LIBC = re.compile(r"/(libc|libpthread|libdl|librt|ld-linux[^/]*)[.-][^/]*$")


def _alias_free(name: Optional[str]) -> str:
    n = normalize_function(name)
    n = re.sub(r"^(__GI_|__libc_)?_*", "", n)
    return re.sub(r"(64|_impl|_common|\.constprop\.\d+)+$", "", n)


def _is_libc(f: Dict[str, Any]) -> bool:
    return bool(_LIBC.search(f.get("library") or ""))


def _token(f: Dict[str, Any]) -> Tuple:
    if f["kind"] == "python":
        return ("py", f.get("function"), f.get("file"), f.get("line"))
    name = _alias_free(f.get("function")) if _is_libc(f) else normalize_function(f.get("function"))
    return ("native", name, os.path.basename(f.get("file") or "") or None, f.get("line"))


def _is_subsequence(small: List[str], big: List[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def thread_differences(direct: Dict[str, Any], gdb: Dict[str, Any]) -> List[str]:
    out: List[str] = []
    tid = direct.get("tid")
    frames_d = [f for f in direct["frames"] if not f.get("marker")]
    frames_g = [f for f in gdb["frames"] if not f.get("marker")]
    seq_d = [_token(f) for f in frames_d]
    seq_g = [_token(f) for f in frames_g]
    if seq_d and seq_g and seq_d[0][0] == seq_g[0][0] == "native" and seq_d[0][1:3] == seq_g[0][1:3]:
        seq_d[0] = seq_g[0]  # the innermost frame's line: see the module docstring
    py_d = [t for t in seq_d if t[0] == "py"]
    py_g = [t for t in seq_g if t[0] == "py"]
    if py_d != py_g:
        out.append("thread %s Python frames: direct %s, gdb %s" % (tid, py_d, py_g))
    elif not _is_subsequence(seq_d, seq_g):
        it = iter(seq_g)
        for i, tok in enumerate(seq_d):
            if not any(tok == y for y in it):
                out.append("thread %s frame %d: direct %s is not in gdb's list after the frames before it"
                           % (tid, i, tok))
                break
    for key in ("name", "merge"):
        if direct.get(key) != gdb.get(key):
            out.append("thread %s %s: direct %r, gdb %r" % (tid, key, direct.get(key), gdb.get(key)))
    if (direct.get("state") or {}).get("gil") != (gdb.get("state") or {}).get("gil"):
        out.append("thread %s GIL: direct %r, gdb %r" % (tid, direct.get("state"), gdb.get("state")))
    wd, wg = direct.get("waits") or {}, gdb.get("waits") or {}
    if (wd.get("kind"), wd.get("owner_tid"), wd.get("resource")) != (wg.get("kind"), wg.get("owner_tid"),
                                                                     wg.get("resource")):
        out.append("thread %s wait: direct %s, gdb %s" % (tid, wd, wg))
    return out


def snapshot_differences(direct: Dict[str, Any], gdb: Dict[str, Any]) -> List[str]:
    """Every difference that matters between two reports of one process (empty when none)."""
    out: List[str] = []
    pd, pg = direct["processes"], gdb["processes"]
    if len(pd) != len(pg):
        return ["%d processes vs %d" % (len(pd), len(pg))]
    for a, b in zip(pd, pg):
        ta = {t["tid"]: t for t in a["threads"]}
        tb = {t["tid"]: t for t in b["threads"]}
        if set(ta) != set(tb):
            out.append("threads: direct %s, gdb %s" % (sorted(ta), sorted(tb)))
            continue
        for tid in sorted(ta):
            out += thread_differences(ta[tid], tb[tid])
        pa, pb = a.get("python") or {}, b.get("python") or {}
        for key in ("version", "gil_holder", "gc_collecting", "build", "interpreters"):
            if pa.get(key) != pb.get(key):
                out.append("python.%s: direct %r, gdb %r" % (key, pa.get(key), pb.get(key)))
        for key in ("pid", "executable", "argv", "signal", "rank"):
            if a.get(key) != b.get(key):
                out.append("%s: direct %r, gdb %r" % (key, a.get(key), b.get(key)))
    fd = sorted((f.get("signature"), tuple(f.get("ranks") or ())) for f in direct.get("findings", []))
    fg = sorted((f.get("signature"), tuple(f.get("ranks") or ())) for f in gdb.get("findings", []))
    if fd != fg:
        out.append("findings: direct %s, gdb %s" % (fd, fg))
    if direct.get("bucket") != gdb.get("bucket"):
        out.append("bucket: direct %s, gdb %s" % (direct.get("bucket"), gdb.get("bucket")))
    return out
