"""The JVM's fatal error log (``hs_err_pid<N>.log``, and the banner HotSpot prints to the console):
written only when the JVM process dies of a signal or an exception it cannot handle, so the
process crashed.  A Python program that hosts a JVM (JPype, PySpark's driver, Deephaven) dies
this way when native code of either side faults.

::

    # A fatal error has been detected by the Java Runtime Environment:   -> the banner
    #  SIGSEGV (0xb) at pc=0x0000647a5cbc7480, pid=122266, tid=122351    -> Process.signal, pid
    # Problematic frame:
    # C  [python+0x230480]                                               -> the crashing frame (alone
                                                                            when no stack follows)
    Current thread (0x...):  JavaThread "main" [_thread_in_native, id=43524, ...]  -> the thread
    Native frames: (J=compiled Java code, j=interpreted, Vv=VM code, C=native code)
    C  [libc.so.6+0x1234]  memcpy+0x14                                   -> library, function
    C  [KERNELBASE.dll+0x34f69]                                          -> library, no symbol
    j  org.jpype.manager.TypeFactoryNative.newWrapper(JJ)V+0             -> a Java method
    v  ~StubRoutines::call_stub
    siginfo: EXCEPTION_ACCESS_VIOLATION (0xc0000005), reading address 0x0 -> (Windows) the exception

The frames are innermost first already.  Only the crashing thread's stack is in the log (the
others are listed by name and state alone).
"""

from __future__ import annotations

import re
from typing import List, Optional

from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "hs-err"

_BANNER = re.compile(r"^#?\s*A fatal error has been detected by the Java Runtime Environment")
#: ``#  SIGSEGV (0xb) at pc=0x..., pid=122266, tid=122351`` (Windows: ``EXCEPTION_ACCESS_VIOLATION (0xc0000005)``)
_SIGNAL = re.compile(r"^#?\s*(SIG[A-Z]{2,6}|EXCEPTION_\w+|Internal Error) \(0x[0-9a-fA-F]+\)(?: at pc=0x[0-9a-fA-F]+)?"
                     r"(?:, pid=(\d+), tid=(\d+))?")
#: ``siginfo: si_signo: 11 (SIGSEGV), si_code: 1 ...`` / ``siginfo: EXCEPTION_UNCAUGHT_CXX_EXCEPTION (0xe06d7363), ...``
_SIGINFO = re.compile(r"^siginfo: (?:si_signo: \d+ \((SIG[A-Z]{2,6})\)|(EXCEPTION_\w+) \(0x)")
_CURRENT = re.compile(r"^Current thread \(0x[0-9a-fA-F]+\):\s+(\w+) \"(.{0,200})\" \[(\w+)?(?:, id=(\d+))?")
_SECTION = re.compile(r"^(Native|Java) frames: \(")
#: ``C  [lib.so+0x1234]  function+0x14`` / ``V  [libjvm.so+0x...]  JavaCalls::call_helper(...)+0x...``
_NATIVE = re.compile(r"^#?\s*([CVv])\s+\[([^\]\s+]{1,300})\+0x[0-9a-fA-F]{1,16}\](?:\s+(.{1,2000}?))?\s*$")
#: ``C  0x0000020ca7afd621`` (code in no library: generated or freed)
_ADDRESS = re.compile(r"^C\s+0x([0-9a-fA-F]{4,16})\s*$")
#: ``j  org.pkg.Class.method(JJ)V+16`` / ``J 123 c2 org.pkg.Class.method(I)V (45 bytes) @ 0x... [...]``
_JAVA = re.compile(r"^[jJA]\s+(?:\d+\s+(?:c[12]\s+)?(?:%\s+)?)?([\w$.<>]{1,500})\(")
_STUB = re.compile(r"^v\s+(~\S{1,200})\s*$")
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]{1,16}$")


def _signal_name(sig: str) -> str:
    """The signal a HotSpot line names; Windows' exceptions as the signal each amounts to (an access
    violation is a SIGSEGV; an uncaught C++ exception, a stack overflow, the VM's own internal error
    end the process like an abort)."""
    if sig == "EXCEPTION_ACCESS_VIOLATION":
        return "SIGSEGV"
    return "SIGABRT" if sig.startswith(("EXCEPTION_", "Internal")) else sig


def _native(m: re.Match[str]) -> Frame:
    func = m.group(3)
    if func:
        func = _OFFSET.sub("", func.strip())
        func = func.split("(", 1)[0] if "(" in func else func  # the VM's frames carry their parameter list
    return Frame(kind="native", function=func or None, library=m.group(2))


def _frame(s: str) -> Optional[Frame]:
    m = _NATIVE.match(s)
    if m:
        return _native(m)
    m = _ADDRESS.match(s)
    if m:
        return Frame(kind="native", function=None, address=to_int(m.group(1), 16))
    m = _JAVA.match(s)
    if m:
        return Frame(kind="native", function=m.group(1), library="java")
    m = _STUB.match(s)
    if m:
        return Frame(kind="native", function=m.group(1), library="libjvm")
    return None


def score(lines: List[str]) -> float:
    banner = sections = frames = 0
    for line in lines:
        s = line.strip()
        if _BANNER.match(s) or _CURRENT.match(s):
            banner += 1
        elif _SECTION.match(s):
            sections += 1
        elif s[:1] in "CVvjJ#" and _frame(s.lstrip("# ")) is not None:
            frames += 1
    if not banner and not sections:
        return 0.0
    return 8.0 * banner + 6.0 * sections + 1.0 * frames


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    thread = Thread(current=True)
    problem: Optional[Frame] = None
    section = False
    after_problem = False
    for line in lines:
        s = line.strip()
        if not s:
            section = False
            continue
        m = _SIGNAL.match(s)
        if m and proc.signal is None:
            proc.signal = _signal_name(m.group(1))
            proc.pid = proc.pid or to_int(m.group(2))
            thread.tid = thread.tid or to_int(m.group(3))
            messages.append(s)
            continue
        m = _SIGINFO.match(s)
        if m:
            proc.signal = proc.signal or _signal_name(m.group(1) or m.group(2))
            messages.append(s)
            continue
        m = _CURRENT.match(s)
        if m:
            thread.name = m.group(2) or None
            thread.tid = thread.tid or to_int(m.group(4))
            continue
        if _SECTION.match(s):
            section = True
            continue
        if s.startswith("#") and "Problematic frame" in s:
            after_problem = True
            continue
        if after_problem:
            after_problem = False
            problem = _frame(s.lstrip("# "))
            if problem is not None:
                continue
        if section:
            f = _frame(s)
            if f is not None:
                thread.frames.append(f)
                continue
        messages.append(s)
    if not thread.frames and problem is not None:
        thread.frames.append(problem)
        thread.notes.append("the JVM's problematic frame (the log's stack is not in the text)")
    if thread.frames:
        thread.notes.insert(0, "JVM fatal error log: the crashing thread")
        proc.threads.append(thread)
    proc.messages.extend(cap_messages(messages, proc.notes))
