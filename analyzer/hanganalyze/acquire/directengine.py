"""Snapshots of a live process or a core through the direct reader, completed with the same
process facts (argv, rank, libraries, NCCL version) as the gdb path, so reports cannot tell
which engine ran except by ``Process.notes``' one line and the time it took.

Called through ``acquire/engine.py`` only (it checks the pid and decides when this reader runs),
with the same arguments as the gdb backends."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from hanganalyze.acquire import procfacts
from hanganalyze.acquire.enginerequest import EngineRequest
from hanganalyze.acquire.ranks import read_proc_environ
from hanganalyze.corefile import CoreInfo, check_executable
from hanganalyze.direct.collect import collect_process
from hanganalyze.direct.coredump import CoreProcess
from hanganalyze.direct.live import LiveProcess
from hanganalyze_gdbext.model import Snapshot

ENGINE_NOTE = "read directly (ptrace or core, .eh_frame unwinding, no gdb)"


def snapshot_from_pid(pid: int, request: EngineRequest) -> Snapshot:
    """Stop every thread, read, release: the process runs on as before (never an inferior call)."""
    argv = procfacts.live_argv(pid)
    environ = read_proc_environ(pid)
    t0 = time.monotonic()
    with LiveProcess(pid, timeout=min(request.timeout, 30.0)) as lp:
        proc = collect_process(lp)
    proc.stopped_s = time.monotonic() - t0
    procfacts.complete_from_live(proc, pid, lp.executable(), argv, environ)
    proc.notes.append(ENGINE_NOTE)
    return Snapshot(processes=[proc])


def snapshot_from_core(core: Path, info: CoreInfo, request: EngineRequest, exe: Optional[Path] = None) -> Snapshot:
    """A core, truncated or not: memory the core lacks ends that thread's unwind with a marker
    (said per thread and in the first warning), as on the gdb path; no dynamic linker list is
    needed, the mapped files come from the notes."""
    exe_path, warnings = check_executable(info, exe, libraries=False)
    with CoreProcess(str(core), info, info.executable or exe_path,
                     exe_file=exe_path if exe is not None else None) as cp:
        proc = collect_process(cp)
    if info.truncated:
        procfacts.truncated_core_facts(proc, info, [], 0)
    procfacts.complete_from_core(proc, info, exe_path)
    proc.notes.append(ENGINE_NOTE)
    snap = Snapshot(processes=[proc])
    snap.warnings = procfacts.core_warnings(info, warnings, request.options)
    return snap

