"""The settings every gdb the driver starts runs under: real gdb must accept each and report it on."""

from __future__ import annotations

import subprocess

from hanganalyze.acquire.gdbsession import GDB_SETTINGS


def test_safety_settings_are_present_and_accepted_by_gdb():
    assert "set auto-load off" in GDB_SETTINGS
    assert "set may-call-functions off" in GDB_SETTINGS
    argv = ["gdb", "-nx", "-batch"]
    for s in GDB_SETTINGS:
        argv += ["-iex", s]
    argv += ["-ex", "show may-call-functions", "-ex", "show auto-load python-scripts", "-ex", "print 1"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Permission to call functions in the program is off." in out.stdout
    assert "Auto-loading of Python scripts is off." in out.stdout
    assert "$1 = 1" in out.stdout
    assert "undefined" not in out.stderr.lower() and "error" not in out.stderr.lower(), out.stderr
