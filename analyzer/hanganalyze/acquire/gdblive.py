"""A live process through gdb: attach, run gdbext's ``hang-dump``, detach, and complete the
snapshot with what /proc says (``procfacts.py``).

Live processes are only read (memory and registers, never inferior calls) and are always
detached in a ``finally``; if gdb had to be killed while the target was stopped, the target gets
SIGCONT so that it is left in the state we found it in.

Called through ``engine.from_pid`` only (it checks the pid and decides when gdb reads it).
"""

from __future__ import annotations

import os
import tempfile

from hanganalyze.acquire.enginerequest import EngineRequest
from hanganalyze.acquire.gdbsession import GdbSession, read_dump
from hanganalyze.acquire.procfacts import complete_from_live, live_argv, resume_if_left_stopped, state_letter
from hanganalyze.acquire.ranks import read_proc_environ
from hanganalyze.errors import GdbError, InputError, PtraceDenied
from hanganalyze_gdbext.model import Snapshot


def snapshot_from_pid(pid: int, request: EngineRequest) -> Snapshot:
    """Snapshot of a live process: attach, read, detach.  The process is never left stopped.
    ``request.gdb_busy`` is called once the dump is queued."""
    state_before = state_letter(pid)
    argv = live_argv(pid)
    environ = read_proc_environ(pid)
    try:
        exe = os.readlink("/proc/%d/exe" % pid)
    except OSError:
        exe = None
    session = GdbSession(request.gdb, request.timeout, request.progress, request.options)
    attached = False
    try:
        t_ext = session.send_gdbext()
        session.started()
        session.wait("loading gdbext", t_ext)
        try:
            session.mi("attaching to pid %d" % pid, "-target-attach %d" % pid)
        except GdbError as e:
            if state_letter(pid) in (None, "Z", "X"):
                raise InputError("pid %d exited before it could be attached" % pid) from None
            if "not permitted" in str(e):
                raise PtraceDenied(pid,
                    "not allowed to attach to pid %d (ptrace: Operation not permitted): run as its user or root, "
                    "and check /proc/sys/kernel/yama/ptrace_scope and container capabilities (CAP_SYS_PTRACE)" % pid
                ) from None
            raise
        attached = True
        with tempfile.TemporaryDirectory(prefix="hanganalyze-") as tmp:
            t_dump, out = session.send_dump(tmp)
            if request.gdb_busy is not None:
                request.gdb_busy()
            session.wait("collecting threads (hang-dump)", t_dump)
            snap = read_dump(out)
        gdb_warnings = session.warnings()
    finally:
        try:
            if attached:
                session.mi("detaching from pid %d" % pid, "-target-detach", timeout=min(session.timeout, 30.0))
        except GdbError:
            pass  # killing gdb below detaches too (the kernel unlinks ptrace)
        finally:
            session.close(graceful=session.responsive)
            resume_if_left_stopped(pid, state_before)
    proc = snap.processes[0] if snap.processes else None
    if proc is None:
        raise GdbError("hang-dump found no process in pid %d" % pid)
    complete_from_live(proc, pid, exe, argv, environ)
    snap.warnings = gdb_warnings + snap.warnings
    return snap


