"""Errors that end a run with a one-line message and a documented exit code."""

from __future__ import annotations

#: Exit codes (documented in README.md).
EXIT_OK = 0  # analyzed: no hang, deadlock or crash (or the process made progress over the samples)
EXIT_INPUT = 2  # usage or input error (missing/invalid core, bad text, bad signatures, no such pid)
EXIT_HANG = 3  # analyzed: a hang (a finding of severity hang/error, or threads stuck in a wait)
EXIT_FINDING = EXIT_HANG  # the old name of 3 (before deadlocks and crashes had codes of their own)
EXIT_TOOL = 4  # the analysis itself failed (gdb crashed, timed out, produced no snapshot)
EXIT_DEADLOCK = 5  # analyzed: a deadlock (a finding of severity deadlock: a wait-for cycle, a known one)
EXIT_CRASH = 6  # analyzed: a crash (a finding of severity crash, or a thread that got a fatal signal)


class HangAnalyzeError(Exception):
    """Base: the message is shown as one line on stderr, never a traceback."""

    exit_code = EXIT_INPUT


class InputError(HangAnalyzeError):
    exit_code = EXIT_INPUT


class PtraceDenied(InputError):
    """The kernel refused to let us attach to ``pid`` (EPERM): ``acquire/noptrace.py`` says why, and
    what /proc shows without ptrace is reported instead of ending the run."""

    def __init__(self, pid: int, message: str) -> None:
        super().__init__(message)
        self.pid = pid


class SignatureError(HangAnalyzeError):
    exit_code = EXIT_INPUT


class GdbError(HangAnalyzeError):
    exit_code = EXIT_TOOL


class UsageError(Exception):
    """A bad command line; shown as one line, exit 2."""
