"""The import layers of pyproject.toml's [tool.importlinter] contracts hold (docs/design.md):
model at the bottom, the walker and gdbext over it, the shared modules, direct, acquire, analyze,
render, pipeline, the CLI on top; no cycles between packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> list:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e .[test])")
    return [exe, "--config", str(ROOT / "pyproject.toml"), "--no-cache"]


def test_import_contracts_are_kept():
    env = {"PYTHONPATH": "%s:%s" % (ROOT / "analyzer", ROOT / "gdbext"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(_lint_imports(), cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout
