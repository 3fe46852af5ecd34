"""Signal names, and the signals that say how a debugger stopped a process rather than what
happened to it: one answer for the gdb extension (``$_siginfo`` of a core) and the analyzer (a
core's notes, coredumpctl's record, how gdb died).  Standard library only, Python 3.8 syntax."""

import signal as _signal
from typing import Optional

#: A ``gcore`` of a running process records the SIGSTOP of its ptrace attach (or the SIGTRAP /
#: SIGTSTP of a debugger's stop): reported as no signal.
DEBUGGER_STOPS = frozenset({"SIGSTOP", "SIGTRAP", "SIGTSTP"})
#: Signals that mean the process crashed (the bucket id and the triage judge a crash by them).
FATAL_SIGNALS = frozenset({"SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS"})


def signal_name(signo: object) -> Optional[str]:
    """``SIGSEGV`` for 11 (or "11"), ``SIG<n>`` for a number Python does not name (real-time
    signals), None for anything that is not a positive number."""
    try:
        n = int(signo)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    if n <= 0:
        return None
    try:
        return _signal.Signals(n).name
    except ValueError:
        return "SIG%d" % n


def fatal_signal(signo: object) -> Optional[str]:
    """``signal_name``, None for a debugger's stop."""
    name = signal_name(signo)
    return None if name in DEBUGGER_STOPS else name
