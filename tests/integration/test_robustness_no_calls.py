"""No gdbext command ever calls a function in the inferior: gdb's ``inferior_call`` event (fired
before any inferior function call, whoever asks for it) is counted while every command runs on a
live Python process and on a live C++ deadlock, in a plain gdb where calls are allowed
(may-call-functions on, as in a user's session)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, fixture_binary, gdb_batch, pyenv_pythons  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

COUNT = ("python import gdb; hang_calls = []; "
         "gdb.events.inferior_call.connect(lambda ev: hang_calls.append(type(ev).__name__))")
COMMANDS = ["hang-bt -a", "bt", "hang-locks", "hang-dump /dev/null", "hang-analyze --timeout 120"]


def calls_made(pid: int) -> tuple:
    out = gdb_batch(["show may-call-functions", COUNT] + COMMANDS
                    + ["python print('INFERIOR-CALLS', len(hang_calls))",
                       # control: a real call is seen by the counter
                       "print (int) getpid()", "python print('AFTER-CONTROL', len(hang_calls))"],
                    pid=pid, timeout=240)
    m = re.search(r"INFERIOR-CALLS (\d+)", out)
    c = re.search(r"AFTER-CONTROL (\d+)", out)
    assert m and c, out[-3000:]
    assert "is on" in out  # calls were allowed: nothing but our code kept them out
    return int(m.group(1)), int(c.group(1)), out


def test_no_inferior_call_on_a_python_process(hung):
    py = pyenv_pythons().get("3.11")
    if py is None:
        pytest.skip("pyenv CPython 3.11 not installed")
    h = hung([str(py), str(FIXTURES / "py_named_threads.py")])
    ours, control, out = calls_made(h.pid)
    assert ours == 0, out[-3000:]
    assert control > 0  # the counter works
    assert "[py]" in out


def test_no_inferior_call_on_a_native_deadlock(hung):
    h = hung([str(fixture_binary("cxx_mutex_deadlock"))])
    ours, control, out = calls_made(h.pid)
    assert ours == 0, out[-3000:]
    assert control > 0
    assert "Deadlock" in out
