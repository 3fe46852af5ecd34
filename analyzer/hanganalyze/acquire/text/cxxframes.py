"""C++ frame lists printed by a program about itself: PyTorch's (``c10::Error``, the NCCL
watchdog, ``c10::FatalSignalHandler``) and ``backtrace_symbols()`` lines (glibc, UCX).

::

    terminate called after throwing an instance of 'c10::Error'          -> messages
      what():  CUDA error: initialization error
    Exception raised from insert_events at .../CUDACachingAllocator.cpp:717 (most recent call first):
    frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x4d (0x7fcc65f5177d in /x/libc10.so)
    frame #3: <unknown function> + 0x5f65b2 (0x7f08725575b2 in /x/libtorch_python.so)  -> function None
    frame #8: /home/user/.venv/bin/python() [0x510ceb]                  -> function None, library
    frame #9: /lib/libc.so.6(__libc_start_main+0xf3) [0x7f..]            (``backtrace_symbols`` form)
    SIGABRT(6), PID: 3154296, Thread 3154392:                           -> tid, pid, signal
     frame #0: c10::FatalSignalHandler::stacktraceSignalHandler(bool) + 0x8b (0x7f.. in /x/libc10.so)

UCX (``[host:pid] Caught signal 11 (Segmentation fault: ...)``, ``==== backtrace (tid:  74387) ====``,
`` 0  /usr/lib/libucs.so.0(ucs_handle_error+0x10c) [0x7eced5f1a08c]``) -> signal, tid, frames; with
debug info UCX prints `` 5 0x0000000000001403 gpuAssert.constprop.0()  main.c:0`` (number, address,
function, file:line; ``???:0`` unknown), read under its header only.  The header is kept as a line
too: only UCX's error handler prints it (``analyze/crashframes.py``).

``frame #0`` is the innermost frame: kept in that order.  Each ``Exception raised from`` or
``SIGxxx(n), PID: p, Thread t:`` header, and each ``frame #0`` after other frames, starts a new
stack (a Thread here).  Lines a log collector prefixed (``| 1679087716684 | frame #23: ...``) and
Markdown's ``frame_#_0`` are read too; a frame line cut at the terminal's width is joined with its
continuation.  A frame cut by the end of the paste keeps what it shows, with a note.
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, numbered_run, split_call, to_int, unknown_function

NAME = "cxxframes"

_NUM = re.compile(r"^(\d{1,6}):\s?(.*)$")
_SIGNAL_HEAD = re.compile(r"^(SIG[A-Z]{2,8})\(\d{1,3}\), PID: (\d{1,10}), Thread (\d{1,10}):")
_EXC_HEAD = "Exception raised from "
_HEX = re.compile(r"^0x[0-9a-fA-F]{1,16}$")


def frame_body(line: str) -> Optional[tuple]:
    """(number, body) of a ``frame #N: body`` line, wherever the line's prefix ends; else None."""
    i = line.find("frame #")
    skip = 7
    if i < 0:
        i = line.find("frame_#_")
        skip = 8
        if i < 0:
            return None
    if i > 0 and (line[i - 1].isalnum() or line[i - 1] == "_"):
        return None
    m = _NUM.match(line[i + skip:])
    if not m or m.group(2).startswith("0x"):  # "frame #0: 0x0000.. module`f": lldb's
        return None
    return int(m.group(1)), m.group(2).strip()


#: Open MPI's (opal's) crash handler: ``[host:pid] [ 3] /x/libnccl.so.2(+0x3533c)[0x7f..]``: the
#: process's tag, the frame's index in brackets, no space before the address.
_OPAL = re.compile(r"^(?:\[[\w.-]{1,100}:\d{1,10}\] )?\[ {0,3}(\d{1,4})\] ")


#: An executable's bare name in a ``backtrace_symbols()`` line.
_EXE = re.compile(r"^[A-Za-z_][\w.+-]{0,100}$")


def symbols_body(s: str) -> Optional[tuple]:
    """(index or None, body) of a ``backtrace_symbols()`` line (stripped): glibc's
    ``/lib/libc.so.6(abort+0x12) [0x7f..]``, UCX's `` 3  /x/_raylet.so(+0xb996ba) [0x7f..]``,
    Open MPI's ``[host:pid] [ 3] /x/lib.so(+0x3533c)[0x7f..]``."""
    symbol = None
    if not s.endswith("]"):
        # Ray's (and absl's) form: the demangled name after the address, ``LIB(+0x..) [0x..] ns::f()``
        k = s.find(") [0x")
        j = s.find("] ", k + 5) if k > 0 else -1
        if j < 0 or not _HEX.match(s[k + 3:j]):
            return None
        symbol, _args = split_call(s[j + 2:].strip())
        s = s[: j + 1]
    m = _OPAL.match(s) if s.startswith("[") else None
    if m is not None:
        s = "%s %s" % (m.group(1), s[m.end():].replace(")[0x", ") [0x", 1))
    elif s.endswith("]") and ")[0x" in s and " [0x" not in s:
        s = s.replace(")[0x", ") [0x", 1)  # glibc's backtrace_symbols_fd writes no blank (cysignals' dump)
    k = s.rfind(" [")
    if k < 0 or not _HEX.match(s[k + 2:-1]):
        return None
    left = s[:k].rstrip()
    p = left.find("(")
    if p <= 0 or not left.endswith(")"):
        return None
    words = left[:p].split()
    if not words or len(words) > 2 or (len(words) == 2 and not words[0].isdigit()):
        return None
    lib = words[-1]
    inner = left[p:]
    if "/" not in lib and ".so" not in lib and not (_EXE.match(lib) and "+0x" in inner):
        return None  # a bare name only as an executable's frame (``python3(PyEval_EvalCode+0x14)``)
    if symbol and inner[1:2] in ("+", ")"):  # no name of its own in the parentheses: the trailing one
        inner = "(%s%s" % (symbol, inner[1:])
    return (int(words[0]) if len(words) == 2 else None), lib + inner + s[k:]


_UCX_HEAD = "==== backtrace"
#: UCX's frame with debug info: "%2d 0x%016lx %s()  %s:%u" (the function, then two spaces).
_UCX_NUM = re.compile(r"^\d{1,4} 0x[0-9a-fA-F]{1,16} \S")


def ucx_frame(s: str) -> Optional[Frame]:
    """A UCX ``N 0xADDR function()  file:line`` line (stripped) as a frame; else None."""
    if not _UCX_NUM.match(s):
        return None
    _num, addr, rest = s.split(" ", 2)
    k = rest.rfind("()  ")
    if k <= 0:
        return None
    file, _sep, line = rest[k + 4:].strip().rpartition(":")
    f = Frame(kind="native", function=unknown_function(rest[:k].strip() or None), address=to_int(addr, 16))
    if file and file != "???":
        f.file, f.line = file, (to_int(line) or None)
    return f
_CAUGHT = re.compile(r"^Caught signal (\d{1,2}) \(")
_SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV"}


#: How many consecutive numbered UCX frame lines make its frames without their header.
UCX_RUN = 3


def _ucx_run(lines: List[str], i: int) -> bool:
    """Lines ``i`` on start ``UCX_RUN`` UCX frame lines numbered one after another."""
    return numbered_run(lines, i, UCX_RUN, lambda s: ucx_frame(s) is not None)


def score(lines: List[str]) -> float:
    frames = headers = 0
    ucx = False
    for i, line in enumerate(lines):
        if not ucx and line[:3].strip().isdigit() and _ucx_run(lines, i):
            ucx = True  # its header cut: the run of numbered frames speaks for it
        if "frame" in line and frame_body(line) is not None:
            frames += 1
            continue
        s = line.strip()
        if "]" in s and symbols_body(s) is not None:
            frames += 1
        elif ucx and ucx_frame(s) is not None:
            frames += 1
        elif s.startswith(_EXC_HEAD) or s.startswith(_UCX_HEAD) or (s.startswith("SIG") and _SIGNAL_HEAD.match(s)):
            headers += 1
            ucx = ucx or s.startswith(_UCX_HEAD)
    if frames == 0:
        return 0.0
    return 2.0 * frames + 5.0 * headers


def _complete(body: str) -> bool:
    return body.endswith(")") or body.endswith("]")


def parse_frame(body: str) -> Frame:
    """One frame body -> Frame (string operations only: linear)."""
    f = Frame(kind="native")
    if body.endswith("]"):
        # backtrace_symbols(): "LIB(SYM+0xOFF) [0xADDR]" or "LIB() [0xADDR]"
        k = body.rfind(" [")
        if k >= 0 and _HEX.match(body[k + 2:-1]):
            f.address = to_int(body[k + 2:-1], 16)
            left = body[:k].rstrip()
            p = left.find("(")
            if p > 0 and left.endswith(")"):
                f.library = left[:p] or None
                sym = left[p + 1:-1].split("+", 1)[0].strip()  # "+0xb996ba": no symbol
                f.function = unknown_function(sym or None)
            else:
                f.library = left or None
            return f
    i = body.rfind(" (0x")
    if i >= 0:
        inner = body[i + 2:-1] if body.endswith(")") else body[i + 2:]
        addr, sep, lib = inner.partition(" in ")
        f.address = to_int(addr.strip(), 16) if _HEX.match(addr.strip()) else None
        if sep and body.endswith(")"):
            f.library = lib.strip() or None
        body = body[:i]
    j = body.rfind(" + 0x")
    if j >= 0:
        body = body[:j]
    sym = body.strip()
    f.function = None if sym == "<unknown function>" else unknown_function(sym or None)
    return f


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    cur: Optional[Thread] = None
    pending: Optional[str] = None  # the header naming the next stack
    n = len(lines)
    i = 0
    while i < n:
        line = lines[i]
        i += 1
        s = line.strip()
        if not s:
            continue
        fb = frame_body(s) if "frame" in s else None
        if fb is None and "]" in s:
            sb = symbols_body(s)
            if sb is not None:
                if cur is None or (sb[0] == 0 and cur.frames):
                    cur = Thread(merge="native-only")
                    cur.notes.append(pending or "no header above these frames (the paste starts inside a stack)")
                    threads.append(cur)
                    pending = None
                cur.frames.append(parse_frame(sb[1]))
                continue
        if fb is None and cur is None and _ucx_run(lines, i - 1):
            # UCX's frames with their header cut (a paste's later chunk): a run of numbered lines
            cur = Thread(merge="native-only")
            cur.notes.extend(["no header above these frames (the paste starts inside a stack)", "UCX backtrace"])
            threads.append(cur)
            pending = None
        if fb is None and cur is not None and "UCX backtrace" in cur.notes:
            uf = ucx_frame(s)
            if uf is not None:
                cur.frames.append(uf)
                continue
        if fb is not None:
            num, body = fb
            joined = 0
            # a frame line the terminal cut: its continuation holds the rest of "(0x.. in LIB)"
            while not _complete(body) and i < n and joined < 5 and lines[i].strip() \
                    and "frame" not in lines[i] and body.count("(") > body.count(")"):
                body += lines[i].strip()
                i += 1
                joined += 1
            if cur is None or (num == 0 and cur.frames):
                cur = Thread(merge="native-only")
                cur.notes.append(pending or "no header above these frames (the paste starts inside a stack)")
                threads.append(cur)
                pending = None
            f = parse_frame(body)
            if not _complete(body):
                f.note = "frame line cut: only its beginning is in the text"
            cur.frames.append(f)
            continue
        m = _SIGNAL_HEAD.match(s) if s.startswith("SIG") else None
        if m:
            proc.signal = proc.signal or m.group(1)
            proc.pid = proc.pid or to_int(m.group(2))
            cur = Thread(tid=to_int(m.group(3)), merge="native-only")
            cur.notes.append("c10 fatal signal handler: %s" % s.rstrip(":"))
            threads.append(cur)
            pending = None
            continue
        if s.startswith(_EXC_HEAD):
            pending = "c10 exception: %s" % s[: 400]
            cur = None
        elif s.startswith(_UCX_HEAD):
            tid = to_int(s[len(_UCX_HEAD):].partition("(tid:")[2].split(")")[0].strip() or None)
            cur = Thread(tid=tid, merge="native-only")
            cur.notes.append("UCX backtrace")
            threads.append(cur)
            pending = None
            messages.append(s)
            continue
        elif "Caught signal " in s:
            m = _CAUGHT.match(s[s.find("Caught signal "):])
            if m:
                proc.signal = proc.signal or _SIGNALS.get(int(m.group(1)))
        messages.append(s)
    proc.threads.extend(threads)
    proc.messages.extend(cap_messages(messages, proc.notes))
