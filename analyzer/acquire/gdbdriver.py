"""PLACEHOLDER (owned by the end-to-end work): drive gdb through MI with gdbext loaded."""

from __future__ import annotations

from hanganalyze.errors import GdbError


def snapshot_from_core(core, info, exe=None, gdb="gdb", timeout=120.0, progress=None):
    raise GdbError("core analysis not implemented yet")


def snapshot_from_pid(pid, gdb="gdb", timeout=120.0, progress=None):
    raise GdbError("live analysis not implemented yet")
