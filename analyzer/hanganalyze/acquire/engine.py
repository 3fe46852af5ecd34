"""The one way a process is read: ``from_core`` and ``from_pid`` take an ``EngineRequest`` and give
a Snapshot, and ``choose`` is the only place that decides which reader runs.

Two readers sit behind it: the direct reader (``directengine.py`` over ``direct/``: ptrace or the core's
segments, ``.eh_frame`` unwinding, seconds and GBs less than gdb on a PyTorch rank) and gdb with
gdbext (``gdbcore.py``, ``gdblive.py``).  Both backends take the same arguments (a core: path,
notes, request, ``--exe``; a pid: pid, request) and complete the snapshot with the same process
facts, so callers (``inputs.py`` for one input, the job pool through it, repeated live samples)
never name a reader.

``--engine auto`` takes the direct reader unless the user named a debugger (``--gdb
cuda-gdb``), asked for gdb's file search (``--sysroot``, ``--solib-search-path``,
``--debuginfod``), this is not x86-64, or a core's executable is not here (at the path the core
names, or given with ``--exe``); and when the direct reader gives up (another layout, a bug),
gdb reads the same target.  With ``--engine direct`` its reason is the one-line error instead.

Truncated cores go to the direct reader like any other core (chosen here, on purpose): it takes
the mapped files from the core's NT_FILE note, so it does not need the dynamic linker's list of
libraries, which usually lies beyond the end of a truncated core (gdb needs that list, and
``gdbcore.py`` adds the missing libraries by hand when gdb reads one).  Each thread is unwound as
far as its stack is in the file and then ends in a marker, as on the gdb path;
``tests/integration/test_truncated_cores.py`` compares a cut core's frames with the whole core's,
read by the same reader.  gdb still reads a truncated core whenever one of the rules above
sends it there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from hanganalyze.acquire import directengine, noptrace
from hanganalyze.acquire.enginerequest import DIRECT, GDB, EngineRequest
from hanganalyze.acquire.procfacts import check_pid
from hanganalyze.corefile import CoreInfo, read_core
from hanganalyze.errors import InputError, PtraceDenied
from hanganalyze_gdbext.model import Snapshot


def choose(request: EngineRequest, core: Optional[CoreInfo] = None, exe: Optional[Path] = None) -> str:
    """``"direct"`` or ``"gdb"`` for a target (see the module's docstring for the rules).  ``core``
    (the core's notes, when the target is a core and they were read) adds the one rule that needs
    them: under ``auto``, a core whose executable is not here goes to gdb."""
    if request.engine != "auto":
        return request.engine
    if request.gdb != "gdb" or os.uname().machine not in ("x86_64", "AMD64"):
        return GDB
    if request.options.elsewhere or request.options.debuginfod:
        return GDB
    if core is not None and not _executable_here(core, exe):
        return GDB
    return DIRECT


def _executable_here(info: CoreInfo, exe: Optional[Path]) -> bool:
    """The core's executable is on this machine, at the path the core names or given with
    ``--exe``: then the direct reader reads the core as well as gdb does."""
    if exe is not None:
        return Path(exe).is_file()
    return bool(info.executable) and Path((info.executable or "").replace(" (deleted)", "")).is_file()


def from_core(path: Path, request: EngineRequest, exe: Optional[Path] = None) -> Snapshot:
    """A snapshot of the core at ``path`` (an ELF core on disk; compressed ones are decompressed
    before they come here), by the reader ``choose`` picks."""
    path = Path(path)
    info = None
    if choose(request) == DIRECT:
        info = read_core(path)  # the direct reader needs the notes; gdb's flow reuses them if it falls back
        if choose(request, info, exe) == DIRECT:
            snap = _try_direct(str(path), lambda: directengine.snapshot_from_core(path, info, request, exe), request)
            if snap is not None:
                return snap
    from hanganalyze.acquire import gdbcore  # lazy: gdb's modules (pygdbmi) only when gdb reads

    request.progress("running %s on %s" % (request.gdb, path))
    return gdbcore.snapshot_from_core(path, info, request, exe)


def from_pid(pid: int, request: EngineRequest) -> Snapshot:
    """A snapshot of the live process ``pid``, by the reader ``choose`` picks.  The one place a
    live process is read (a repeated sample calls it again); the process is always released and
    left running as it was."""
    try:
        check_pid(pid)
        if choose(request) == DIRECT:
            snap = _try_direct("pid %d" % pid, lambda: directengine.snapshot_from_pid(pid, request), request)
            if snap is not None:
                return snap
        from hanganalyze.acquire import gdblive  # lazy: gdb's modules (pygdbmi) only when gdb attaches

        request.progress("attaching to pid %d with %s" % (pid, request.gdb))
        return gdblive.snapshot_from_pid(pid, request)
    except PtraceDenied:  # no ptrace here: why and the fix, and what /proc shows (issue 35)
        return noptrace.snapshot_without_ptrace(pid)


def _try_direct(what: str, read: Callable[[], Snapshot], request: EngineRequest) -> Optional[Snapshot]:
    """The direct reader's snapshot, or None when it gave up and gdb should read it instead (with
    ``--engine direct``, its reason is the one-line error).  A user error is an error either way."""
    request.progress("reading %s directly" % what)
    try:
        return read()
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - DirectUnsupported, or a bug: gdb still reads it
        if request.engine == DIRECT:
            raise InputError("--engine direct cannot read %s: %s" % (what, _one_line(e))) from None
        request.progress("direct reader gave up (%s): using %s" % (_one_line(e), request.gdb))
    return None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:200]
