"""gdb never runs scripts that sit next to the inferior: ``APP-gdb.py`` beside the executable,
a ``.gdbinit`` in the current or the executable's folder, ``.debug_gdb_scripts``-style files in
``DIR/.debug``.  A core (or a live process) from a shared folder must not be a way to run code as
whoever analyzes it.  Each planted script would create a marker file; none may appear."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import fixture_binary, gcore, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
# absolute: the runs below change directory (a PATH entry such as ".venv/bin" is relative)
_FOUND = shutil.which("hanganalyze")
HANGANALYZE = os.path.abspath(_FOUND) if _FOUND else "hanganalyze"


def plant(d: Path) -> Path:
    """A copy of a fixture in `d`, surrounded by scripts gdb would auto-load; returns the copy."""
    app = d / "app"
    shutil.copy2(fixture_binary("cxx_mutex_deadlock"), app)
    py = "import pathlib; pathlib.Path(%r).write_text('ran')\n"
    (d / "app-gdb.py").write_text(py % str(d / "PWNED-objfile-script"))
    (d / "app-gdb.gdb").write_text("shell touch %s\n" % (d / "PWNED-objfile-gdb"))
    (d / ".gdbinit").write_text("shell touch %s\n" % (d / "PWNED-gdbinit"))
    dbg = d / ".debug"
    dbg.mkdir()
    (dbg / "app-gdb.py").write_text(py % str(d / "PWNED-debugdir"))
    return app


def markers(d: Path):
    return sorted(p.name for p in d.glob("PWNED-*"))


def test_planted_scripts_are_live_scripts_for_plain_gdb(tmp_path):
    """Control: gdb WITHOUT our settings does run the objfile script (so the test can fail)."""
    app = plant(tmp_path)
    subprocess.run(["gdb", "-batch", "-nx", "-iex", "set auto-load safe-path /", "-ex", "file %s" % app],
                   cwd=tmp_path, capture_output=True, timeout=60)
    assert "PWNED-objfile-script" in markers(tmp_path)


def test_core_analysis_runs_no_planted_script(tmp_path):
    app = plant(tmp_path)
    h = start_hung([str(app)], cwd=tmp_path)
    try:
        core = gcore(h.pid, tmp_path / "cores")
        res = subprocess.run([HANGANALYZE, str(core)], cwd=tmp_path, capture_output=True, timeout=180)
        assert res.returncode in (0, 3, 5, 6), res.stderr[-1000:]
        res = subprocess.run([HANGANALYZE, str(core), "--exe", str(app)], cwd=tmp_path, capture_output=True,
                             timeout=180)
        assert res.returncode in (0, 3, 5, 6), res.stderr[-1000:]
        res = subprocess.run([HANGANALYZE, "--pid", str(h.pid)], cwd=tmp_path, capture_output=True, timeout=180)
        assert res.returncode in (0, 3, 5, 6), res.stderr[-1000:]
    finally:
        h.kill()
    assert markers(tmp_path) == []
