"""Build a Snapshot of the process gdb is debugging: native unwind, Python frames, merge, waits.

The three feature seams are explicit so each lives in one module:
  * ``pyframes.describe_process(inferior)`` -> per-process Python facts or None (not Python);
  * ``merge.merge_thread(thread, natives, pyproc)`` places Python frames among native ones;
  * ``locks.annotate_waits(process, natives_by_tid, pyproc)`` records what each thread waits on.
"""

import signal as _signal
from typing import Dict, List, Optional

import gdb

from . import facts, native
from .gdbtarget import GdbTarget, frames_of_thread
from .model import Process, Snapshot, Thread


def target_kind() -> str:
    """Return "core" for a core file and "live" for an attached process (from the connection type)."""
    inf = gdb.selected_inferior()
    conn = getattr(inf, "connection", None)
    ctype = getattr(conn, "type", None) if conn is not None else None
    if ctype is None:
        try:
            out = gdb.execute("info target", to_string=True)
        except (gdb.error, UnicodeDecodeError):  # non-UTF-8 file names in the output
            out = ""
        return "core" if "core file" in out.lower() else "live"
    return "core" if ctype == "core" else "live"


#: Signals that say how a debugger stopped the process (gcore of a running process records the
#: SIGSTOP of its ptrace attach), not what happened to the program: reported as no signal.
_DEBUGGER_STOPS = ("SIGSTOP", "SIGTRAP", "SIGTSTP")


def stop_signal() -> Optional[str]:
    """The signal that killed the process of a core, from $_siginfo (None for a debugger's stop)."""
    try:
        signo = int(gdb.parse_and_eval("$_siginfo.si_signo"))
    except (gdb.error, ValueError, RuntimeError):
        return None
    if signo <= 0:
        return None
    try:
        name = _signal.Signals(signo).name
    except ValueError:
        return "SIG%d" % signo
    return None if name in _DEBUGGER_STOPS else name


def _optional(mod: str):
    import importlib

    pkg = __name__.rsplit(".", 1)[0]
    try:
        return importlib.import_module("%s.%s" % (pkg, mod))
    except ImportError as e:
        if getattr(e, "name", None) == "%s.%s" % (pkg, mod):
            return None
        raise


def collect_process(with_python: bool = True, with_locks: bool = True) -> Process:
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

    pyframes = _optional("pyframes.walker") if with_python else None
    merge = _optional("merge") if with_python else None
    locks = _optional("locks") if with_locks else None
    pyproc = None
    if pyframes is not None:
        try:
            pyproc = pyframes.describe_process(inf)
        except Exception as e:  # noqa: BLE001 - a broken runtime must not cost the native stacks
            proc.notes.append("Python runtime could not be read: %s" % e)
    if pyproc is not None and getattr(pyproc, "version", None):
        proc.python, notes = facts.python_facts(pyproc, getattr(pyproc, "target", None) or GdbTarget(inf))
        proc.notes.extend(notes)

    selected = gdb.selected_thread()
    natives_by_tid: Dict[int, List[native.NativeFrame]] = {}
    try:
        for th in sorted(inf.threads(), key=lambda t: t.num):
            th.switch()
            lwp = th.ptid[1] or th.ptid[0]
            natives = native.unwind(libs)
            stopped = native.stop_marker(natives)
            natives_by_tid[lwp] = natives
            t = Thread(tid=lwp, os_name=th.name, current=(selected is not None and th.num == selected.num))
            t.name = t.os_name
            if merge is not None and pyproc is not None:
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
    if locks is not None:
        selected = gdb.selected_thread()
        try:
            locks.annotate_waits(proc, natives_by_tid, pyproc, getattr(pyproc, "target", None) or GdbTarget(inf),
                                 frames_of_thread)
        except Exception as e:  # noqa: BLE001
            proc.notes.append("lock analysis failed: %s" % e)
        finally:
            if selected is not None and selected.is_valid():
                selected.switch()
    return proc


def collect_snapshot(with_python: bool = True, with_locks: bool = True) -> Snapshot:
    return Snapshot(processes=[collect_process(with_python, with_locks)])
