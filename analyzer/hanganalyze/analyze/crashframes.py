"""Frames that show a thread crashing: a signal handler or abort near the top of its stack.

Why a module of its own: the triage asks two questions of them.  With a fatal signal known, which
thread got it (``CRASH_FRAMES`` in its first frames).  With no signal in the input at all (a pasted
``bt`` or WinDbg ``k`` of one thread), whether the stack itself proves a crash: a thread whose
innermost frames are ``abort`` (or ``terminate`` -> ``abort``, ``raise``/``pthread_kill`` under
``abort``) is being killed by SIGABRT, whatever the paste left out (``aborting``).  Sealed round 9
had such a WinDbg ``k`` (``ucrtbase!abort`` <- ``terminate`` <- an uncaught C++ exception) read as
"runs".
"""

from __future__ import annotations

from typing import Callable, Sequence

from hanganalyze import rxcache
from hanganalyze_gdbext.model import Frame

#: Frames of a crashed thread that show the signal (a handler, abort) near the top.
CRASH_FRAMES = rxcache.compile(r"^(abort|raise|gsignal|pthread_kill\w*|__restore_rt|<signal handler called>|"
                               r"__pthread_kill\w*|faulthandler_\w+|__GI_abort|std::terminate|__gnu_cxx::"
                               r"__verbose_terminate_handler|__cxxabiv1::__terminate|c10::detail::torchCheckFail\w*|"
                               r"ucs_handle_error|ucs_error_signal_handler|ucs_debug_\w+|\w*[Ss]ignal_?[Hh]andler\w*|"
                               r"__sigaction|google::\w*FailureSignalHandler\w*|absl::\w*FailureSignalHandler\w*)$")
#: abort itself (glibc, the MSVC runtime's ucrtbase!abort, macOS's libsystem_c abort).
_ABORT = rxcache.compile(r"^(abort|__GI_abort|__libc_abort)$")
#: What may sit above abort on the way down to the kernel: the signal being raised.
_RAISING = rxcache.compile(r"^(raise|gsignal|__GI_raise|pthread_kill\w*|__pthread_kill\w*|__pthread_kill_\w+|"
                           r"__futex_abstimed_wait\w*|__restore_rt|<signal handler called>)$")
#: How deep abort may be (below the raising frames) and still be this thread's innermost call.
ABORT_DEPTH = 4


def aborting(frames: Sequence[Frame], name_of: Callable[[Frame], str]) -> bool:
    """``abort`` is the innermost frame of ``frames`` but for the signal being raised above it:
    positive evidence of a crash (SIGABRT) even where the input names no signal."""
    for f in frames[:ABORT_DEPTH]:
        if f.marker or f.kind == "python":
            return False
        name = name_of(f)
        if _ABORT.match(name):
            return True
        if not _RAISING.match(name):
            return False
    return False
