"""Build a Snapshot of the process gdb is debugging: native unwind, Python frames, merge, waits.

The three feature seams are explicit so each lives in one module:
  * ``pyframes.describe_process(inferior)`` -> per-process Python facts or None (not Python);
  * ``merge.merge_thread(thread, natives, pyproc)`` places Python frames among native ones;
  * ``locks.annotate_waits(process, natives_by_tid, pyproc)`` records what each thread waits on.
"""

from typing import Dict, List, Optional

import gdb

from . import facts, locks, merge, native
from .gdbtarget import GdbTarget, describe_process, frames_of_thread, lwp_of
from .gdbtarget import target_kind as gdbtarget_kind
from .model import Process, Snapshot, Thread
from .model.signals import fatal_signal
from .pyasync import build as pyasync


def target_kind() -> str:
    """Return "core" for a core file and "live" for an attached process (from the connection type)."""
    return gdbtarget_kind(gdb.selected_inferior())


def stop_signal() -> Optional[str]:
    """The signal that killed the process of a core, from $_siginfo (None for a debugger's stop)."""
    try:
        signo = int(gdb.parse_and_eval("$_siginfo.si_signo"))
    except (gdb.error, ValueError, RuntimeError):
        return None
    return fatal_signal(signo)


def collect_process(with_python: bool = True, with_locks: bool = True, pyproc=None) -> Process:
    """``pyproc``: the walker's answer when the caller already has it (``hang-bt -a`` shares the
    frame filter's, so the Python frames are walked once)."""
    inf = gdb.selected_inferior()
    kind = target_kind()
    proc = Process(source=kind, pid=inf.pid or None)
    try:
        proc.executable = gdb.current_progspace().filename
    except Exception:  # noqa: BLE001
        pass
    if kind == "core":
        proc.signal = stop_signal()
    libs = native.LibraryMap()

    if with_python and pyproc is None:
        try:
            pyproc = describe_process(inf)
        except Exception as e:  # noqa: BLE001 - a broken runtime must not cost the native stacks
            proc.notes.append("Python runtime could not be read: %s" % e)
    if pyproc is not None and pyproc.version:
        proc.python, notes = facts.python_facts(pyproc, pyproc.target or GdbTarget(inf))
        proc.notes.extend(notes)

    selected = gdb.selected_thread()
    natives_by_tid: Dict[int, List[native.NativeFrame]] = {}
    try:
        for th in sorted(inf.threads(), key=lambda t: t.num):
            th.switch()
            lwp = lwp_of(th)
            natives = native.unwind(libs)
            stopped = native.stop_marker(natives)
            natives_by_tid[lwp] = natives
            t = Thread(tid=lwp, os_name=th.name, current=(selected is not None and th.num == selected.num))
            t.name = t.os_name
            if with_python and pyproc is not None:
                merge.merge_thread(t, natives, pyproc)
            else:
                t.frames = [n.frame for n in natives]
                t.merge = "native-only"
            if stopped is not None:  # the stack could not be read further: say so where it ends
                t.frames.append(stopped)
                t.notes.append(stopped.note or "")
            proc.threads.append(t)
    finally:
        if selected is not None and selected.is_valid():
            selected.switch()
    pyasync.attach(proc, pyproc)  # asyncio tasks: their stacks are on no thread
    if with_locks:
        selected = gdb.selected_thread()
        try:
            locks.annotate_waits(proc, natives_by_tid, pyproc, (pyproc.target if pyproc else None) or GdbTarget(inf),
                                 frames_of_thread)
        except Exception as e:  # noqa: BLE001
            proc.notes.append("lock analysis failed: %s" % e)
        finally:
            if selected is not None and selected.is_valid():
                selected.switch()
    return proc


def collect_snapshot(with_python: bool = True, with_locks: bool = True) -> Snapshot:
    return Snapshot(processes=[collect_process(with_python, with_locks)])
