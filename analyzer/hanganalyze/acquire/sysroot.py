"""Cores from another machine: where this machine has the files a core mapped, and whether they
are the builds the process ran.

A core is often analyzed far from where it was written (a laptop, a CI box) while the binaries
and libraries live in a container image or a copied tree.  ``--sysroot DIR`` and
``--solib-search-path DIRS`` are gdb's own settings (``set sysroot``, ``set solib-search-path``),
given with ``-iex`` before gdb reads the executable or the core; ``locate`` follows gdb's order
(gdb's ``solib_find_1``) to find the same files for the build-id checks:

1. with a sysroot, ``SYSROOT/PATH`` only (gdb never falls back to the host's ``PATH`` then);
   without one, ``PATH`` as the core names it;
2. each search-path folder with ``PATH`` relative to it, then with its base name.

For libraries the file gdb really opened (``-file-list-shared-libraries``: host name, address
ranges) wins over this guess: gdb searches by the dynamic linker's name (``libstdc++.so.6``),
the core's NT_FILE note names the file (``libstdc++.so.6.0.30``).

debuginfod is off unless asked (``--debuginfod``): no network by default.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from hanganalyze.corefile import CoreInfo, is_library
from hanganalyze.elf import build_id_of_file
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import MappedFile

#: Rows of the mapped-file table shown in the text and Markdown reports (JSON and HTML keep all).
MAX_TABLE_ROWS = 400


def _check_dir(option: str, path: str) -> str:
    """An existing folder, as an absolute path gdb takes on its command line (one line, no
    leading or trailing blanks: gdb trims those)."""
    if not path or any(c in path for c in "\n\r\0") or path != path.strip():
        raise InputError("%s %r: not a usable folder name" % (option, path))
    if not os.path.isdir(path):
        raise InputError("%s %s: no such folder" % (option, path))
    return os.path.abspath(path)


@dataclass(frozen=True)
class GdbOptions:
    """gdb's settings for where binaries are: ``--sysroot``, ``--solib-search-path``, ``--debuginfod``."""

    sysroot: Optional[str] = None
    solib_search_path: Tuple[str, ...] = ()
    debuginfod: bool = False

    @classmethod
    def from_cli(cls, sysroot: Optional[str], solib_search_path: Iterable[str] = (),
                 debuginfod: bool = False) -> GdbOptions:
        """Checked options: one-line InputError for a folder that is not there (a typo)."""
        root = _check_dir("--sysroot", str(sysroot)) if sysroot is not None else None
        if root == "/":
            root = None  # the host's own root: gdb's default
        dirs: List[str] = []
        for item in solib_search_path:
            for d in str(item).split(":"):
                if d:
                    dirs.append(_check_dir("--solib-search-path", d))
        return cls(root, tuple(dirs), bool(debuginfod))

    @property
    def elsewhere(self) -> bool:
        """True when files are looked for somewhere else than where the core says."""
        return bool(self.sysroot or self.solib_search_path)

    def settings(self) -> List[str]:
        """gdb commands for ``-iex`` (before the executable and the core are read)."""
        out = []
        if self.debuginfod:
            out.append("set debuginfod enabled on")
        if self.sysroot:
            out.append("set sysroot %s" % self.sysroot)
        if self.solib_search_path:
            out.append("set solib-search-path %s" % ":".join(self.solib_search_path))
        return out

    def where(self) -> str:
        """Where files were looked for, for messages: "under --sysroot /x" ... or ""."""
        bits = []
        if self.sysroot:
            bits.append("under --sysroot %s" % self.sysroot)
        if self.solib_search_path:
            bits.append("in --solib-search-path %s" % ":".join(self.solib_search_path))
        return " or ".join(bits)

    def locate(self, path: str) -> Optional[str]:
        """Where this machine has the file the core names ``path``, in gdb's order; None if nowhere."""
        if not path:
            return None
        if self.sysroot:
            cand = os.path.join(self.sysroot, path.lstrip("/"))
            if os.path.isfile(cand):
                return cand
        elif os.path.isfile(path):
            return path
        rel = path.lstrip("/")
        for d in self.solib_search_path:
            cand = os.path.join(d, rel)
            if os.path.isfile(cand):
                return cand
        base = os.path.basename(path)
        for d in self.solib_search_path:
            cand = os.path.join(d, base)
            if os.path.isfile(cand):
                return cand
        return None


def debuginfod_note(opts: Optional[GdbOptions]) -> Optional[str]:
    """What ``--debuginfod`` can do here: gdb asks only the servers in DEBUGINFOD_URLS."""
    if opts is None or not opts.debuginfod:
        return None
    urls = os.environ.get("DEBUGINFOD_URLS", "").strip()
    if not urls:
        return "--debuginfod: DEBUGINFOD_URLS is not set, so gdb had no debuginfod server to ask"
    return "debuginfod on: gdb asked %s for missing debug info" % urls


def _gdb_libraries(payload: Any) -> List[Dict[str, Any]]:
    """The rows of ``-file-list-shared-libraries`` that are well formed."""
    rows = (payload or {}).get("shared-libraries") if isinstance(payload, dict) else None
    return [r for r in rows or [] if isinstance(r, dict)]


def _range_start(row: Dict[str, Any]) -> Optional[int]:
    for r in row.get("ranges") or []:
        if isinstance(r, dict) and isinstance(r.get("from"), str):
            try:
                return int(r["from"], 16)
            except ValueError:
                continue
    return None


def reconcile_with_gdb(info: CoreInfo, payload: Any) -> None:
    """Make each mapped library's ``found`` the file gdb really used (or None where gdb found
    none), and re-read its build-id when that changed."""
    maps = sorted((m.start, m.end, m.path) for m in info.mappings)
    starts = [m[0] for m in maps]
    by_path = {f.path: f for f in info.files}
    by_base: Dict[str, list] = {}
    for f in info.files:
        by_base.setdefault(os.path.basename(f.path), []).append(f)
    for row in _gdb_libraries(payload):
        host = row.get("host-name") if isinstance(row.get("host-name"), str) else None
        target = row.get("target-name") if isinstance(row.get("target-name"), str) else None
        loaded = row.get("symbols-loaded") == "1"
        f = None
        addr = _range_start(row)
        if addr is not None:
            i = bisect.bisect_right(starts, addr) - 1
            if i >= 0 and addr < maps[i][1]:
                f = by_path.get(maps[i][2])
        if f is None and target:
            f = by_path.get(target)
            if f is None and len(by_base.get(os.path.basename(target), [])) == 1:
                f = by_base[os.path.basename(target)][0]
        if f is None:
            continue
        if loaded and host and os.path.isfile(host):
            if f.found != host and not (f.found and os.path.realpath(f.found) == os.path.realpath(host)):
                f.found = host
                f.on_disk = True
                f.disk_build_id = build_id_of_file(host)
        elif not loaded and addr is None:
            f.found, f.on_disk, f.disk_build_id = None, False, None  # gdb found no file for it


def mapped_file_table(info: CoreInfo) -> List[MappedFile]:
    """Every mapped file: its path in the core, build-id from the core's memory, the file found on
    this machine, its build-id, and the verdict (match, mismatch, missing, present, special)."""
    return [MappedFile(path=f.path, build_id=f.build_id, found=f.found, disk_build_id=f.disk_build_id,
                       status=f.status) for f in info.files]


def table_counts(rows: Sequence[MappedFile]) -> Dict[str, int]:
    """{"match": 12, "missing": 1, ...} in a fixed order, zeros left out."""
    order = ("match", "mismatch", "missing", "present", "special")
    counts = {k: 0 for k in order}
    for r in rows:
        if r.status is not None:
            counts[r.status] = counts.get(r.status, 0) + 1
    return {k: v for k, v in counts.items() if v}


def missing_library_warning(info: CoreInfo, opts: Optional[GdbOptions]) -> Optional[str]:
    """The doubt a missing library casts: its frames are ``??`` and the unwind past them may be
    wrong (no unwind tables).  Named after the libraries (at most five)."""
    missing = [f.path for f in info.files if f.status == "missing" and is_library(f.path)]
    if not missing:
        return None
    names = ", ".join(os.path.basename(p) for p in missing[:5]) + (" and %d more" % (len(missing) - 5)
                                                                   if len(missing) > 5 else "")
    where = (" " + opts.where()) if opts is not None and opts.elsewhere else " on this machine"
    return ("%d mapped librar%s not found%s (%s): frames in them are ?? and the stacks past them may be wrong"
            % (len(missing), "y" if len(missing) == 1 else "ies", where, names))
