"""Reading a live process's ``/proc`` files: one place, one failure mode (None)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Optional


def read_proc(pid: int, name: str, limit: int = -1) -> Optional[bytes]:
    """``/proc/PID/NAME`` (at most ``limit`` bytes), None when unreadable: not ours, or gone.
    The one place the analyzer reads a live process's /proc files."""
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read(limit)
    except OSError:
        return None


#: Clock ticks per second of ``utime``/``stime`` in ``/proc/.../stat``.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ThreadStat:
    """What the kernel says about one thread at one moment: the facts that tell a thread that holds
    its place (asleep in the same wait, no CPU) from one that moves or spins (repeated samples)."""

    tid: int
    state: str  # "R" running, "S" sleeping, "D" disk sleep, "t" traced ...
    cpu_s: float  # utime + stime, seconds
    wchan: Optional[str] = None  # kernel function it sleeps in ("futex_wait_queue"), None when hidden
    switches: Optional[int] = None  # voluntary context switches so far: each is a wake-up and a sleep
    #: Seconds on a CPU plus seconds runnable but waiting for one (``schedstat``): a spinning
    #: thread is runnable all the time even when a loaded machine gives it a small share of a CPU.
    runnable_s: Optional[float] = None
    involuntary: Optional[int] = None  # involuntary context switches so far: preempted while it ran
    syscall: Optional[int] = None  # the system call it is blocked in (``syscall``; "running": None)


def _thread_stat(pid: int, tid: int) -> Optional[ThreadStat]:
    raw = read_proc(pid, "task/%d/stat" % tid, 4096)
    if not raw:
        return None
    text = raw.decode("ascii", "replace")
    close = text.rfind(")")  # the name in parentheses may hold spaces and ')'
    fields = text[close + 2:].split() if close >= 0 else []
    if len(fields) < 13:
        return None
    try:
        cpu = (int(fields[11]) + int(fields[12])) / float(CLOCK_TICKS)  # utime, stime: fields 14 and 15
    except ValueError:
        return None
    wchan_raw = read_proc(pid, "task/%d/wchan" % tid, 256)
    wchan = wchan_raw.decode("ascii", "replace").strip() if wchan_raw else None
    counts = _switches(read_proc(pid, "task/%d/status" % tid, 8192) or b"")
    runnable = None
    sched = (read_proc(pid, "task/%d/schedstat" % tid, 256) or b"").split()
    if len(sched) >= 2:
        try:
            runnable = (int(sched[0]) + int(sched[1])) / 1e9
        except ValueError:
            pass
    return ThreadStat(tid=tid, state=fields[0], cpu_s=cpu, wchan=wchan if wchan not in (None, "", "0") else None,
                      switches=counts.get(b"voluntary_ctxt_switches"), runnable_s=runnable,
                      involuntary=counts.get(b"nonvoluntary_ctxt_switches"),
                      syscall=_syscall(read_proc(pid, "task/%d/syscall" % tid, 256)))


def _switches(status: bytes) -> Dict[bytes, int]:
    """``voluntary_ctxt_switches`` and ``nonvoluntary_ctxt_switches`` of a ``status`` file."""
    out: Dict[bytes, int] = {}
    for line in status.splitlines():
        key, _, value = line.partition(b":")
        if key in (b"voluntary_ctxt_switches", b"nonvoluntary_ctxt_switches"):
            try:
                out[key] = int(value.split()[0])
            except (ValueError, IndexError):
                pass
    return out


def _syscall(raw: Optional[bytes]) -> Optional[int]:
    """The number in ``/proc/.../syscall`` (``"202 0x..."``); None when running ("running", "-1")
    or unreadable (it needs ptrace access, read without stopping the thread)."""
    first = (raw or b"").split(b" ", 1)[0].strip()
    try:
        n = int(first)
    except ValueError:
        return None
    return n if n >= 0 else None


def thread_stats(pid: int) -> Dict[int, ThreadStat]:
    """Every thread of ``pid`` (``/proc/PID/task/TID/{stat,wchan,status,schedstat}``) by tid; {} when the
    process is gone or not ours.  A thread that exits while it is read is left out."""
    try:
        tids = [int(n) for n in os.listdir("/proc/%d/task" % pid) if n.isdigit()]
    except OSError:
        return {}
    out: Dict[int, ThreadStat] = {}
    for tid in tids:
        st = _thread_stat(pid, tid)
        if st is not None:
            out[tid] = st
    return out
