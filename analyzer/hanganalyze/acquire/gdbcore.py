"""A core through gdb: gdb loads the executable and the core (with --sysroot/--solib-search-path
settings, and the facts of a truncated core made known to it), gdbext's ``hang-dump`` writes the
snapshot, and the core's notes complete it (``procfacts.py``).

gdb starts first and loads gdbext while the core's notes are read here; the executable, the core
and ``hang-dump`` are then queued at once (``gdbsession.GdbSession``: each step its own deadline).
Called through ``engine.from_core`` only (it decides when gdb reads a core).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from hanganalyze.acquire.enginerequest import EngineRequest
from hanganalyze.acquire.gdbsession import GdbSession, gdb_safe_path, mi_quote, read_dump
from hanganalyze.acquire.procfacts import complete_from_core, core_warnings, truncated_core_facts
from hanganalyze.acquire.sysroot import debuginfod_note, reconcile_with_gdb
from hanganalyze.corefile import CoreInfo, check_executable, is_library, read_core
from hanganalyze.elf import load_vaddr
from hanganalyze.errors import GdbError
from hanganalyze_gdbext.model import Snapshot


def snapshot_from_core(core, info: Optional[CoreInfo], request: EngineRequest, exe=None) -> Snapshot:
    """Snapshot of a core: gdb unwinds, the notes give argv, signal, build-ids.
    ``request.options`` (sysroot.GdbOptions): --sysroot, --solib-search-path, --debuginfod.

    gdb starts first and loads gdbext while the core's notes are read here (``info`` is read
    here when not given); then the executable, the core and ``hang-dump`` are queued at once,
    and ``request.gdb_busy`` is called: the caller's chance to work while we only wait for gdb.
    """

    core = Path(core)
    options = request.options
    progress = request.progress
    gdb_busy = request.gdb_busy
    session = GdbSession(request.gdb, request.timeout, progress, options)
    try:
        with tempfile.TemporaryDirectory(prefix="hanganalyze-") as tmp:
            t_ext = session.send_gdbext()
            if info is None:
                if progress:
                    progress("reading core notes of %s" % core)
                info = read_core(core, locate=options.locate if options.elsewhere else None)
            exe_path, warnings = check_executable(info, Path(exe) if exe is not None else None,
                                                  locate=options.locate if options.elsewhere else None,
                                                  where=options.where(), libraries=False)
            gdb_exe = gdb_safe_path(exe_path, tmp, "exe")
            t_exe = session.send("-file-exec-and-symbols %s" % mi_quote(gdb_exe))
            t_mem = _send_missing_memory(session, info, tmp) if info.truncated else None
            # core-file takes the rest of the line as the file name (spaces included, no quoting)
            t_core = session.send_console("core-file %s" % gdb_safe_path(str(core.resolve()), tmp, "core"))
            added: Dict[str, str] = {}  # libraries added by hand: gdb's name -> the mapped path
            if info.truncated:
                # gdb learns the shared libraries from the dynamic linker's list in the process's
                # memory, most often beyond the end of a truncated core: the notes say where each
                # library was mapped, so the missing ones are added there, before the dump.
                if gdb_busy is not None:
                    gdb_busy()
                    gdb_busy = None
                _wait_loaded(session, exe_path, t_ext, t_exe, t_core, t_mem)
                added = _add_unlisted_libraries(session, info, tmp)
            # the files gdb really used for the libraries (their build-ids go in the mapped-file table)
            t_libs = session.send("-file-list-shared-libraries")
            t_dump, out = session.send_dump(tmp)
            if gdb_busy is not None:
                gdb_busy()
            if not info.truncated:
                _wait_loaded(session, exe_path, t_ext, t_exe, t_core)
            try:
                reconcile_with_gdb(info, session.wait("listing shared libraries", t_libs)[1])
            except GdbError:
                if not session.responsive or session.proc.poll() is not None:
                    raise
            session.wait("collecting threads (hang-dump)", t_dump)
            gdb_warnings = session.warnings()
            # A core has no target to detach from: once the snapshot is written, gdb's orderly
            # exit (freeing a multi-GB core's caches) is time the user waits for nothing.  It
            # is killed now and reaped in close() below, after its file is read.
            session.kill()
            snap = read_dump(out)
    finally:
        session.close(graceful=False)
    if not snap.processes:
        raise GdbError("hang-dump found no process in %s" % core)
    proc = snap.processes[0]
    renamed = {link: path for link, path in added.items() if link != path}
    if gdb_exe != exe_path:  # gdb named the executable's frames after our symlink
        renamed[gdb_exe] = exe_path
    if renamed:
        for t in proc.threads:
            for fr in list(t.frames) + list(t.python_frames):
                if fr.library in renamed:
                    fr.library = renamed[fr.library]
    if info.truncated:
        gdb_warnings = truncated_core_facts(proc, info, gdb_warnings, len(added))
    complete_from_core(proc, info, exe_path)
    note = debuginfod_note(options)
    if note:
        proc.notes.append(note)
    snap.warnings = core_warnings(info, warnings, options) + gdb_warnings + snap.warnings
    if len(proc.threads) != info.nthreads:
        snap.warnings.append("gdb saw %d thread(s), the core has %d" % (len(proc.threads), info.nthreads))
    return snap


def _wait_loaded(session: GdbSession, exe_path: str, t_ext: int, t_exe: int, t_core: int,
                 t_mem: Optional[int] = None) -> None:
    session.started()
    session.wait("loading gdbext", t_ext)
    session.wait("loading the executable %s" % exe_path, t_exe)
    if t_mem is not None:
        session.wait("marking the memory beyond the end of the truncated core", t_mem)
    session.wait("loading the core", t_core)


def _send_missing_memory(session: GdbSession, info: CoreInfo, tmp: str) -> int:
    """Make gdb refuse to read what a truncated core lacks.  Without this, gdb reads a missing
    page of a mapped file (a library's .data, the dynamic linker's list, a mutex in the
    executable) from the file on disk: its contents at start-up, not what the process had.
    Write-only memory regions (``mem LO HI wo``) turn every such read into "Cannot access
    memory", as for any stack page the core does not have.  Sent as one script."""
    script = os.path.join(tmp, "missing-memory.gdb")
    with open(script, "w") as f:
        f.write("set mem inaccessible-by-default off\n")  # the rest stays readable (default: on)
        for lo, hi in info.missing_ranges():
            f.write("mem %#x %#x wo\n" % (lo, hi))
    return session.send_console("source %s" % script)


def _load_vaddr(path: str) -> Optional[int]:
    """The link-time address of a shared object's first PT_LOAD, page-aligned (0 for ordinary
    libraries), from its program headers; None when it is no 64-bit ELF file."""
    return load_vaddr(path)


def _add_unlisted_libraries(session: GdbSession, info: CoreInfo, tmp: str) -> Dict[str, str]:
    """``add-symbol-file`` every library the core's NT_FILE note maps that gdb did not find in the
    dynamic linker's list (beyond the end of a truncated core), at the address it was mapped.
    Returns {name given to gdb: mapped path}.  A library gdb refuses is skipped."""
    try:
        _, payload = session.mi("listing shared libraries", "-file-list-shared-libraries")
        rows = (payload or {}).get("shared-libraries") or []
    except GdbError:
        if not session.responsive or session.proc.poll() is not None:
            raise
        rows = []
    listed = set()
    for row in rows:
        if isinstance(row, dict):
            for key in ("host-name", "target-name", "id"):
                if isinstance(row.get(key), str):
                    listed.add(os.path.realpath(row[key]))
    starts: Dict[str, int] = {}
    for m in info.mappings:
        if m.offset == 0 and m.path not in starts:
            starts[m.path] = m.start
    sent: List[Tuple[int, str, str]] = []
    for f in info.files:
        path = f.found or f.path  # the file on this machine (under --sysroot: the copy)
        if not (f.on_disk and is_library(f.path) and f.path in starts) or os.path.realpath(path) in listed:
            continue
        link_vaddr = _load_vaddr(path)
        if link_vaddr is None:
            continue
        name = gdb_safe_path(path, tmp, "lib%d" % len(sent))
        cmd = "add-symbol-file %s -o %#x" % (name, starts[f.path] - link_vaddr)
        sent.append((session.send_console(cmd), name, f.path))
    added: Dict[str, str] = {}
    for token, name, mapped in sent:
        try:
            session.wait("adding the symbols of %s" % mapped, token)
        except GdbError:
            if not session.responsive or session.proc.poll() is not None:
                raise
            continue
        added[name] = mapped
    return added

