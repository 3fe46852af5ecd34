"""lldb backtraces: ``bt``, ``bt all``, ``thread backtrace all`` (macOS and Linux).

::

    * thread #1, queue = 'com.apple.main-thread', stop reason = signal SIGSTOP   -> current thread
      thread #2, name = 'worker'                                 -> name; ``tid = N`` when printed
      * frame #0: 0x00000001aa919084 Metal`pthread_cond_wait + 12  -> function, library, address
        frame #1: 0x0000000102383440 llama-bench`ggml_graph_compute_thread(data=0x1) at ggml.c:19133:5
        frame #0: 0x00007f7e8be972c1 libc.so.6`__GI___futex_abstimed_wait_cancelable64 [inlined]
                  __futex_abstimed_wait_common64(private=<unavailable>) at futex-internal.c:57:12
                                                                  -> the inlined function, inlined=True
        frame #0: 0x000000012d95d0b4                               -> function None (no symbol)

Frames are innermost first, as lldb prints them.  The module before the backtick goes to
``library`` (the executable's name for its own frames, as lldb prints it).  With debug info lldb
prints argument values after the name (``f(x=1)``): they are dropped; without it the
parenthesised part is the C++ signature (``at::TensorIterator::for_each(...)``), kept as gdb keeps
it.  ``___lldb_unnamed_symbolN`` is lldb's name for "no symbol": ``function=None``.

The disassembly lldb prints when a process stops (``->  0x7fff <+10>: jae ...``), its prompts and
its remarks about itself are dropped.  A thread listed twice (the stop echo, then ``bt all``) is
kept once.  ``tid`` is what lldb prints as ``tid =`` (the kernel's thread id: the LWP on Linux).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from hanganalyze.cnames import last_group_start
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int, unknown_function

NAME = "lldb-bt"

_FRAME = re.compile(r"^(\* +)?frame #(\d{1,6}):(.*)$")
_THREAD = re.compile(r"^(\* +)?thread #(\d{1,7})(?:[,:] ?(.*))?$")
_TID = re.compile(r"\btid = (0x[0-9a-fA-F]{1,16}|\d{1,10})")
_AT = re.compile(r"^(\S+?):(\d{1,9})(?::\d{1,6})?$")
_PROCESS = re.compile(r"^Process (\d{1,10}) (?:stopped|launched|exited|resuming|attached)")
_NOISE = (
    "(lldb)", "Executable module set to", "Architecture set to", "Current executable set to",
    "Target 0:", "warning: ", "Attaching to process", "Process ",
)
#: Stop reasons of the selected thread that say which signal the process got (macOS exceptions too).
_EXC_SIGNAL = {
    "EXC_BAD_ACCESS": "SIGSEGV", "EXC_BAD_INSTRUCTION": "SIGILL", "EXC_ARITHMETIC": "SIGFPE",
    "EXC_BREAKPOINT": "SIGTRAP", "EXC_CRASH": "SIGABRT",
}
#: Linux lldb's stop reason for a crash signal (SIGSEGV, SIGBUS, SIGFPE or SIGILL) whose si_code it
#: cannot describe - one the process sent itself, as faulthandler re-raises after its dump: a crash
#: all the same, recorded as SIGSEGV (the process note says which signals it may have been).
_UNKNOWN_CRASH = "unknown crash reason"


def score(lines: List[str]) -> float:
    frames = headers = 0
    for line in lines:
        s = line.lstrip()
        if s.startswith(("frame #", "* frame #")):
            m = _FRAME.match(s)
            if m and m.group(3).strip().startswith("0x"):
                frames += 1
        elif s.startswith(("thread #", "* thread #")) and _THREAD.match(s):
            headers += 1
    if frames == 0:
        return 0.0
    return 2.0 * frames + 5.0 * headers


def _quoted(rest: str, key: str) -> Optional[str]:
    i = rest.find(key + " = '")
    if i < 0:
        return None
    start = i + len(key) + 4
    end = rest.find("', ", start)
    if end < 0:
        end = len(rest) - 1 if rest.endswith("'") else -1
    return rest[start:end] if end >= start else None


def _thread(num: str, rest: str, current: bool) -> Thread:
    t = Thread(current=current)
    t.notes.append("lldb thread #%s" % num)
    m = _TID.search(rest)
    if m:
        # (a macOS core records no thread ids: lldb prints "tid = 0x0000" for each)
        t.tid = (to_int(m.group(1), 16) if m.group(1).startswith("0x") else to_int(m.group(1))) or None
    name = _quoted(rest, "name")
    if name:
        t.name = t.os_name = name
    queue = _quoted(rest, "queue")
    if queue:
        t.notes.append("queue %s" % queue)
    i = rest.find("stop reason = ")
    if i >= 0:
        t.notes.append("stop reason: %s" % rest[i + 14:].strip())
    return t


def _stop_signal(t: Thread) -> Optional[str]:
    for n in t.notes:
        if n.startswith("stop reason: "):
            reason = n[13:]
            if reason.startswith("signal SIG"):
                # "signal SIGSEGV: address not mapped to object (fault address: 0x40)" on Linux
                sig = reason[7:].split()[0].rstrip(",:")
                return None if sig == "SIGSTOP" else sig  # SIGSTOP: lldb attached, nothing happened
            if reason.startswith(_UNKNOWN_CRASH):
                return "SIGSEGV"  # see _UNKNOWN_CRASH
            return _EXC_SIGNAL.get(reason.split()[0]) if reason else None
    return None


def _strip_at(sym: str) -> Tuple[str, Optional[str], Optional[int]]:
    """``f(x=1) at file.c:12:3`` -> (``f(x=1)``, file, line)."""
    i = sym.rfind(" at ")
    if i > 0:
        m = _AT.match(sym[i + 4:].strip())
        if m:
            return sym[:i].rstrip(), m.group(1), to_int(m.group(2))
    return sym, None, None


def parse_frame_body(body: str) -> Frame:
    """``0xADDR module`symbol + 12`` / ``0xADDR module`f(x=1) at file:line:col`` -> Frame."""
    f = Frame(kind="native")
    body = body.strip()
    addr, _, rest = body.partition(" ")
    f.address = to_int(addr, 16) if addr.startswith("0x") else None
    rest = rest.strip()
    if not rest:
        return f
    module, tick, sym = rest.partition("`")
    if not tick:
        module, sym = "", rest
    f.library = module.strip() or None
    sym, f.file, f.line = _strip_at(sym.strip())
    i = sym.rfind(" + ")
    if i > 0 and sym[i + 3:].strip().isdigit():
        sym = sym[:i].rstrip()
    i = sym.find(" [inlined] ")
    if i >= 0:
        f.inlined = True
        f.note = "inlined into %s" % sym[:i].strip()
        sym = sym[i + 11:].strip()
    if sym.endswith(")"):
        g = last_group_start(sym)
        if g is not None and g > 0:
            args = sym[g:]
            # debug info: argument values (``f(x=1)``, or ``f()`` with a source line) are no part
            # of the name; without it the group is the C++ signature, kept as gdb keeps it
            if "=" in args or (args == "()" and f.file is not None):
                sym = sym[:g].rstrip()
    if sym.startswith("___lldb_unnamed_symbol"):
        sym = ""
    f.function = unknown_function(sym)
    return f


def _is_noise(s: str) -> bool:
    if s.startswith("->") or (s.startswith("0x") and " <+" in s[:40]):
        return True  # disassembly lldb prints at a stop
    if s.endswith(":") and "`" in s and " " not in s:
        return True  # "libsystem_kernel.dylib`__read_nocancel:" above that disassembly
    return s.startswith(_NOISE)


def _addresses(t: Thread) -> List[Optional[int]]:
    return [f.address for f in t.frames]


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    threads: List[Thread] = []
    numbers: Dict[int, str] = {}  # id(thread) -> lldb thread number
    cur: Optional[Thread] = None
    sigill = False  # lldb stopped on SIGILL: the instruction at its arrow is the faulting one
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith(("thread #", "* thread #")):
            m = _THREAD.match(s)
            if m:
                if "stop reason = signal SIGILL" in s:
                    # the stop's signal as a line of its own: a signature reads it with the faulting
                    # instruction below (a SIGILL on an instruction of a CPU extension)
                    messages.append(s[s.find("stop reason = "):][:300])
                    sigill = True
                cur = _thread(m.group(2), m.group(3) or "", bool(m.group(1)))
                threads.append(cur)
                numbers[id(cur)] = m.group(2)
                continue
        if s.startswith(("frame #", "* frame #")):
            m = _FRAME.match(s)
            if m and (m.group(3).strip().startswith("0x") or not m.group(3).strip()):
                if not m.group(3).strip():
                    continue  # "frame #19:" and nothing more: the paste was cut there
                if cur is None or (m.group(2) == "0" and cur.frames):
                    cur = Thread()
                    cur.notes.append("no thread header above these frames (a single bt, or the paste was cut)")
                    threads.append(cur)
                cur.frames.append(parse_frame_body(m.group(3)))
                continue
        m = _PROCESS.match(s)
        if m:
            proc.pid = proc.pid or to_int(m.group(1))
            continue
        if sigill and s.startswith("->") and " <+" in s[:40]:
            messages.append(s[:300])  # the instruction the thread stopped on (lldb's arrow)
            continue
        if _is_noise(s):
            continue
        messages.append(s)
    # The stop echo (thread #1 with its frame #0) and a later ``bt``/``bt all`` list the same
    # thread: keep the longer listing when one is the start of the other.
    dropped = set()
    last_by_num: Dict[str, Thread] = {}
    for t in threads:
        num = numbers.get(id(t))
        prev = last_by_num.get(num) if num is not None else None
        if prev is not None:
            a, b = _addresses(prev), _addresses(t)
            if a == b[: len(a)]:
                dropped.add(id(prev))
                t.current = t.current or prev.current
            elif b == a[: len(b)]:
                dropped.add(id(t))
                continue
        if num is not None:
            last_by_num[num] = t
    kept = [t for t in threads if id(t) not in dropped]
    for t in kept:
        t.merge = "native-only" if t.frames else None
        if not t.frames:
            t.notes.append("no frames printed")
        if t.current and not proc.signal:
            proc.signal = _stop_signal(t)
            if proc.signal and "stop reason: " + _UNKNOWN_CRASH in t.notes:
                proc.notes.append("lldb: 'unknown crash reason' (SIGSEGV, SIGBUS, SIGFPE or SIGILL)")
    proc.threads.extend(kept)
    proc.messages.extend(cap_messages(messages, proc.notes))
