"""A live process, stopped with ptrace for as long as it is read, then released as it was.

``PTRACE_SEIZE`` + ``PTRACE_INTERRUPT`` stop every thread without sending a signal (nothing the
program can observe, unlike ``PTRACE_ATTACH``'s SIGSTOP, and no group stop to undo); registers
come from ``PTRACE_GETREGS``, memory from ``/proc/PID/mem``.  ``close`` detaches every thread,
also after Ctrl-C or an error, so the process never stays stopped.  Never an inferior call.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import time
from typing import List, Optional, Tuple

from hanganalyze.deadline import Deadline
from hanganalyze.direct.mapped import VDSO, MappedProcess
from hanganalyze.direct.stackscan import Regions
from hanganalyze.direct.unwind import GREG_NAMES, ModuleMap
from hanganalyze.errors import InputError, PtraceDenied

PTRACE_GETREGS = 12
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000
_REGS = struct.Struct("<27Q")

_libc = None


def _ptrace():
    global _libc
    if _libc is None:
        # glibc's soname; not ctypes.util.find_library("c"), which runs ``ldconfig -p`` in a child
        # process and imports tempfile: ~15 ms of every run, for the same answer
        try:
            _libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:  # not glibc (musl): ask the slow way
            from ctypes.util import find_library  # here: ctypes.util imports subprocess etc. (start-up time)

            _libc = ctypes.CDLL(find_library("c"), use_errno=True)
        _libc.ptrace.restype = ctypes.c_long
        _libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
    return _libc.ptrace


def _call(req: int, tid: int, addr=None, data=None) -> int:
    ctypes.set_errno(0)
    r = _ptrace()(req, tid, addr, data)
    if r == -1:
        e = ctypes.get_errno()
        if e:
            raise OSError(e, os.strerror(e))
    return r


def _tids(pid: int) -> List[int]:
    try:
        return sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
    except OSError:
        return []


class LiveProcess(MappedProcess):
    """Every thread of ``pid`` stopped; use as a context manager."""

    kind = "live"

    def __init__(self, pid: int, timeout: float = 10.0):
        super().__init__()
        self.pid = pid
        self.timeout = timeout
        self.attached: List[int] = []
        self._mem_fd: Optional[int] = None
        self.mappings: List[Tuple[int, int, int, str]] = []

    # ---------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> LiveProcess:
        try:
            self._attach_all()
            self._mem_fd = os.open("/proc/%d/mem" % self.pid, os.O_RDONLY)
            self._read_maps()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _attach_all(self) -> None:
        deadline = Deadline(self.timeout)
        for _round in range(50):
            new = [t for t in _tids(self.pid) if t not in self.attached]
            if not new:
                break
            for tid in new:
                try:
                    _call(PTRACE_SEIZE, tid, None, None)
                except OSError as e:
                    if e.errno == errno.ESRCH:
                        continue  # the thread exited meanwhile
                    if e.errno == errno.EPERM:
                        raise PtraceDenied(self.pid,
                            "not allowed to attach to pid %d (ptrace: Operation not permitted): run as its user or "
                            "root, and check /proc/sys/kernel/yama/ptrace_scope and container capabilities "
                            "(CAP_SYS_PTRACE)" % self.pid) from None
                    raise InputError("cannot attach to pid %d thread %d: %s" % (self.pid, tid, e.strerror)) from None
                self.attached.append(tid)
                try:
                    _call(PTRACE_INTERRUPT, tid, None, None)
                except OSError:
                    continue
                self._wait_stopped(tid, deadline)
        if not self.attached:
            raise InputError("pid %d exited before it could be attached" % self.pid)
        buf = ctypes.create_string_buffer(_REGS.size)
        for tid in list(self.attached):
            try:
                _call(PTRACE_GETREGS, tid, None, ctypes.addressof(buf))
            except OSError:
                continue
            self.regs[tid] = dict(zip(GREG_NAMES, _REGS.unpack(buf.raw)))
            try:
                with open("/proc/%d/task/%d/comm" % (self.pid, tid), "rb") as f:
                    self.names[tid] = f.read().decode("utf-8", "replace").rstrip("\n") or None
            except OSError:
                self.names[tid] = None

    def _wait_stopped(self, tid: int, deadline: Deadline) -> None:
        while True:
            try:
                wpid, _status = os.waitpid(tid, WALL | os.WNOHANG)
            except ChildProcessError:
                return
            if wpid:
                return
            if deadline.passed():
                raise InputError("pid %d thread %d did not stop within %.0f s" % (self.pid, tid, self.timeout))
            time.sleep(0.0005)

    def close(self) -> None:
        if self._mem_fd is not None:
            os.close(self._mem_fd)
            self._mem_fd = None
        for tid in self.attached:
            try:
                _call(PTRACE_DETACH, tid, None, None)
            except OSError:
                pass
        self.attached = []

    def _read_maps(self) -> None:
        rows = []
        regions = []
        vdso = None
        with open("/proc/%d/maps" % self.pid) as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) < 5:
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                regions.append((lo, hi, "x" in parts[1]))
                if len(parts) == 6 and parts[5].strip() == VDSO:
                    vdso = lo
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                rows.append((lo, hi, int(parts[2], 16), parts[5].rstrip("\n")))
        self.mappings = rows
        self.regions = Regions(regions)
        self.modules = ModuleMap(rows, self._resolve)
        self.add_vdso(vdso)

    def _resolve(self, path: str) -> Optional[str]:
        """The file the process mapped: its own mount namespace's view when that differs from ours
        (a container), else the plain path (shared with other ranks: parsed once per run)."""
        if path.endswith(" (deleted)"):
            return None
        inside = "/proc/%d/root%s" % (self.pid, path)
        try:
            a, b = os.stat(inside), os.stat(path)
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                return path
        except OSError:
            pass
        return inside if os.path.exists(inside) else None

    # ---------------------------------------------------------------------- memory
    def read(self, addr: int, size: int) -> Optional[bytes]:
        if self._mem_fd is None or addr <= 0 or addr >= 1 << 63:
            return None
        try:
            b = os.pread(self._mem_fd, size, addr)
        except OSError:
            return None
        return b if len(b) == size else None

    def executable(self) -> Optional[str]:
        try:
            return os.readlink("/proc/%d/exe" % self.pid)
        except OSError:
            return None
