"""Installed the ways users install it (issue 35): the wheel built once from this tree, then
``pip install --target``, ``pip install --user``, a venv (the console script and ``python -m``) and
a zipapp; each installed copy finds its built-in signatures as package data (``--version`` says
where) and analyzes a pasted traceback with them.  gdbext from an installed copy: ``hanganalyze
gdb-path`` prints the file gdb sources, and the ``hang-*`` commands run in real gdb on a live process.

Offline and quick: the wheel is built once for the module (``--no-build-isolation``, the test venv's
setuptools), installed with ``--no-deps``; the dependencies come from the test venv's site-packages
(``PYTHONPATH``, or a ``.pth`` file in the new venv).  pipx and ``uv tool`` are not tested here: neither
is installed on the test machines, and they install the same wheel into a venv (the case tested).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipapp
import zipfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import start_hung  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: A pasted gdb backtrace of a real PyTorch report: a built-in signature names it (a crash: exit 6).
SAMPLE = ROOT / "tests" / "data" / "sigtext" / "gil_missing_pybytes_pytorch_72086.txt"
SAMPLE_SIGNATURE = "python-api-without-gil"
#: What the build reads (setup.py, pyproject.toml, MANIFEST.in): copied, so the tree gets no build/.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "analyzer", "gdbext", "signatures")
#: The test venv's site-packages: the installed copies' dependencies.
DEPS = sysconfig.get_path("purelib")


class Install(NamedTuple):
    """One installed copy: how to run it, its environment, and the folder its package must come from."""

    argv: List[str]
    env: Dict[str, str]
    package_root: Path


def _env(tmp: Path, **extra: str) -> Dict[str, str]:
    """A user's environment: no PYTHONPATH to this checkout, a private cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE")}
    env.update(HANGANALYZE_CACHE_DIR=str(tmp / "cache"), PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _pip(*args: str, python: str = "", env: Optional[Dict[str, str]] = None) -> None:
    """pip of the test venv, offline, our wheel only (``--python``: install for that interpreter)."""
    cmd = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "--no-input"]
    cmd += ["--python", python] if python else []
    subprocess.run(cmd + list(args) + ["--no-index", "--no-deps", "--no-warn-script-location"],
                   check=True, capture_output=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "wheel", "--no-deps",
                    "--no-build-isolation", "--no-index", "-w", str(out), str(src)],
                   check=True, capture_output=True, timeout=300)
    (found,) = out.glob("hanganalyze-*.whl")
    return found


@pytest.fixture(scope="module")
def installs(wheel, tmp_path_factory) -> Dict[str, Install]:
    """Every way, installed once for the module."""
    tmp = tmp_path_factory.mktemp("installs")
    ways: Dict[str, Install] = {}
    target = tmp / "target"
    _pip("install", "--target", str(target), str(wheel))
    env = _env(tmp, PYTHONPATH="%s:%s" % (target, DEPS))
    ways["target"] = Install([str(target / "bin" / "hanganalyze")], env, target)
    ways["target-m"] = Install([sys.executable, "-m", "hanganalyze"], env, target)

    base = getattr(sys, "_base_executable", sys.executable)  # --user: a Python that is no venv
    user = tmp / "userbase"
    _pip("install", "--user", "--break-system-packages", str(wheel), python=base,
         env=_env(tmp, PYTHONUSERBASE=str(user)))
    purelib = sysconfig.get_path("purelib", "posix_user", {"userbase": str(user)})
    ways["user"] = Install([str(user / "bin" / "hanganalyze")],
                           _env(tmp, PYTHONUSERBASE=str(user), PYTHONPATH=DEPS), Path(purelib))

    venv = tmp / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    site = Path(subprocess.check_output([str(vpy), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    (site / "zz_test_deps.pth").write_text(DEPS + "\n")  # after the venv's own packages
    _pip("install", str(wheel), python=str(vpy))
    ways["venv"] = Install([str(venv / "bin" / "hanganalyze")], _env(tmp), site)
    ways["venv-m"] = Install([str(vpy), "-m", "hanganalyze"], _env(tmp), site)

    pyz = tmp / "hanganalyze.pyz"
    zipapp.create_archive(target, pyz, main="hanganalyze.cli:main",
                          filter=lambda p: p.parts[0] != "bin" and not p.parts[0].endswith(".dist-info"))
    ways["zipapp"] = Install([sys.executable, str(pyz)], _env(tmp, PYTHONPATH=DEPS), pyz)
    return ways


def _run(inst: Install, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(inst.argv + list(args), env=inst.env, capture_output=True, text=True, timeout=timeout)


def test_the_wheel_carries_every_data_file_of_the_repository(wheel):
    """Package data by glob (setup.py): every file under signatures/, a new one too, is in the wheel."""
    names = set(zipfile.ZipFile(wheel).namelist())
    data = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "signatures").rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts]
    assert len(data) > 30 and "signatures/rules/rules.yaml" in data
    assert [d for d in data if "hanganalyze/" + d not in names] == []
    assert "hanganalyze_gdbext/load.py" in names and "hanganalyze_gdbext/lists/wait_kinds.txt" in names
    assert not [n for n in names if n.startswith("share/") or ".data/data/" in n]  # no <prefix>/share files


@pytest.mark.parametrize("way", ["target", "target-m", "user", "venv", "venv-m", "zipapp"])
def test_installed_copy_analyzes_with_its_own_signatures(installs, way):
    inst = installs[way]
    res = _run(inst, "--version")
    assert res.returncode == 0, res.stderr
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("signatures: ")][0]
    if way == "zipapp":  # read from the archive, copied into the cache as real files
        assert "(package data in %s, extracted)" % inst.package_root in line, res.stdout
        folder = Path(line.split()[1])
        assert folder.is_relative_to(Path(inst.env["HANGANALYZE_CACHE_DIR"])) and (folder / "schema.json").is_file()
    else:
        assert line == "signatures: %s (package data)" % (inst.package_root / "hanganalyze" / "signatures"), res.stdout
    res = _run(inst, "-f", "json", str(SAMPLE))
    assert res.returncode == 6, res.stderr  # a crash, by the built-in signature
    report = json.loads(res.stdout)
    assert [f["severity"] for f in report["findings"] if f["signature"] == SAMPLE_SIGNATURE] == ["crash"]


@pytest.fixture(scope="module")
def deadlocked():
    hung = start_hung([sys.executable, str(ROOT / "tests" / "fixtures" / "py_deadlock.py")])
    yield hung
    hung.kill()


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
@pytest.mark.parametrize("way", ["target", "zipapp"])
def test_gdb_sources_the_installed_extension(installs, deadlocked, way):
    """``hanganalyze gdb-path`` of an installed copy: the line for gdb, then hang-locks in real gdb
    (-nx: no ~/.gdbinit) finds the ABBA deadlock of a live process."""
    inst = installs[way]
    res = _run(inst, "gdb-path")
    assert res.returncode == 0, res.stderr
    line = res.stdout.strip()
    assert line.startswith("source ") and line.endswith("/hanganalyze_gdbext/load.py"), line
    script = Path(line[len("source "):])
    root = Path(inst.env["HANGANALYZE_CACHE_DIR"]) if way == "zipapp" else inst.package_root
    assert script.is_file() and script.is_relative_to(root), line
    assert _run(inst, "gdb-path", "--file").stdout.strip() == str(script)
    out = subprocess.run(["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
                          "-ex", "attach %d" % deadlocked.pid, "-ex", line, "-ex", "hang-locks", "-ex", "detach"],
                         capture_output=True, text=True, timeout=120, env=inst.env)
    text = out.stdout + out.stderr
    assert "Undefined command" not in text and "Traceback" not in text, text[-3000:]
    assert "worker-a" in text and "worker-b" in text and "deadlock" in text.lower(), text[-3000:]
