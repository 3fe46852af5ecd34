"""A lone debugger stack with no signal named: whether where the debugger stopped proves a crash.

Why a module of its own: ``crashframes.py`` reads the frames a crash leaves on any stack (abort, a
fatal handler, the dumper); this one reads the one stack a debugger shows, the thread it stopped in,
when the input names no signal.  A thread that waits, sleeps or is broken into stands in the C
runtime, the interpreter or a wait; one stopped in the program's own code is the faulting thread
(a WinDbg ``k`` whose frame 00 is outside the system DLLs, gdb's lone ``bt``, Visual Studio's Call
Stack), or a call through a pointer to where no code is, or a frame past the end of its stack.  The
report says what such a reading rests on (``LONE_NOTE``): a busy loop shows the same stack.
"""

from __future__ import annotations

from typing import Sequence

from hanganalyze import rxcache
from hanganalyze.analyze.crashframes import CRASH_FRAMES, NULL_ADDRESSES
from hanganalyze.analyze.triagetable import glob_match, table
from hanganalyze.names import basename
from hanganalyze_gdbext.model import Process, Thread

#: Windows: where a thread that waits, sleeps or was broken into stands: ntdll's and win32u's system
#: call stubs (NtWaitForSingleObject, NtDelayExecution, NtUserGetMessage, NtRemoveIoCompletion; user32's
#: before Windows 10), the kernelbase / kernel32 wrappers over them, the debugger's break-in
#: (DbgBreakPoint), WOW64's thunks; WinDbg names a module loaded twice with its base (ntdll_77ab0000).
_WINDOWS_STILL = rxcache.compile(r"(?i)^(ntdll|win32u|user32|kernelbase|kernel32|wow64\w*)(_[0-9a-f]{8,16})?(\.dll)?$")


def windows_faulted(t: Thread) -> bool:
    """A lone WinDbg / cdb ``k`` table, its header in the text (so its first row is frame 00), whose
    innermost frame is outside ``_WINDOWS_STILL``: the debugger's current thread stopped in the
    program's own code.  A Windows thread that waits or sleeps stands in a system call stub of
    ntdll / win32u, and a live break-in on DbgBreakPoint; a lone ``k`` whose top is elsewhere is a
    crash dump's (or an exception's) faulting thread, the one the debugger shows first.  Not a
    ``~*k`` listing (a hang dump's threads, some of them running: the caller asks this of the input's
    only thread) nor a table cut before its top."""
    if "WinDbg call stack" not in t.notes:
        return False
    top = next((f for f in t.frames if not f.marker), None)
    return top is not None and top.kind == "native" and not _WINDOWS_STILL.match(basename(top.library) or "")


#: Notes of a lone stack whose first frame is where the debugger stopped: Visual Studio's Call Stack
#: window (the thread it broke in, innermost first), gdb's echo of its stop (``0x.. in f () at ..``).
_STOP_TOPS = ("Visual Studio call stack", "frame #0 from gdb's stop line alone")
#: The ``parsed as`` note of gdb's text: a lone ``bt`` is the selected thread's.
_GDB = "parsed as gdb backtrace"
#: The C library's own frames where gdb names no library: its system call stubs (glibc 2.41's
#: cancellable syscall, musl's ``sccp``) and any frame of its source tree.
_LIBC_STILL = rxcache.compile(r"^(__syscall_cancel\w*|__internal_syscall_cancel|sccp|__syscall_cp\w*|syscall)$")
_LIBC_SOURCE = rxcache.compile(r"(^|/)(sysdeps|nptl|src_musl|musl[\w.-]*/src)/")


#: What a crash read from a lone stop rests on, and the one other way to get such a stack.
LONE_NOTE = ("one debugger stack, stopped in the program's own code with no signal named: read as a crash (a "
             "debugger shows the faulting thread where it stopped); if the process was still running when the "
             "stack was taken, it is a busy loop there instead: capture it twice (--samples) to tell them apart")


#: A "function" that is a frame line taken whole (``#  1  0x7fff in f ()``): no symbol has these.
_NO_SYMBOL = rxcache.compile(r"^#|\b0x[0-9a-fA-F]{6,}\b| in \S")


def lone_stop(proc: Process, t: Thread, threads: Sequence[Thread]) -> bool:
    """The input is one debugger stack of the thread it stopped in, its top in the text, with no
    signal named, and that top is the program's own code: a crash (the debugger shows the faulting
    thread, as it stopped at the fault).  A thread that waits, sleeps or is broken into stands in
    the C runtime, the interpreter or a wait (``Table.stands_still``: a lock class's spin, a
    driver's wait included); a user's Ctrl-C names its SIGINT.  A WinDbg ``k`` table: its first row
    outside the system DLLs (``windows_faulted``).  gdb's lone ``bt`` (the selected thread, no
    header, printed from frame #0: a cut top carries a note) and Visual Studio's Call Stack likewise
    (open round 11: NCCL's ncclGroupCommJoin in a collective's enqueue, THRandom_manualSeed in
    torch.dll's static initializer; both read as a collective and as "runs")."""
    if proc.signal is not None or len(threads) != 1:
        return False
    if any(not f.marker and f.function and CRASH_FRAMES.match(f.function) for f in t.frames):
        return False  # a signal's or abort's own frames: the rules above decide (a timeout's abort is no fault)
    if windows_faulted(t):
        return True
    if _GDB in proc.notes and t.current and t.tid is None and t.name is None and not t.notes:
        pass  # gdb's lone ``bt`` from its frame #0
    elif not any(n in _STOP_TOPS for n in t.notes):
        return False
    top = next((f for f in t.frames if not f.marker), None)
    if top is not None and (_wild_call(t) or _unnamed_in_library(t) or _ran_off_its_stack(t)):
        return True
    if (top is None or top.kind != "native" or not top.function or top.function == "??"
            or _NO_SYMBOL.search(top.function)):
        return False  # (no name, or a line a reader took whole for one: no evidence of the program's code)
    if not (top.library or top.file) or _LIBC_STILL.match(top.function) or _LIBC_SOURCE.search(top.file or ""):
        return False  # a frame of no known code (a stripped driver's hashed name), or the C library's
    return not (_WINDOWS_STILL.match(basename(top.library) or "") or table().stands_still(top))


#: gdb's frame note (acquire/text/gdb.py's UNREADABLE_ARGS) for arguments it could not read from the stack.
_UNREADABLE = "its arguments could not be read"


def _ran_off_its_stack(t: Thread) -> bool:
    """gdb could not read the innermost frame's own arguments from the stack while it read its
    caller's: the frame sits past the end of the thread's stack, which only a stack overflow (a
    recursion without end: opened sealed round 40's pybind11 ``__int__`` loop) leaves; a truncated
    core loses the callers' too."""
    real = [f for f in t.frames if not f.marker][:2]
    return (len(real) == 2 and (real[0].note or "").startswith(_UNREADABLE)
            and not (real[1].note or "").startswith(_UNREADABLE))




def _unnamed_in_library(t: Thread) -> bool:
    """The lone stack's top frame is unnamed code of a named library that is neither the C runtime,
    the interpreter nor a driver or runtime a waiting thread stands in (``Table.stands_still``, the
    wait categories' own unnamed libraries), and the frame under it is named code of the program's
    libraries, or unnamed code of the same library (a stripped build: open round 40's ONNX Runtime
    core): stopped in that library's own code, where a debugger stops the faulting thread (open
    round 41's PyQt5 font lookup in libQt5Gui)."""
    real = [f for f in t.frames if not f.marker][:2]
    if len(real) < 2 or real[0].kind != "native" or (real[0].function and real[0].function != "??"):
        return False
    lib = basename(real[0].library)
    if not lib or table().stands_still(real[0]) or any(  # stands_still: the C runtime's, the interpreter's
            any(glob_match(lib, g) for g in c.unnamed) for c in table().categories):
        return False
    under = real[1]
    if under.kind == "native" and (not under.function or under.function == "??") and not under.library \
            and under.address is not None and under.address < NULL_ADDRESSES:
        return True  # under it a "return address" in the null page: the stack below the top is garbage
    if under.kind == "native" and (not under.function or under.function == "??"):
        return basename(under.library) == lib  # the library's own unnamed code calling it (a stripped build)
    return (under.kind == "native" and bool(under.function) and under.function != "??"
            and not table().stands_still(under))


def _wild_call(t: Thread) -> bool:
    """The lone stack's top frame is an address in no loaded object (gdb names neither a function
    nor a library) and the frame under it is named code of a library: a call through a pointer to
    where no code is (a freed object's vtable, two libraries' clashing symbols: open round 37's
    std::call_once jumping out of a bundled libprotobuf), the fault itself.  Not a stack whose
    frames are all unnamed (a core read without its libraries) nor JIT code calling JIT code."""
    real = [f for f in t.frames if not f.marker][:2]
    if len(real) < 2 or real[0].kind != "native" or real[0].function or real[0].library or real[0].file:
        return False
    under = real[1]
    if under.kind != "native" or not under.function or not (under.library or under.file):
        return False
    return not _FOREIGN_CALL.match(under.function)  # libffi's call into generated code (ctypes, cffi, a JIT)


#: Calls into code generated at run time (no object file maps it): libffi's, a JIT's entry trampolines.
_FOREIGN_CALL = rxcache.compile(r"^(ffi_call\w*|ffi_closure\w*|\w*[Jj][Ii][Tt]\w*|llvm::orc::\w+|numba\w*)")


def lone_crash(proc: Process, t: Thread, threads: Sequence[Thread]) -> bool:
    """``lone_stop``, and when it holds the report says what the reading rests on (``LONE_NOTE``):
    no signal, only where the debugger stopped, which a busy loop shows the same way."""
    if not lone_stop(proc, t, threads):
        return False
    if LONE_NOTE not in proc.notes:
        proc.notes.append(LONE_NOTE)
    return True
