"""Reading a live process's ``/proc`` files: one place, one failure mode (None)."""

from __future__ import annotations

from typing import Optional


def read_proc(pid: int, name: str, limit: int = -1) -> Optional[bytes]:
    """``/proc/PID/NAME`` (at most ``limit`` bytes), None when unreadable: not ours, or gone.
    The one place the analyzer reads a live process's /proc files."""
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read(limit)
    except OSError:
        return None
