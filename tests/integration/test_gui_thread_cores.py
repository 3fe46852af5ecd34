"""The Tk abort of signatures/gui_threads.yaml on a real core: a Tcl interpreter freed on a thread
that did not create it (tests/fixtures/py_tk_wrong_thread.py), run under real gdb until Tcl aborts,
its core read by the command.  Near miss: the same interpreter freed on its own thread, the process
then waiting; its core has Tcl loaded and no abort."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from helpers import FIXTURES, core_at_abort, gcore, pyenv_pythons, run_hanganalyze, start_hung

SIG = "tkinter-used-off-its-thread"
FIXTURE = FIXTURES / "py_tk_wrong_thread.py"

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="needs gdb")


def _tk_python() -> Optional[str]:
    """A Python with _tkinter whose dealloc still aborts (before gh-83274's change): this one, a
    built CPython, or the system's (.ci/run installs python3-tk for it)."""
    cands = [sys.executable] + [str(p) for v, p in sorted(pyenv_pythons().items()) if v not in ("3.15",)]
    cands.append("/usr/bin/python3")
    for exe in cands:
        if not Path(exe).exists():
            continue
        probe = subprocess.run([exe, "-c", "import _tkinter, sys; sys.exit(sys.version_info >= (3, 15))"],
                               capture_output=True, timeout=60)
        if probe.returncode == 0:
            return exe
    return None


@pytest.fixture(scope="module")
def tk_python():
    exe = _tk_python()
    if exe is None:
        pytest.fail("no Python with tkinter here: install python3-tk (.ci/run does)")
    return exe


def _analyze(core: Path, exe: str, codes: tuple) -> dict:
    res = run_hanganalyze([core, "--exe", exe, "--format", "json"], timeout=300)
    assert res.returncode in codes, res.stderr.decode()[-2000:]  # 6 a crash; 3 a process that waits
    return json.loads(res.stdout)


def test_tcl_interpreter_freed_on_a_worker_aborts_and_is_named(tmp_path, tk_python):
    core = core_at_abort([tk_python, str(FIXTURE), "wrong-thread"], tmp_path / "wrong")
    data = _analyze(core, tk_python, (6,))
    f = next(f for f in data["findings"] if f["signature"] == SIG)
    assert f["severity"] == "crash" and f["fix"] and f["references"]
    assert any("Tcl_AsyncDelete" in json.dumps(e) for e in f["evidence"]), f["evidence"]
    tri = next(f for f in data["findings"] if f["signature"] == "triage")
    assert tri["triage"]["wait"] == "crashed"


def test_tcl_interpreter_freed_on_its_own_thread_is_no_finding(tmp_path, tk_python):
    h = start_hung([tk_python, str(FIXTURE), "own-thread"])
    try:
        core = gcore(h.pid, tmp_path / "own")
    finally:
        h.kill()
    data = _analyze(core, tk_python, (0, 3))
    assert SIG not in [f["signature"] for f in data["findings"]]
