"""Frames that show a thread crashing: a signal handler or abort near the top of its stack.

Why a module of its own: the triage asks two questions of them.  With a fatal signal known, which
thread got it (``CRASH_FRAMES`` in its first frames).  With no signal in the input at all (a pasted
``bt`` or WinDbg ``k`` of one thread), whether the stack itself proves a crash: a thread whose
innermost frames are ``abort`` (or ``terminate`` -> ``abort``, ``raise``/``pthread_kill`` under
``abort``) is being killed by SIGABRT, whatever the paste left out (``aborting``).  Sealed round 9
had such a WinDbg ``k`` (``ucrtbase!abort`` <- ``terminate`` <- an uncaught C++ exception) read as
"runs".  Likewise a thread stopped in faulthandler's traceback dumper outside its write() faulted in
its unlocked walk of the other threads' frames (``dumper_faulted``; open round 10's gdb ``bt`` of
faulthandler's watchdog thread read as "runs").  And a WinDbg / cdb ``k`` table of one thread
whose first row (frame 00, the table's header in the text) is outside ntdll, win32u, kernelbase and
kernel32 (``lonestop.windows_faulted``): open round 7's access violation in ``python312!PyObject_LookupAttr``.

``proven``: positive evidence that the process crashed, strong enough to outrank any wait its
frames show (issue 32: a UCX crash handler's stack read as the loader lock it takes to print a
backtrace, a "Fatal Python error" at shutdown read as the lock the dumped daemon thread held, a
Windows faulthandler dump's ``Exception Code: 0xC0000005`` read as an asyncio future).  Only
handlers that run for a fatal signal or a fatal error count: a profiler's SIGPROF handler, Python's
own SIGINT handler or c10's SIGUSR2 stack dumper over ``<signal handler called>`` interrupt a wait
the process is still in, and a Ctrl-C's ``0xC000013A`` is no fault.

Open round 15: torch's DataLoader worker handlers (``handler_SIGSEGV``) re-raise the fault they
caught, so they are fatal handlers, and the frame under their signal frame is where the thread
faulted, not a wait it stood in (a worker's core read as the pthread join it faulted in); c10's
fatal-signal report (``SIGABRT(6), PID: p, Thread t:`` over ``c10::FatalSignalHandler::*``) shows
which threads took part, a CUDA check raising its error (``c10_cuda_check_implementation`` as the
innermost frame of a c10 exception's frames) is a thread throwing, not waiting (a watchdog's event
query read as the collective it polls), and UCX's ``==== backtrace (tid:N) ====`` is printed by its
error handler only (its frames seen without the ``Caught signal`` line).
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence, Tuple

from hanganalyze import rxcache
from hanganalyze.analyze.triagetable import table
from hanganalyze.loglines import (
    CURRENT_NOTES,
    DUMPED_CUT_NOTE,
    EXCEPTHOOK_NOTE,
    MP_CHILD_NOTE,
    REPORT_NOTE,
    SIGNAL_THREAD_CUT_NOTE,
)
from hanganalyze.names import basename
from hanganalyze_gdbext.model import Frame, Process, Thread
from hanganalyze_gdbext.model.signals import FATAL_SIGNALS

#: Frames of a crashed thread that show the signal (a handler, abort) near the top.
CRASH_FRAMES = rxcache.compile(r"^(abort|raise|gsignal|pthread_kill\w*|__restore_rt|<signal handler called>|"
                               r"__pthread_kill\w*|faulthandler_\w+|__GI_abort|std::terminate|__gnu_cxx::"
                               r"__verbose_terminate_handler|__cxxabiv1::__terminate|c10::detail::torchCheckFail\w*|"
                               r"ucs_handle_error|ucs_error_signal_handler|ucs_debug_\w+|\w*[Ss]ignal_?[Hh]andler\w*|"
                               r"__sigaction|google::\w*FailureSignalHandler\w*|absl::\w*FailureSignalHandler\w*|"
                               r"c10::FatalSignalHandler::\w+)$")
#: The frame the kernel (or Windows' exception dispatch) puts between a faulting frame and its signal
#: handler: glibc's restorer, gdb's marker, macOS's trampoline, ntdll's dispatcher.
TRAMPOLINE = rxcache.compile(r"^(__restore_rt|<signal handler called>|_sigtramp|KiUserExceptionDispatcher)$")


def below_handler(frames: Sequence[Frame], depth: int = 24) -> int:
    """The index of the frame the signal interrupted (under the innermost trampoline within ``depth``
    frames), 0 when none: a crashed thread's blame is there, not in the handler that printed it."""
    for i, f in enumerate(frames[:depth]):
        if f.kind == "native" and TRAMPOLINE.match(f.function or ""):
            return i + 1 if i + 1 < len(frames) else 0
    if (len(frames) > 2 and _OWN_HANDLER.match(frames[0].function or "") and not frames[1].function
            and _LIBC.match(basename(frames[1].library) or "")):
        return 2  # a program's own handler, then the unnamed trampoline (backtrace_symbols' lines)
    # no trampoline: under abort or a fatal reporter on top (GGML_ABORT's printed stack), the caller
    reporter = [i for i, f in enumerate(frames[:ABORT_DEPTH]) if f.kind == "native"
                and (_ABORT.match(f.function or "") or _FATAL_REPORTER.match(f.function or ""))]
    return reporter[-1] + 1 if reporter and reporter[-1] + 1 < len(frames) else 0


#: A program's own handler of a fatal signal by its name (``segfault_handler``, ``crash_handler``), and
#: the C library whose unnamed frame under it is the signal's trampoline (``__restore_rt``).
_OWN_HANDLER = rxcache.compile(r"(?i)^\w*(?:segv|segfault|fault|signal|sig|crash)_?handler\w*$")
_LIBC = rxcache.compile(r"^(?:libpthread|libc)[.-]")


#: abort itself (glibc, the MSVC runtime's ucrtbase!abort, macOS's libsystem_c abort).
_ABORT = rxcache.compile(r"^(abort|__GI_abort|__libc_abort)$")
#: Functions that end the process whenever they run: glibc's assert and fortify reports, CPython's
#: fatal error, ggml's abort and its CUDA error report (GGML_ABORT).  On top of a stack whose frames
#: above them a paste cut, they say the abort that followed (open round 95: ggml_cuda_error).
_FATAL_REPORTER = rxcache.compile(r"^(__assert_fail\w*|__assert_perror_fail|__fortify_fail\w*|__stack_chk_fail|"
                                  r"__libc_fatal|__libc_message\w*|Py_FatalError|_Py_FatalError\w*|"
                                  r"ggml_abort|ggml_cuda_error)$")
#: What may sit above abort on the way down to the kernel: the signal being raised; on Windows, the
#: debug C runtime's report of the abort (its "abort() has been called" message box, open round 66);
#: a reporter's capture of the stack it prints (ggml's GGML_ABORT, open round 103).
_RAISING = rxcache.compile(r"^(raise|gsignal|__GI_raise|_p_raise|pthread_kill\w*|(?:__GI_)?__pthread_kill\w*|"
                           r"__pthread_kill_\w+|__futex_abstimed_wait\w*|__restore_rt|<signal handler called>|"
                           r"issue_debug_notification|__acrt_report_runtime_error|__acrt_show_\w*message_box|"
                           r"__acrt_MessageBox\w*|_?_?CrtDbgReport\w*|_VCrtDbgReport\w*|"
                           r"(?:__GI_)?_?_?backtrace|ggml_print_backtrace\w*)$")  # the reporter printing its stack
#: Handlers that only a fatal signal or a fatal error runs (UCX's error signal handler, faulthandler's,
#: CPython's fatal error path, glog / absl / c10 failure handlers, a sanitizer's report).
_FATAL_HANDLERS = rxcache.compile(r"^(ucs_error_signal_handler|ucs_debug_handle_error_signal|faulthandler_fatal_error|"
                                  r"faulthandler_exc_handler|Py_FatalError|_Py_FatalError\w*|fatal_error_exit|"
                                  r"google::.*FailureSignalHandler\w*|absl::.*FailureSignalHandler\w*|"
                                  r"c10::FatalSignalHandler::fatalSignalHandler|__sanitizer::Die|handler_SIG(?:SEGV|BUS|FPE|ILL)|"
                                  r"absl::(?:lts_\d+::)?DeadlockCheck)$")
#: Of those, handlers a synchronous fault runs (torch's DataLoader worker's, which re-raise it), and
#: abseil's lock-order check, which aborts before the lock's wait: a wait under them is where it crashed.
_FAULT_HANDLERS = rxcache.compile(r"^(?:handler_SIG(?:SEGV|BUS|FPE|ILL)|absl::(?:lts_\d+::)?DeadlockCheck)$")
#: c10's check of a CUDA call's status, the innermost frame of the exception it raises (under
#: ``c10::Error::Error`` and ``torchCheckFail``, which a paste may leave out).
_CUDA_CHECK = rxcache.compile(r"^(c10::Error::Error|c10::detail::torchCheckFail\w*|"
                              r"c10::cuda::c10_cuda_check_implementation)$")
#: Log lines that say the process itself died of a fault or a fatal error (not a signal sent to it
#: from outside, not another process's death): CPython's and Windows' fatal error lines, the shell's
#: core-dump lines, UCX / abseil / gdb / sanitizer / macOS crash lines.  Windows' faulthandler logs
#: first-chance exceptions too (``code 0x...``, a breakpoint, one a JIT handles): the faults only.
#: ``terminate called`` is left out: NCCL's watchdog throws it after a collective's timeout.
_FATAL_LINES = rxcache.compile(r"^Fatal Python error: |"
                               r"Windows fatal exception: (?:access violation|stack overflow|illegal instruction|"
                               r"code 0x[Cc]000001[Dd]\b)|"
                               r"^\s*Exception ?Code:\s*(?:0x)?[Cc]0{3}(?!013[Aa]\b)[0-9A-Fa-f]{4}\b|"
                               r"(?:Segmentation fault|Aborted|Bus error) \(core dumped\)|"
                               r"\*\*\* (?:SIGSEGV|SIGABRT|SIGBUS|SIGFPE|SIGILL) |"
                               r"Caught signal (?:4|6|7|8|11) \(|received signal SIG(?:SEGV|ABRT|BUS|FPE|ILL)\b|"
                               r"==\d+==\s?ERROR: \w+Sanitizer|"
                               r"^Exception Type:\s+EXC_(?:BAD_ACCESS|CRASH|BAD_INSTRUCTION|ARITHMETIC)\b|"
                               # ReportCrash's thread that took the exception (a stored copy may have cut the
                               # paste's first character)
                               r"^T?hread \d{1,6} Crashed::|"
                               # a program's own fault handler's banner (Mantid's "***** SEGMENTATION FAULT *****")
                               r"^[*=#!~ -]{3,}(?:SEGMENTATION FAULT|SIGSEGV|FATAL SIGNAL)[*=#!~ -]{3,}$|"
                               # the kernel's line for a process a fault killed (dmesg, journalctl -k)
                               r"\b\S{1,100}\[\d{1,10}\]: segfault at [0-9a-f]{1,16} ip [0-9a-f]{1,16} sp |"
                               r"\btraps: \S{1,100}\[\d{1,10}\] (?:general protection|trap invalid opcode|"
                               r"trap divide error)|"
                               # compute-sanitizer's (cuda-memcheck's) invalid access of a kernel; cuda-gdb's
                               # report of the exception that stopped a kernel (its device thread faulted)
                               r"^=+ +Invalid __(?:global|shared|local)__ (?:read|write|atomic) of size \d+|"
                               r"^CUDA Exception: (?:Warp|Lane|Device) [A-Z][\w -]{3,60}$|"
                               # Open MPI's handler of a fatal signal (opal's backtrace, under mpi4py too)
                               r"\bSignal: (?:Segmentation fault|Bus error|Aborted|Floating point exception|"
                               r"Illegal instruction) \((?:4|6|7|8|11)\)$|"
                               # CPython 3.14's fatal error handler (faulthandler.enable's c_stack) adds the
                               # C stack under the Python traceback; only dump_c_stack(), a call of the
                               # program's own, prints it otherwise
                               r"^Current thread's C stack trace\b|"
                               r"^==== backtrace \(tid:\s*\d+\) ====$")
#: Addresses below this are in the null page (Linux's mmap_min_addr), where no code is mapped: no
#: frame runs or returns there.
NULL_ADDRESSES = 0x10000
#: How deep abort may be (below the raising frames) and still be this thread's innermost call.
ABORT_DEPTH = 6  # glibc 2.35+ shows three inlined pthread_kill frames over raise
#: ... where a handler re-raised the signal (a SIGABRT handler that restores the default action and
#: raises again): a second raise chain over ``<signal handler called>`` sits on the first one, so
#: ``abort`` is deeper, with nothing but raising frames above it (open round 22's forced-unwind abort).
_RERAISE_DEPTH = 10
#: CPython's traceback dumpers (faulthandler's): they walk every thread's frames without a lock, to
#: stay async-signal-safe, and print each line with write(); the walk reads memory other threads
#: change (a frame freed as its thread exits: gh-116008, gh-128421).
_DUMPERS = rxcache.compile(r"^(dump_frame|dump_traceback|_Py_DumpTraceback|_Py_DumpTracebackThreads|"
                           r"_Py_DumpASCII|_Py_DumpHexadecimal|_Py_DumpDecimal|dump_code\w*)$")
#: ... called from faulthandler (its fatal handler, its watchdog thread, its user signal) or CPython's
#: fatal error path: the frame that makes a ``dump_frame`` CPython's.
_DUMPER_ROOTS = rxcache.compile(r"^(_Py_DumpTracebackThreads|_Py_DumpTraceback|faulthandler_\w+|"
                                r"_Py_FatalError\w*|fatal_error\w*)$")
#: Where a dumper stands still while it works: the write() of each line (or a wait).
_DUMPER_STILL = rxcache.compile(r"^(write|writev|__write\w*|_Py_write\w*|syscall|_?_?futex\w*|pthread_\w+|"
                                r"sem_\w+|nanosleep|clock_nanosleep\w*|poll|select|read)$")


def aborting(frames: Sequence[Frame], name_of: Callable[[Frame], str]) -> bool:
    """``abort`` is the innermost frame of ``frames`` but for the signal being raised above it:
    positive evidence of a crash (SIGABRT) even where the input names no signal."""
    signal_frame = any(f.function == "<signal handler called>" for f in frames[:ABORT_DEPTH])
    raising = False
    for f in frames[:_RERAISE_DEPTH if signal_frame else ABORT_DEPTH]:
        if f.marker or f.kind == "python":
            return False
        name = name_of(f) or f.function or ""
        if name in ("", "??"):
            continue  # an address the printer could not name (its own backtrace() call, open round 103)
        if _ABORT.match(name) or _FATAL_REPORTER.match(name):
            return True
        if f.function == "<signal handler called>" and raising and _took_signal(frames, f):
            # a handler that re-raised the signal it got (restored the default action, raised again)
            # over the frame that took it: only a fatal signal's handler does that (open round 65's
            # mod_python sem_post on a freed lock); over another raise chain, abort decides below
            return True
        if not _RAISING.match(name):
            return False
        raising = raising or name in ("raise", "gsignal", "__GI_raise", "_p_raise") or name.startswith("pthread_kill")
    return False


def _took_signal(frames: Sequence[Frame], handler: Frame) -> bool:
    """The frame under the signal handler's is the program's code (not a wait the signal interrupted:
    a SIGTERM's handler re-raising it over a sleep is a kill, not a fault)."""
    i = next(i for i, f in enumerate(frames) if f is handler)
    under = next((f for f in frames[i + 1:] if not f.marker), None)
    return (under is not None and under.kind == "native" and not table().stands_still(under)
            and not _RAISING.match(under.function or "") and not (under.function or "").startswith("__pthread_kill"))


#: (queue.Empty: a get(timeout=...) that nothing filled in time, the wait's own end like a timeout)
_NOT_RAISED = rxcache.compile(r"^exception: (?:\S*\.)?(?:KeyboardInterrupt|SystemExit|\w*Timeout\w*|_?queue\.Empty)\b"
                              r"|[Tt]imed? ?out")


def own_raise(exception: str) -> bool:
    """An exception line that is a raise of its own: not a Ctrl-C, an exit, a timeout or queue.Empty
    (a wait's own end)."""
    return not _NOT_RAISED.search("exception: " + exception)


def raised(t: Thread) -> bool:
    """A Python traceback that ends in an exception of its own (not a Ctrl-C or a timeout, whose
    innermost frame is where the thread waited): its innermost frame raised, it waits for nothing."""
    return any(n.startswith("exception: ") and not _NOT_RAISED.search(n) for n in t.notes)


def interrupted_wait(t: Thread, messages: Sequence[str] = ()) -> bool:
    """A thread whose innermost frame is where it stood: any dump but a Python traceback, and a
    traceback only when it ends in a Ctrl-C or a timeout (a traceback cut before its exception line
    may stop frames short of the innermost one; one that raised stood on the raising line).  A cut
    traceback under the terminal's echo of a Ctrl-C (``^C``) is the KeyboardInterrupt's: its innermost
    line is the call the thread stood in (open round 38: concurrent.futures' exit join)."""
    if not any(n.startswith("Python traceback") for n in t.notes):
        return True
    if cut_traceback(t) and ctrl_c_echoed(messages):
        return True
    return any(n.startswith("exception: ") for n in t.notes) and not raised(t)


def marked(proc: Process) -> bool:
    """The reader marked the process's current thread as the one a fatal error stopped (faulthandler's
    current thread, systemd-coredump's first stack where the paste cut its signal line)."""
    return any(n in proc.notes for n in CURRENT_NOTES)


#: The parser's note on a faulthandler dump (acquire/text/__init__.py: "parsed as" its description).
_FAULTHANDLER = "parsed as faulthandler dump"
#: Why a crashed process's text names no crashing thread: (what the text is, the evidence, the first
#: step), per kind of text (``crash_not_shown``).
UNSHOWN = {
    "report": ("a macOS crash report", REPORT_NOTE,
               "Paste the whole crash report: the thread marked \"Crashed\" is where the process went wrong."),
    "coredump": ("systemd-coredump's stack rows cut above their thread's header", DUMPED_CUT_NOTE,
                 "Paste the whole report (coredumpctl info PID): its first stack is the thread that took the "
                 "signal, and its Signal line says which."),
    "gdb-signal-thread": ("gdb's signal line names a thread the text does not show", SIGNAL_THREAD_CUT_NOTE,
                          "Paste that thread's backtrace (thread N, then bt), or all of them (thread apply all bt): "
                          "its frames are where the process crashed."),
    "faulthandler-empty": ("faulthandler's dump of a fatal signal shows no frame of its current thread",
                           "faulthandler writes 'Current thread' over the thread that took the fatal signal; its "
                           "frames are not in the text (the paste cut them, or it ran no Python code)",
                           "Paste the whole dump, or capture the native stacks of the crash (a core: ulimit -c "
                           "unlimited, or coredumpctl; or run under gdb)."),
    "faulthandler": ("faulthandler's dump of a fatal signal marks no current thread",
                     "faulthandler writes 'Current thread' over the thread that took the fatal signal; none is "
                     "marked, so that thread ran no Python code (a native library's own thread) or the paste cut it",
                     "Capture the native stacks of the crash (a core: ulimit -c unlimited, or coredumpctl; or run "
                     "under gdb): the crashing thread is one faulthandler cannot show."),
}


def cut_traceback(t: Thread) -> bool:
    """A Python traceback cut before its exception line (a paste's chunk): its innermost frame was
    calling the next one, which the cut took with it."""
    return (any(n.startswith("Python traceback") for n in t.notes)
            and not any(n.startswith("exception: ") for n in t.notes))


def raised_cut(t: Thread, messages: Sequence[str] = ()) -> bool:
    """A traceback under Python's own header (``Traceback (most recent call last):``, which only an
    exception's report prints: not format_stack, faulthandler or a dumper) cut before its exception
    line, with no Ctrl-C echoed in the text (``^C``: then its innermost line is the wait the Ctrl-C
    ended, ``interrupted_wait``; pyzmq-1757's exit hang echoes it at the end of a sentence).  An
    exception went up through these frames; the cut took which one."""
    return t.notes[:1] == ["Python traceback"] and cut_traceback(t) and not ctrl_c_echoed(messages)


def ctrl_c_echoed(messages: Sequence[str]) -> bool:
    """The terminal's echo of a Ctrl-C (``^C``) in the text, at a line's start or at the end of a
    sentence of the writer's: a traceback cut below it is the KeyboardInterrupt's, ending a wait."""
    return any("^C" in m for m in messages[:200])


def raiser(threads: Sequence[Thread], messages: Sequence[str]) -> Optional[int]:
    """The first of ``threads`` (none of which waits) whose traceback raised, or was cut after it
    raised (``raised_cut``): its exception is the text's story, before a native stack beside it."""
    return next((i for i, t in enumerate(threads) if raised(t) or raised_cut(t, messages)), None)


def crash_not_shown(proc: Process) -> Optional[Tuple[str, str, str]]:
    """The process crashed and no thread in its text took the fatal signal (``UNSHOWN``'s entry):
    macOS's crash report (``REPORT_NOTE``) with no "Crashed" thread in it, or faulthandler's dump
    of a fatal signal with no thread marked current (the signal hit a thread with no Python frames:
    open round 32's ctypes DAQ card driver, read as the IPython history thread's condition), or one
    whose current thread shows no frame (open round 56: the paste ends at its header).  Not
    for a report of a kill from outside (SIGKILL: the system's watchdog, a force quit), which ends a
    process whatever it was doing, a hang included."""
    if REPORT_NOTE in proc.notes and proc.signal != "SIGKILL":
        return UNSHOWN["report"]
    if DUMPED_CUT_NOTE in proc.notes and proc.signal is None and not any(t.current for t in proc.threads):
        return UNSHOWN["coredump"]
    if SIGNAL_THREAD_CUT_NOTE in proc.notes and not any(t.current for t in proc.threads):
        return UNSHOWN["gdb-signal-thread"]
    if (_FAULTHANDLER in proc.notes and proc.signal in FATAL_SIGNALS and proc.threads
            and not any(t.current for t in proc.threads)):
        return UNSHOWN["faulthandler"]
    if (_FAULTHANDLER in proc.notes and proc.signal in FATAL_SIGNALS and any(t.frames for t in proc.threads)
            and not any(t.current and t.frames for t in proc.threads)):
        return UNSHOWN["faulthandler-empty"]  # its "Current thread" header over no frame (cut, or none)
    return None


#: An exception line as Python prints it: a dotted class name, alone or before ": message".
_EXC_TEXT = r"[A-Za-z_][\w.]{0,200}(?::\s.*|:)?"
_EXC_LINE = rxcache.compile(r"^exception: " + _EXC_TEXT + r"$", re.S)
#: A log record below the error level (a launcher's own INFO / WARNING lines around its ranks' output):
#: ``[2020-12-24 16:25:13,160] [INFO] [...]``, ``2024-01-01 12:00:00 INFO ...``, ``INFO: ...``, glog's ``I1224 ..``.
_CALM = rxcache.compile(r"^(?:\[?\d{4}-\d\d-\d\d[ T][\d:.,]{5,20}\]?\s{1,4}(?:-\s)?\[?(?:INFO|DEBUG|WARNING|WARN)\b|"
                        r"(?:INFO|DEBUG|WARNING|WARN)[:\s]|[IW]\d{4} \d\d:\d\d:\d\d)")
#: The lines a bare uncaught exception's text may hold beside its frames: the exception line, chained
#: tracebacks' joints, a shell's prompt with the command.  Any other line may be a framework's
#: header over an exception it caught and printed (socketserver's "Exception happened during
#: processing of request", threading's "Exception in thread", asyncio's "Exception in callback",
#: a logger's record), so the text is no proof that the exception ended the process.
_BARE = rxcache.compile(r"^(?:(?!(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|NOTICE|TRACE)\b)"
                        + _EXC_TEXT + r"|During handling of the above exception, another "
                        r"exception occurred:|The above exception was the direct cause of the following exception:|"
                        r"(?:\(\S+\) )?(?:[\w.@~:/\-]+ ?)?[$#%>] {1,2}\S.*|Traceback \(most recent call last\):)$")


def uncaught(proc: Process, t: Thread, threads: Sequence[Thread]) -> bool:
    """Each thread of the text is a whole Python traceback, headed as Python prints an uncaught
    exception and ended by an exception line of its own (not a Ctrl-C or a timeout): one process's,
    or one a rank of a launcher (its ranks printing the same error), and nothing else in the text
    but the exception, its chain's joints, the shell's command (``_BARE``) and records below the
    error level (a launcher's INFO lines, ``_CALM``): the main thread's uncaught exception, which
    ends the process.  A framework's header over the traceback (socketserver's, threading's,
    asyncio's, a logger's error record) says it caught and printed it instead."""
    if t not in threads or not all(_raised_whole(x) for x in threads[:8]) or len(threads) > 8:
        return False
    return all(_BARE.match(m.strip()) or _CALM.match(m.strip()) or _prose(m.strip())
               for m in proc.messages[:200] if m.strip())


#: A writer's sentence around a paste ("Here is what I got, any idea?"): words only, none a program's
#: header says when it catches and prints an exception (error, exception, traceback, failed ...).
_WORDS = rxcache.compile(r"^[A-Za-z][A-Za-z',-]*(?: [A-Za-z0-9][A-Za-z0-9',-]*[,;]?){2,60}[.?!:)]?$")
_HEADER_WORD = rxcache.compile(r"(?i)\b(?:error|exception|traceback|fail\w*|caught|unhandled|ignored|"
                               r"warning|fatal|abort\w*|crash\w*|signal|thread|process|task|worker|callback)\b")


def _prose(line: str) -> bool:
    """A sentence of the writer's, no framework's header (``_WORDS`` without a ``_HEADER_WORD``)."""
    return bool(_WORDS.match(line)) and not _HEADER_WORD.search(line)


def _raised_whole(t: Thread) -> bool:
    if not raised(t) or cut_traceback(t) or not t.notes[0].startswith("Python traceback"):
        return False
    exc = "exception: " + exception_of(t)
    return bool(_EXC_LINE.match(exc)) and not _NOT_RAISED.search(exc)


def thread_ended(t: Thread) -> bool:
    """A traceback threading's excepthook printed (``Exception in thread NAME:``), or multiprocessing
    over a child's (``Process NAME:``), that ends in an exception of its own (not a Ctrl-C or a
    timeout, whose line says what it waited for): nothing caught it, so the thread (or the child) is
    gone; its innermost frame raised and waits for nothing."""
    if EXCEPTHOOK_NOTE in t.notes and cut_traceback(t):
        return True  # threading prints its header only for an exception nothing caught (no Ctrl-C in a thread)
    return (EXCEPTHOOK_NOTE in t.notes or MP_CHILD_NOTE in t.notes) and raised(t) and not cut_traceback(t)


def exception_summary(lead: str, t: Thread, messages: Sequence[str], uncaught_: bool) -> str:
    """The triage's sentence for a thread whose exception is the story: one nothing caught (``uncaught``,
    or a thread / child that ended on it), one that raised with no thread of the text waiting (a
    framework may have caught it), one CPython ignored (a finalizer's), one a cut took the line of."""
    exc = exception_of(t)[:160]
    if uncaught_:
        ended = ("" if not thread_ended(t) else ": the child process ended on it" if MP_CHILD_NOTE in t.notes
                 else ": that thread ended, the process may go on without it")
        return "%s raised an exception nothing caught (%s)%s" % (lead, exc or "its line is cut from the text", ended)
    if cut_traceback(t):
        return ("%s raised an exception whose line is cut from the text (the traceback ends at a frame; a Ctrl-C "
                "of a hang prints one too, and then its innermost frame is where the thread stood) and no thread "
                "in the text waits" % lead)
    if any(m.startswith("Exception ignored in") for m in messages[:200]):
        return ("%s raised an exception (%s) that CPython ignored (\"Exception ignored in\": a finalizer's or "
                "callback's, which ends nothing) and no thread in the text waits" % (lead, exc))
    return ("%s raised an exception (%s) and no thread in the text waits: it ended that thread unless the program "
            "caught it (text around it may be a framework's or logger's that did); a thread that waits for that "
            "one's work waits forever" % (lead, exc))


def exception_of(t: Thread) -> str:
    """The exception line a traceback ends in ("" without one)."""
    return next((n[len("exception: "):] for n in t.notes if n.startswith("exception: ")), "")


def dumper_faulted(frames: Sequence[Frame], name_of: Callable[[Frame], str]) -> bool:
    """A thread stopped inside CPython's traceback dumper (``_DUMPERS`` within its innermost
    frames, under faulthandler or the fatal error path) but not in the write() of a line: the
    dumper's unlocked walk of another thread's frames faulted (a debugger stops a thread there only
    at its SIGSEGV; a dump that goes on sits in write(), and it cannot loop: its depth is bounded)."""
    inner = [f for f in frames if not f.marker]
    names = [name_of(f) if f.kind != "python" else "" for f in inner]
    at = next((i for i, n in enumerate(names[:ABORT_DEPTH]) if _DUMPERS.match(n)), None)
    if at is None or not any(_DUMPER_ROOTS.match(n) for n in names[at:]):
        return False
    return not any(_DUMPER_STILL.match(n) or _DUMPER_STILL.match(n.split("__libc_", 1)[-1]) for n in names[:at])


def raising_cuda_error(frames: Sequence[Frame], name_of: Callable[[Frame], str]) -> bool:
    """The innermost frames are c10 raising a CUDA call's error (``c10_cuda_check_implementation``,
    under the exception's constructor or frames without a name): the thread throws, whatever its
    callers were doing (a watchdog's event query is no collective wait once it raises)."""
    for f in frames[:ABORT_DEPTH]:
        if f.marker or f.kind == "python":
            return False
        name = name_of(f)
        if name == "c10::cuda::c10_cuda_check_implementation":
            return True
        if name and not _CUDA_CHECK.match(name):
            return False
    return False


#: c10's exception constructors and checks: the innermost frames of a c10 error being raised.
_C10_RAISING = rxcache.compile(r"^(c10::Error::Error|c10::\w*Error::\w*Error|"
                               r"c10::detail::torch(?:Check|InternalAssert)Fail\w*|"
                               r"c10::cuda::c10_cuda_check_implementation)$")
#: Raisers of c10 errors that are a timeout's consequence (ProcessGroupNCCL's watchdog): the wait the
#: timeout ended tells the hang, the raise is not a crash of its own.
_C10_TIMEOUT_RAISERS = rxcache.compile(r"(?i)timeout|watchdog")
_C10_RAISED_FROM = rxcache.compile(r"^c10 exception: Exception raised from (\S+) at (\S*)")


def c10_raiser(t: Thread) -> Optional[Tuple[str, str]]:
    """(function, source path) of the c10 exception the thread's header note says raised, else None."""
    return next(((m.group(1), m.group(2)) for m in map(_C10_RAISED_FROM.match, t.notes) if m), None)


def raised_by_timeout(t: Thread) -> bool:
    """The thread's c10 exception was raised by a timeout check (ProcessGroupNCCL's checkTimeout, its
    watchdog): the crash it ends in is that timeout's consequence."""
    raiser = c10_raiser(t)
    return raiser is not None and bool(_C10_TIMEOUT_RAISERS.search(raiser[0]))


def raising_c10_error(t: Thread, name_of: Callable[[Frame], str]) -> bool:
    """The thread's innermost frames are a c10 exception's constructor (the ``frame #0:
    c10::Error::Error`` of the backtrace PyTorch prints with the error's message), raised by no
    timeout check: the program threw that error (a failed TORCH_CHECK, an internal assert), as a
    Python traceback's own exception says it raised (open round 31: a C++ test's "Already have an
    autograd context id" read as "runs").  A watchdog's timeout raises the same constructor: its
    raiser (the header's "raised from", else the first frame outside the constructor) keeps it out,
    as does a raise in the process group's own code (``c10d::``: its collective's rules decide)."""
    frames = [f for f in t.frames if not f.marker]
    if not frames or frames[0].kind == "python" or not _C10_RAISING.match(name_of(frames[0]) or ""):
        return False
    noted = c10_raiser(t)
    raiser = noted[0] + " " + noted[1] if noted is not None else None
    if raiser is not None and "/c10d/" in raiser:
        return False  # raised in the process group's own source
    if raiser is None:
        raiser = next((name_of(f) for f in frames[1:ABORT_DEPTH + 1]
                       if f.kind != "python" and name_of(f) and not _C10_RAISING.match(name_of(f))), "")
    if _C10_TIMEOUT_RAISERS.search(raiser):
        return False
    # the process group's own errors (a collective's, its NCCL check's) are told by the collective's rules
    return not any(f.kind != "python" and name_of(f).startswith("c10d::") for f in frames[1:ABORT_DEPTH + 2])


def fatal_handler_at(frames: Sequence[Frame], name_of: Callable[[Frame], str]) -> Optional[int]:
    """The innermost frame of a handler that only a fatal signal or a fatal error runs, anywhere on
    the stack (UCX's handler walks the stack to print it: its innermost frames are the loader)."""
    return next((i for i, f in enumerate(frames)
                 if not f.marker and f.kind != "python" and _FATAL_HANDLERS.match(name_of(f))), None)


#: The first page of the address space: nothing is mapped there, so a lock or condition variable
#: whose address gdb printed below this is no object a thread can wait on.
NULL_PAGE = 0x1000


def null_page_wait(t: Thread) -> bool:
    """The thread's wait object, as gdb printed the primitive's argument (``mutex=0x2a``), lies in the
    null page: the primitive faulted on its first touch of it (a freed or never set object, open
    round 17's MXNet engine variable at ``0xa``), so the thread crashed there; it does not wait."""
    w = t.waits
    if w is None or not w.resource or not w.resource.startswith("0x"):
        return False
    try:
        return int(w.resource, 16) < NULL_PAGE
    except ValueError:
        return False


#: The note of a c10 exception raised by ProcessGroupNCCL's check of its communicators for an NCCL
#: error (``checkForNCCLErrors*``: a peer that exited, a network or internal error), not a timeout.
_NCCL_ERROR_RAISED = rxcache.compile(r"^c10 exception: Exception raised from checkForNCCLErrors\w* at ")


def raising_nccl_error(t: Thread, name_of: Callable[[Frame], str]) -> bool:
    """The thread's c10 exception was raised by ProcessGroupNCCL's NCCL-error check and its innermost
    frames are that exception's own (its constructor, the check): the thread throws the error that
    ends the process (open round 19: a survivor's ncclRemoteError read as the collective it left)."""
    if not any(_NCCL_ERROR_RAISED.match(n) for n in t.notes):
        return False
    for f in t.frames[:ABORT_DEPTH]:
        name = name_of(f)
        if f.marker or f.kind == "python" or (name and not (_CUDA_CHECK.match(name) or "checkForNCCLErrors" in name)):
            return False
    return bool(t.frames)


#: The note of a c10 exception that c10's check of a CUDA call raised (its header line, kept where the
#: frames under the exception's constructor are cut: open round 30's vLLM log).
_CUDA_CHECK_RAISED = rxcache.compile(r"^c10 exception: Exception raised from c10_cuda_check_implementation at ")


def raising_cuda_note(t: Thread) -> bool:
    """The thread's frames are the c10 exception a CUDA call's check raised, by its header, with the
    exception's own frames innermost (its constructor, torchCheckFail): the thread throws that error."""
    if not any(_CUDA_CHECK_RAISED.match(n) for n in t.notes):
        return False
    return bool(t.frames) and all(f.function is None or _CUDA_CHECK.match(f.function.split("(", 1)[0])
                                  for f in t.frames[:2] if not f.marker)


def raising_c10(t: Thread, name_of: Callable[[Frame], str]) -> bool:
    """The thread throws a c10 error of its own: an NCCL error's check, or any raiser but a timeout's."""
    return raising_nccl_error(t, name_of) or raising_c10_error(t, name_of)


def abridged(t: Thread) -> bool:
    """A stack an issue's author wrote by hand (``calltree``, ``handlist``): its innermost name is where
    the author stopped writing, not where a debugger stopped the thread, so where a name stands in it
    proves no fault."""
    return any(n.startswith(("call list written by hand", "call chain written")) for n in t.notes)


def crash_on_stack(t: Thread, name_of: Callable[[Frame], str], no_signal: bool) -> bool:
    """The thread's own stack proves it crashed: ``abort`` on top (where the input names no signal:
    a named one already says which thread got it), a wait on an object in the null page, or a fatal
    handler anywhere on it."""
    return ((no_signal and (aborting(t.frames, name_of) or dumper_faulted(t.frames, name_of) and not abridged(t)
                            or raising_cuda_error(t.frames, name_of) or raising_cuda_note(t)
                            or raising_c10(t, name_of)
                            or null_page_wait(t)))
            or fatal_handler_at(t.all_frames(), name_of) is not None or null_pc_top(t))


def null_pc_top(t: Thread) -> bool:
    """The thread's innermost frame is an address in the null page, in no object (gdb's and lldb's
    ``frame #0: 0x0000000000000000``): the thread jumped there through a null function pointer (an
    unresolved weak symbol, a freed vtable) and faulted on the fetch; no thread waits or runs there,
    whatever signal the debugger's stop line names (lldb reads a macOS core as stopped by SIGSTOP)."""
    top = next((f for f in t.frames if not f.marker), None)
    return (top is not None and top.kind == "native" and top.address is not None and top.address < NULL_ADDRESSES
            and (not top.function or top.function == "??") and not top.library and not top.file)


def fatal_line(messages: Sequence[str]) -> bool:
    """A log line that says the process itself crashed (``_FATAL_LINES``)."""
    return any(_FATAL_LINES.search(m) for m in messages)


def proven(messages: Sequence[str], frames: Sequence[Frame], name_of: Callable[[Frame], str],
           wait_at: Optional[int]) -> bool:
    """Positive evidence that a thread crashed, over the wait its frames show (at ``wait_at``): a
    fatal log line, or a fatal handler outside that wait (the wait is the handler's own doing: a
    backtrace that takes the loader lock), or c10 raising a CUDA error.  A wait outside the handler
    or below ``abort`` (a watchdog that aborts after its timeout) is the cause, the crash its
    consequence: not proof; below a fault's own handler it is the frame that faulted: proof."""
    if fatal_line(messages) or raising_cuda_error(frames, name_of):
        return True
    h = fatal_handler_at(frames, name_of)
    return h is not None and (wait_at is None or wait_at < h or _FAULT_HANDLERS.match(name_of(frames[h])) is not None)
