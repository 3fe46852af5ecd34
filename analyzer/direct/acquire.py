"""Snapshots of a live process or a core through the direct reader, completed with the same
process facts (argv, rank, libraries, NCCL version) as the gdb path, so reports cannot tell
which engine ran except by ``Process.notes``' one line and the time it took."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from hanganalyze.acquire import gdbdriver
from hanganalyze.acquire.corefile import CoreInfo, check_executable, read_core
from hanganalyze.acquire.embedded_versions import add_embedded_versions, mentions_nccl
from hanganalyze.acquire.ranks import identity_from_environ, read_proc_environ
from hanganalyze.direct.collect import collect_process
from hanganalyze.direct.coredump import CoreProcess
from hanganalyze.direct.live import LiveProcess
from hanganalyze.gdbext.model import Snapshot

ENGINE_NOTE = "read directly (ptrace or core, .eh_frame unwinding, no gdb)"


def snapshot_from_pid(pid: int, timeout: float = 120.0) -> Snapshot:
    """Stop every thread, read, release: the process runs on as before (never an inferior call)."""
    gdbdriver.check_pid(pid)
    argv = gdbdriver.live_argv(pid)
    environ = read_proc_environ(pid)
    with LiveProcess(pid, timeout=min(timeout, 30.0)) as lp:
        proc = collect_process(lp)
    proc.source = "live"
    proc.pid = pid
    proc.executable = (lp.executable() or proc.executable or "").replace(" (deleted)", "") or None
    proc.argv = argv
    proc.signal = None
    proc.rank, proc.dist = identity_from_environ(environ, "environ")
    files = gdbdriver.live_files(pid)
    proc.libraries = gdbdriver.libraries_from_files(files)
    if mentions_nccl(proc):
        add_embedded_versions(proc.libraries, [f.path for f in files], proc.executable)
    gdbdriver.normalize_frame_libraries(proc, files)
    proc.notes.append(ENGINE_NOTE)
    return Snapshot(processes=[proc])


def snapshot_from_core(core: Path, info: Optional[CoreInfo] = None, exe: Optional[Path] = None,
                       options=None) -> Snapshot:
    """A core, truncated or not: memory the core lacks ends that thread's unwind with a marker
    (said per thread and in the first warning), as on the gdb path; no dynamic linker list is
    needed, the mapped files come from the notes."""
    from hanganalyze.acquire.corefile import library_warnings
    from hanganalyze.acquire.sysroot import mapped_file_table, missing_library_warning

    info = info or read_core(core)
    exe_path, warnings = check_executable(info, exe, libraries=False)
    with CoreProcess(str(core), info, info.executable or exe_path,
                     exe_file=exe_path if exe is not None else None) as cp:
        proc = collect_process(cp)
    if info.truncated:
        gdbdriver.truncated_core_facts(proc, info, [], 0)
    gdbdriver.complete_from_core(proc, info, exe_path)
    gdbdriver.name_unknown_libraries(proc, info)
    proc.mapped_files = mapped_file_table(info)
    proc.notes.append(ENGINE_NOTE)
    warnings = list(warnings) + library_warnings(info)
    missing = missing_library_warning(info, options)
    if missing:
        warnings.append(missing)
    snap = Snapshot(processes=[proc])
    snap.warnings = ([info.truncation_warning()] if info.truncated else []) + warnings
    return snap


def usable_for_core(info: CoreInfo, exe: Optional[Path] = None) -> bool:
    """Cores the direct reader handles as well as gdb: those whose executable is here, at the
    path the core names or given with ``--exe`` (``--sysroot`` goes to gdb, which searches for
    the libraries its own way)."""
    if exe is not None:
        return Path(exe).is_file()
    return bool(info.executable) and os.path.isfile((info.executable or "").replace(" (deleted)", ""))
