"""Errors that end a run with a one-line message and a documented exit code."""

from __future__ import annotations

#: Exit codes (documented in README.md).
EXIT_OK = 0  # analyzed, no hang/deadlock/crash finding
EXIT_INPUT = 2  # usage or input error (missing/invalid core, bad text, bad signatures, no such pid)
EXIT_FINDING = 3  # analyzed, at least one finding of severity crash/deadlock/hang/error
EXIT_TOOL = 4  # the analysis itself failed (gdb crashed, timed out, produced no snapshot)


class HangAnalyzeError(Exception):
    """Base: the message is shown as one line on stderr, never a traceback."""

    exit_code = EXIT_INPUT


class InputError(HangAnalyzeError):
    exit_code = EXIT_INPUT


class SignatureError(HangAnalyzeError):
    exit_code = EXIT_INPUT


class GdbError(HangAnalyzeError):
    exit_code = EXIT_TOOL
