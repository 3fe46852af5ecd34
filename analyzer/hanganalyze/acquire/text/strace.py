"""strace's output for a process that hangs (``strace -p PID``, ``strace -f``): the system call each
thread stands in.

::

    strace: Process 9268 attached                          -> the process (its pid)
    [pid  9270] 11:06:36.426652 futex(0x478f800, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>
    futex(0x478f800, FUTEX_WAIT_PRIVATE, 2, NULL^Cstrace: Process 9268 detached
    read(5, "x", 1)                         = 1            -> a call that returned
    epoll_wait(4, [], 64, 1000)             = 0            -> ... again and again: a loop

A thread (``[pid N]``, else the attached process) is where its last call stands: a call with no
result (strace printed it when it started and the paste ends, or the trace was stopped, before it
returned) is where it blocks; a thread whose last call returned stands in the call it makes in a
loop, or, where that loop keeps failing to take a lock (``flock(.., LOCK_EX|LOCK_NB) = -1 EAGAIN``), in that
lock call.  Each becomes a thread of one frame named by the call (``futex``, ``read``, ``wait4``...)
that the wait lists read as any stack's innermost frame; a futex wait (``FUTEX_WAIT*``,
``FUTEX_LOCK_PI``) is a wait for a lock or a condition variable, which strace cannot tell apart
(``Thread.waits`` of kind ``futex``).  Every other line is a message.  Sealed and open rounds
had strace's futex wait pasted beside or instead of a stack (awx-4181, ray-45822, zlog-246).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread, Wait

from .common import cap_messages, to_int

NAME = "strace"

#: (strace before 4.12 printed it without its name: "Process 20069 attached", open round 43's pipenv-303)
_ATTACHED = re.compile(r"^(?:strace: Process (\d{1,10}) attached|"
                       r"Process (\d{1,10}) attached(?: - interrupt to quit| with \d{1,6} threads)?$)")
#: ``[pid  123] `` (``-f``), a time (``-t``/``-tt``/``-ttt``/``-r``), then ``name(args`` and its end.
#: (after grep -n's line number, open round 106: ``553976: [pid 33616] 1701835810.183378 (+ 0.000096) futex(``,
#: an absolute time then -r's relative one)
_CALL = re.compile(r"^(?:\s{0,12}\d{1,9}:\s{1,4})?(?:\[pid\s{1,8}(\d{1,10})\]\s)?"
                   r"(?:\d{1,2}:\d\d:\d\d(?:\.\d{1,9})?\s|\d{6,12}\.\d{1,9}\s|\s{0,4}\d{1,6}\.\d{6}\s)?"
                   r"(?:\(\+\s{0,8}\d{1,6}\.\d{6}\)\s)?([a-z_][a-z0-9_]{1,30})\((.{0,3000})$")
#: The call's result: ``) = 0``, ``) = -1 EAGAIN (...)``, ``) = ?`` (the thread exited in it).
_RESULT = re.compile(r"\)\s+=\s+(?:-?\d+|0x[0-9a-f]+|\?)")
_RESUMED = re.compile(r"^(?:\s{0,12}\d{1,9}:\s{1,4})?(?:\[pid\s{1,8}(\d{1,10})\]\s)?(?:[\d:.]+\s)?"
                      r"(?:\(\+\s{0,8}\d{1,6}\.\d{6}\)\s)?<\.\.\. ([a-z_][a-z0-9_]{1,30}) resumed>")
#: Calls strace names; a line of prose with a parenthesis is none of them.
_SYSCALLS = frozenset((
    "futex", "read", "readv", "pread64", "write", "writev", "pwrite64", "recvfrom", "recvmsg", "recvmmsg", "recv",
    "sendto", "sendmsg", "send", "connect", "accept", "accept4", "poll", "ppoll", "select", "pselect6", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "wait4", "waitid", "waitpid", "nanosleep", "clock_nanosleep", "flock", "fcntl",
    "pause", "rt_sigsuspend", "rt_sigtimedwait", "sigsuspend", "msgrcv", "semop", "semtimedop", "io_getevents",
    "io_uring_enter", "ioctl", "sched_yield", "openat", "open", "close", "mmap", "munmap", "restart_syscall",
    "clone", "clone3", "execve", "kill", "tgkill", "rt_sigaction", "rt_sigprocmask", "getpid", "gettid",
    "clock_gettime", "gettimeofday", "mprotect", "brk", "madvise", "lseek", "fstat", "newfstatat", "stat",
    "getdents64", "pipe2", "dup2", "socket", "bind", "listen", "shutdown", "getsockopt", "setsockopt",
))
_FUTEX_WAIT = re.compile(r"FUTEX_(?:WAIT|LOCK_PI|WAIT_REQUEUE_PI)")
#: A lock call that failed (a non-blocking try another process holds, or a file system without locks):
#: in a loop of calls that return, the thread polls a lock file (open round 47's Lustre, ENOSYS).
_LOCK_CALLS = frozenset(("flock", "fcntl", "lockf"))
_LOCK_FAILED = re.compile(r"\)\s+=\s+-1 (E(?:AGAIN|WOULDBLOCK|NOSYS|NOLCK|ACCES|OPNOTSUPP))\b")
_LOCK_CMD = re.compile(r"\bLOCK_(?:EX|SH)\b|\bF_(?:OFD_)?SETLKW?\b")
#: Lines of calls (or an attach header) a text needs before it is read as strace's.
MIN_CALLS = 2


def _call(s: str):
    m = _CALL.match(s)
    if m is None or m.group(2) not in _SYSCALLS:
        return None
    return m


def score(lines: List[str]) -> float:
    heads = calls = 0
    for line in lines:
        s = line.strip()
        if s.startswith(("strace: Process ", "Process ")) and _ATTACHED.match(s):
            heads += 1
        elif s and (s[0].isalpha() or s[0] in "[0123456789 ") and _call(s) is not None:
            calls += 1
    if heads == 0 and calls < 3:
        return 0.0
    return 4.0 * heads + calls if heads + calls >= MIN_CALLS else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    last: Dict[Optional[int], tuple] = {}  # pid (None: not known) -> (call, args, returned)
    lockfail: Dict[Optional[int], str] = {}  # pid -> the last failed lock call ("flock(...) = -1 ENOSYS")
    order: List[Optional[int]] = []
    attached: Optional[int] = None  # the process of the lines with no ``[pid N]``: the last attached
    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = _ATTACHED.match(s)
        if m:
            attached = to_int(m.group(1) or m.group(2))
            proc.pid = proc.pid or attached
            messages.append(s)
            continue
        r = _RESUMED.match(s)
        if r:
            pid = to_int(r.group(1)) or attached
            if pid in last:
                last[pid] = (r.group(2), last[pid][1], _RESULT.search(s) is not None)
            continue
        c = _call(s)
        if c is None:
            messages.append(s)
            continue
        pid = to_int(c.group(1)) or attached
        if pid not in last:
            order.append(pid)
        args = c.group(3)
        last[pid] = (c.group(2), args, _RESULT.search(s) is not None)
        failed = _LOCK_FAILED.search(args) if c.group(2) in _LOCK_CALLS and _LOCK_CMD.search(args) else None
        if failed:
            lockfail[pid] = "%s(...) = -1 %s" % (c.group(2), failed.group(1))
        if "strace: Process" in args:  # "NULL^Cstrace: Process 9268 detached": the trace stopped in it
            messages.append(args[args.index("strace: Process"):])
    for pid in order:
        name, args, returned = last[pid]
        looped = returned and pid in lockfail
        if looped:  # the loop's calls return; the lock it keeps failing to take is what it waits for
            name = lockfail[pid].split("(", 1)[0]
        t = Thread(tid=pid)
        t.current = pid is None or pid == proc.pid
        t.frames.append(Frame(kind="native", function=name))
        t.notes.append("strace: %s %s" % (name, "returned, the last call seen (a loop)" if returned
                                          else "with no result: the thread blocks in it"))
        if looped:
            t.notes[-1] = ("strace: a loop of calls that return, around a lock call that fails (%s): the thread "
                           "polls a lock file it cannot take (held by another process, or a file system without "
                           "locks: ENOSYS / ENOLCK)" % lockfail[pid])
        if name == "futex" and not returned and _FUTEX_WAIT.search(args):
            t.waits = Wait(kind="futex", resource=args.split(",", 1)[0].strip() or None, frame=0,
                           detail="strace: a futex wait (a lock or a condition variable)")
        proc.threads.append(t)
    proc.messages.extend(cap_messages(messages, proc.notes))
