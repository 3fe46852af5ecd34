"""The process facts both engines (gdb and the direct reader) complete a Process with, from what
a core's notes or /proc say: library names and versions, argv, signal, rank, and the facts of a
truncated core.  Nothing here runs gdb.

Library naming is here in one place: a frame's library is named as the process mapped it
(``normalize_frame_libraries``), or after the mapping at its address when gdb did not know the
file (``name_unknown_libraries``); library versions come from file names (``names.library_version``).
"""

from __future__ import annotations

import bisect
import os
import re
import signal
import time
from typing import Dict, List, Optional

from hanganalyze.acquire.embedded_versions import add_embedded_versions, mentions_nccl
from hanganalyze.acquire.procfs import read_proc
from hanganalyze.acquire.ranks import identity_from_environ
from hanganalyze.acquire.sysroot import mapped_file_table, missing_library_warning
from hanganalyze.corefile import CoreInfo, MappedFile, build_id_of_file, is_library, library_warnings
from hanganalyze.errors import InputError, PtraceDenied
from hanganalyze.names import library_version
from hanganalyze_gdbext.model import Library, Process


def libraries_from_files(files: List[MappedFile]) -> List[Library]:
    out = []
    for f in files:
        if is_library(f.path):
            out.append(Library(path=f.path, build_id=f.build_id or f.disk_build_id, version=library_version(f.path)))
    return out


def normalize_frame_libraries(proc: Process, files: List[MappedFile]) -> None:
    """Name each frame's library as the process mapped it (NT_FILE or /proc/PID/maps).

    gdb reports libraries by the path the dynamic linker used (``/lib/x86_64-linux-gnu/libc.so.6``)
    while the mappings say ``/usr/lib/...`` on merged-/usr systems; one spelling per file keeps the
    frames, the library list and the signatures' library patterns in agreement.
    """
    by_real: Dict[str, str] = {}
    for f in files:
        try:
            by_real.setdefault(os.path.realpath(f.path), f.path)
            if f.found and f.found != f.path:  # under --sysroot: gdb names the copy, we the original
                by_real.setdefault(os.path.realpath(f.found), f.path)
        except (OSError, ValueError):
            continue
    cache: Dict[str, str] = {}
    for t in proc.threads:
        for fr in list(t.frames) + list(t.python_frames):
            lib = fr.library
            if not lib or fr.kind != "native":
                continue
            if lib not in cache:
                try:
                    cache[lib] = by_real.get(os.path.realpath(lib), lib)
                except (OSError, ValueError):
                    cache[lib] = lib
            fr.library = cache[lib]


# ----------------------------------------------------------------------------------- cores

#: Our marker note for an unwind that stopped on unreadable memory (gdbext/native.py), and the
#: address in gdb's message.
_UNREADABLE = re.compile(r"Cannot access memory at address (0x[0-9a-fA-F]+)")


def name_unknown_libraries(proc: Process, info: CoreInfo, forget_unmapped: bool = True) -> None:
    """Name each native frame's library after the file the core's notes map at its address.

    gdb knows only the libraries it found: a frame in a library missing on this machine is
    ``?? ()`` with no library (gdbext then names the executable), so signatures that match
    ``{function: "??", library: ...}`` would not see it, and it names the libraries added by hand
    to a truncated core after our symlinks.  With ``forget_unmapped``, an address in no mapped file
    (a garbage return address past such a frame, the vdso, JIT code) names no library.
    """
    if not info.mappings:
        return
    maps = sorted((m.start, m.end, m.path) for m in info.mappings)
    starts = [m[0] for m in maps]
    for t in proc.threads:
        for fr in list(t.frames) + list(t.python_frames):
            if fr.kind != "native" or fr.marker or not isinstance(fr.address, int) or isinstance(fr.address, bool):
                continue
            i = bisect.bisect_right(starts, fr.address) - 1
            if i >= 0 and fr.address < maps[i][1]:
                fr.library = maps[i][2].replace(" (deleted)", "")
            elif forget_unmapped and fr.library == proc.executable:
                fr.library = None


def truncated_core_facts(proc: Process, info: CoreInfo, gdb_warnings: List[str], added: int) -> List[str]:
    """Say per thread where its stack ran past the end of a truncated core, and which reads failed
    for that reason; returns gdb's warnings less those the truncation explains."""

    def beyond(text: Optional[str]) -> bool:
        m = _UNREADABLE.search(text or "")
        return m is not None and info.missing(int(m.group(1), 16))

    for t in proc.threads:
        for fr in list(t.frames) + list(t.python_frames):
            if not (fr.marker and beyond(fr.note)):
                continue
            old = fr.note
            m = _UNREADABLE.search(old or "")
            if fr.kind == "native":
                fr.note = "stack beyond the end of the truncated core (cannot read %s)" % m.group(1)
            else:
                fr.note = "%s: beyond the end of the truncated core" % old
            t.notes = [fr.note if n == old else n for n in t.notes]
        t.notes = [n + " (beyond the end of the truncated core)" if beyond(n) and "truncated core" not in n else n
                   for n in t.notes]
        w = t.waits
        if w and w.resource and w.resource.startswith("0x") and info.missing(int(w.resource, 16)):
            w.detail = "%s [its memory is beyond the end of the truncated core]" % (w.detail or "")
    proc.notes = [n + " (beyond the end of the truncated core)" if beyond(n) else n for n in proc.notes]
    if added:
        name_unknown_libraries(proc, info, forget_unmapped=False)
        proc.notes.append("the core's list of shared libraries is beyond its end: %d libraries were loaded at "
                          "the addresses its notes give" % added)
        # gdb's thread debugging needs that list too: its complaint says nothing more
        gdb_warnings = [w for w in gdb_warnings if "libthread_db" not in w]
    mf = info.file(info.executable)
    if mf is not None and mf.build_id is None and info.missing(mf.base):
        # gdb compares the executable with the build-id in the core's memory, which is not there
        gdb_warnings = [w for w in gdb_warnings if "core file may not match" not in w]
        proc.notes.append("the executable's build-id could not be checked: its first page is beyond the end "
                          "of the truncated core")
    return gdb_warnings


def complete_from_core(proc: Process, info: CoreInfo, exe_path: str) -> None:
    """What the core's notes say of the process (they decide over gdb's view), its libraries
    named as mapped (``name_unknown_libraries`` too) and its mapped-file table."""
    proc.source = "core"
    proc.pid = info.pid or proc.pid
    proc.executable = (info.executable or exe_path).replace(" (deleted)", "")
    proc.argv = info.argv or proc.argv
    # The notes decide: gdb's $_siginfo says SIGSTOP for gcore'd cores of running processes.
    proc.signal = info.signal
    if info.signal is None and info.written_by_gdb:
        proc.notes.append("core written by gdb (gcore) of a running process: no fatal signal")
    if not proc.libraries:
        proc.libraries = libraries_from_files(info.files)
    # NCCL linked into the executable or a framework library: its embedded version string
    if mentions_nccl(proc):
        add_embedded_versions(proc.libraries, [f.path for f in info.files], exe_path or proc.executable,
                              core=info.path, mappings=[(m.start, m.end, m.path) for m in info.mappings])
    normalize_frame_libraries(proc, info.files)
    proc.rank, proc.dist = identity_from_environ(info.environ, "core environment")
    name_unknown_libraries(proc, info)
    proc.mapped_files = mapped_file_table(info)


def core_warnings(info: CoreInfo, exe_warnings: List[str], options=None) -> List[str]:
    """The warnings a core's snapshot starts with, whichever engine read it: truncation first, then
    the executable's (``check_executable``), then the libraries missing or unlike the core's."""
    out = ([info.truncation_warning()] if info.truncated else []) + list(exe_warnings) + library_warnings(info)
    missing = missing_library_warning(info, options)
    if missing:
        out.append(missing)
    return out


# ------------------------------------------------------------------------------------ live


def proc_status(pid: int) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for line in (read_proc(pid, "status") or b"").decode("utf-8", "replace").splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def state_letter(pid: int) -> Optional[str]:
    st = proc_status(pid).get("State")
    return st[:1] if st else None


#: Largest pid Linux can give (pid_t is 32-bit signed; the kernel's limit is 2**22).
_PID_MAX = 2**31 - 1


#: PF_KTHREAD in /proc/PID/stat's flags (include/linux/sched.h)
_PF_KTHREAD = 0x00200000


def _kernel_thread(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return bool(int(rest[6]) & _PF_KTHREAD)
    except (OSError, IndexError, ValueError):
        return False


def check_pid(pid: int) -> None:
    if pid <= 0 or pid > _PID_MAX:
        raise InputError("--pid %d: not a process id" % pid)
    if pid == os.getpid() or proc_status(pid).get("Tgid") == str(os.getpid()):
        # gdb would stop this very process while it waits for gdb: nothing could end the wait
        raise InputError("--pid %d is hanganalyze itself" % pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise InputError("no process with pid %d" % pid) from None
    except PermissionError:
        raise PtraceDenied(pid, "not allowed to inspect pid %d (run as its user or root)" % pid) from None
    status = proc_status(pid)
    if status.get("State", "").startswith("Z"):
        raise InputError("pid %d is a zombie (it has exited; analyze its core instead)" % pid)
    if _kernel_thread(pid):  # checked before any attach: ptrace refuses one, and that is no permission problem
        raise InputError("pid %d is a kernel thread (%s): it has no user-space stack to read"
                         % (pid, status.get("Name", "?")))
    tracer = status.get("TracerPid", "0")
    if tracer not in ("", "0"):
        raise PtraceDenied(pid, "pid %d is already traced by pid %s (a debugger?); detach it first" % (pid, tracer))


def live_files(pid: int) -> List[MappedFile]:
    files: Dict[str, MappedFile] = {}
    raw = read_proc(pid, "maps")
    if raw is None:
        return []
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        lo = int(parts[0].split("-")[0], 16)
        mf = files.get(path)
        if mf is None:
            files[path] = MappedFile(path=path, base=lo, on_disk=os.path.isfile(path))
        else:
            mf.base = min(mf.base, lo)
    out = list(files.values())
    for mf in out:
        if mf.on_disk and is_library(mf.path):
            mf.disk_build_id = build_id_of_file(mf.path)
    return out


def live_argv(pid: int) -> Optional[List[str]]:
    raw = read_proc(pid, "cmdline")
    if raw is None:
        return None
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return [p.decode("utf-8", "surrogateescape") for p in parts] or None


def complete_from_live(proc: Process, pid: int, exe: Optional[str], argv: Optional[List[str]],
                       environ: Dict[str, str]) -> None:
    """What /proc says of a live process (read before it was stopped), and its libraries as mapped."""
    proc.source = "live"
    proc.pid = pid
    proc.executable = (exe or proc.executable or "").replace(" (deleted)", "") or None
    proc.argv = argv or proc.argv
    proc.signal = None
    proc.rank, proc.dist = identity_from_environ(environ, "environ")
    files = live_files(pid)
    if not proc.libraries:
        proc.libraries = libraries_from_files(files)
    if mentions_nccl(proc):
        add_embedded_versions(proc.libraries, [f.path for f in files], proc.executable)
    normalize_frame_libraries(proc, files)


def resume_if_left_stopped(pid: int, state_before: Optional[str]) -> None:
    """If a debugger (gdb, cuda-gdb) died while the target sat in a ptrace/group stop, the target may
    stay stopped ("T"):
    send SIGCONT, unless it was already stopped before we came."""
    if state_before in ("T", "t"):
        return
    for _ in range(20):
        st = state_letter(pid)
        if st not in ("T", "t"):
            return
        if proc_status(pid).get("TracerPid", "0") == "0":
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                return
        time.sleep(0.05)
