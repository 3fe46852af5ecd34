"""Linux kernel stacks of a task that hangs inside the kernel: ``cat /proc/PID/stack`` (or
``/proc/PID/task/TID/stack``), and the kernel log's hung-task report (``dmesg``, ``journalctl -k``,
a sysrq ``w`` / ``t`` dump).

::

    [<0>] futex_wait_queue_me+0xc4/0x120                  -> /proc/PID/stack: a frame
    INFO: task python:12345 blocked for more than 120 seconds.    -> a task (name, pid), a hang line
    task:python          state:D stack:0 pid:12345 ppid:1 flags:0x00004002
    Call Trace:
     <TASK>                                                -> markers, not frames
     schedule+0x69/0x110                                   -> a frame
     ? os_acquire_spinlock+0x12/0x30 [nvidia]              -> "?": a stale address the unwinder saw, no frame
     os_acquire_mutex+0x1a/0x50 [nvidia]                   -> a frame of a module (its library)

A process stuck in the kernel (state D: a GPU driver's ioctl, a network filesystem, a disk) shows
only ``schedule`` and the like in a user-space stack, or nothing at all; its kernel stack says
what it waits for.  The wait lists (``signatures/triage/waits.yaml``) name the kernel's wait
functions per category: a driver's entry points (NVIDIA's ioctl, a DMA fence), the futex wait,
a network socket's, a pipe's, the page cache's I/O, a child's wait.  Frames are innermost first, as
the kernel prints them.  The log's prefixes (``[ 3625.123456]``, ``kernel:``) are taken off;
every other line is a message.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "kernel-stack"

#: dmesg's time, journalctl's / syslog's ``Mon DD HH:MM:SS host kernel:`` (taken off each line).
_PREFIX = re.compile(r"^(?:\w{3} [ \d]\d \d\d:\d\d:\d\d \S{1,64} kernel: ?)?"
                     r"(?:\[\s{0,12}\+?\d{1,10}\.\d{1,9}\]\s?|\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\]\s?)?")
#: ``[<0>] name+0x1a/0x50 [module]`` / `` name+0x1a/0x50 [module]`` / ``[<ffffffff8110a7c4>] name+0x..``
_FRAME = re.compile(r"^(?:\[<[0-9a-f]{1,16}>\]\s{1,4})?(\?\s)?([A-Za-z_.$][\w.$]{0,200})"
                    r"\+0x[0-9a-f]{1,10}/0x[0-9a-f]{1,10}(?:\s\[([\w-]{1,64})(?:\]|\s))?")
#: An ARM kernel's ``[<c0646518>] (__schedule) from [<c06469e8>] (schedule+0x50/0xa8)``: the first name
#: is the frame (each row names a function and its caller)
_ARM = re.compile(r"^\[<[0-9a-f]{1,16}>\] \(([A-Za-z_.$][\w.$]{0,200}?)(?:\+0x[0-9a-f]{1,10}/0x[0-9a-f]{1,10})?\)"
                  r" from \[<")
#: Kernels before 4.14 head a task's report ``python3   D ffff880838017788   0  5604   3943 0x00000000``
_OLD_TASK = re.compile(r"^(\S.{0,63}?)\s+D\s+(?:[0-9a-f]{8,16}\s+)?\d+\s+(\d{1,10})\s+\d{1,10}\s+0x[0-9a-f]{1,16}$")
_HUNG = re.compile(r"^INFO: task (.{1,64}?):(\d{1,10}) blocked for more than \d+ seconds")
_TASK = re.compile(r"^task:(.{1,64}?)\s+state:(\w)\b.*?\bpid:\s*(\d{1,10})")
_MARKERS = ("<TASK>", "</TASK>", "<IRQ>", "</IRQ>", "<NMI>", "</NMI>", "<EOI>")
#: Frames a text needs (with no task header) before it is read as a kernel stack.
MIN_FRAMES = 3


def _frame_line(s: str) -> Optional[Tuple[Optional[str], str, Optional[str]]]:
    """(the unreliable mark "? ", the function, its module) of a frame row, else None."""
    if s.startswith("[<") and ") from [<" in s:
        a = _ARM.match(s)
        return (None, a.group(1), None) if a else None
    m = _FRAME.match(s) if "+0x" in s else None
    return (m.group(1), m.group(2), m.group(3)) if m else None


def score(lines: List[str]) -> float:
    heads = frames = 0
    for line in lines:
        s = _PREFIX.sub("", line.strip(), count=1).strip()
        if (s.startswith(("INFO: task ", "task:")) and (_HUNG.match(s) or _TASK.match(s))) or _OLD_TASK.match(s):
            heads += 1
        elif _frame_line(s) is not None:
            frames += 1
    if frames < MIN_FRAMES and not (heads and frames):
        return 0.0
    return 5.0 * heads + 1.5 * frames


def _task(threads: List[Thread], tid: Optional[int], name: str, note: str) -> Thread:
    """The thread of task ``tid``: the one a line above made (a hung-task line, then its task line), or
    a new one."""
    found = next((t for t in threads if t.tid == tid), None)
    if found is None:
        found = Thread(tid=tid, name=name)
        found.notes.append(note)
        threads.append(found)
    return found


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    for line in lines:
        s = _PREFIX.sub("", line.strip(), count=1).strip()
        if not s:
            continue
        m = _HUNG.match(s)
        if m:
            cur = _task(threads, to_int(m.group(2)), m.group(1), "kernel stack (the kernel's hung-task report)")
            messages.append(s)
            continue
        m = _TASK.match(s)
        o = None if m else _OLD_TASK.match(s)
        if m or o:
            tid, name, state = ((to_int(m.group(3)), m.group(1), m.group(2)) if m
                                else (to_int(o.group(2)), o.group(1), "D"))
            cur = _task(threads, tid, name.strip(), "kernel stack (a task the kernel listed)")
            cur.notes.append("state %s" % state)
            continue
        if s in _MARKERS or s.startswith("Call Trace:"):
            continue
        f = _frame_line(s)
        if f is not None:
            if f[0]:
                continue  # "? name": an address found on the stack, not a call the unwinder followed
            if cur is None:
                cur = Thread()
                cur.notes.append("kernel stack (/proc/PID/stack)")
                threads.append(cur)
            cur.frames.append(Frame(kind="native", function=f[1], library=f[2] or "vmlinux"))
            continue
        messages.append(s)
    proc.threads.extend(t for t in threads if t.frames)
    proc.messages.extend(cap_messages(messages, proc.notes))
