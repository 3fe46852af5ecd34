"""``hang-analyze`` inside gdb finds the analyzer installed beside the extension (issue 30).

gdb is often started from a shell whose ``PATH`` lacks the virtual environment ``make demo``
installed into.  Real gdb, a real abort core of the C++ terminate fixture, the extension sourced
from a copy of the checkout whose ``.venv/bin`` holds the analyzer, and a ``PATH`` with no
``hanganalyze`` on it: the command is found there (or, with only the venv's Python, run as
``python3 -m hanganalyze``), and without either the one-line error names where it looked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import REPO, core_at_abort, fixture_binary  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

ANALYZER = shutil.which("hanganalyze")


@pytest.fixture(scope="module")
def abort_core(tmp_path_factory):
    exe = fixture_binary("cxx_thread_terminate")
    return core_at_abort([str(exe)], tmp_path_factory.mktemp("beside")), exe


def _checkout(tmp_path: Path) -> Path:
    """A copy of the extension in a checkout layout: ROOT/gdbext/{load.py,hanganalyze_gdbext}."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "gdbext", root / "gdbext", ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".venv" / "bin").mkdir(parents=True)
    return root


def _wrapper(path: Path, argv0: str) -> None:
    path.write_text('#!/bin/sh\nexec "%s" "$@"\n' % argv0)
    path.chmod(0o755)


def _gdb(root: Path, core: Path, exe: Path) -> str:
    """gdb -batch with the copy's extension and hang-analyze, PATH stripped of every hanganalyze."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.path.exists(os.path.join(d, "hanganalyze"))]
    env = {k: v for k, v in os.environ.items() if k != "HANGANALYZE"}
    env["PATH"] = os.pathsep.join(path)
    env["HOME"] = str(root)  # no ~/.local/bin/hanganalyze of the user running the tests
    argv = ["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
            "-ex", "file %s" % exe, "-ex", "core-file %s" % core,
            "-ex", "source %s" % (root / "gdbext" / "load.py"), "-ex", "hang-analyze"]
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300)
    return res.stdout.decode("utf-8", "replace")


@pytest.mark.skipif(ANALYZER is None, reason="no hanganalyze command to install beside the extension")
def test_analyzer_in_the_checkouts_venv(abort_core, tmp_path):
    core, exe = abort_core
    root = _checkout(tmp_path)
    _wrapper(root / ".venv" / "bin" / "hanganalyze", str(ANALYZER))
    out = _gdb(root, core, exe)
    # exit 6 (a crash) is a result, not a failure: the report is printed
    assert "std-thread-joinable-terminate" in out, out[-3000:]
    assert "is needed" not in out and "Traceback" not in out, out[-3000:]


def test_venv_python_dash_m(abort_core, tmp_path):
    """Only the venv's Python (the entry script gone): ``python3 -m hanganalyze``."""
    core, exe = abort_core
    root = _checkout(tmp_path)
    _wrapper(root / ".venv" / "bin" / "python3", sys.executable)  # this Python imports hanganalyze
    out = _gdb(root, core, exe)
    assert "std-thread-joinable-terminate" in out, out[-3000:]
    assert "is needed" not in out and "Traceback" not in out, out[-3000:]


def test_nothing_beside_names_where_it_looked(abort_core, tmp_path):
    core, exe = abort_core
    root = _checkout(tmp_path)
    out = _gdb(root, core, exe)
    lines = [ln for ln in out.splitlines() if "hang-analyze:" in ln]
    assert len(lines) == 1, out[-3000:]
    line = lines[0]
    assert "the hanganalyze command is needed (not on PATH, not in %s" % (root / ".venv" / "bin") in line, line
    assert str(root / "venv" / "bin") in line and "HANGANALYZE=" in line, line
    assert "std-thread-joinable-terminate" not in out and "Traceback" not in out, out[-3000:]
