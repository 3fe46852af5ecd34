"""Stacks benchmark: hanganalyze vs pystack vs plain gdb on one 200-thread Python core.

Builds a process with 200 threads blocked 25+ Python frames deep
(``tests/fixtures/py_deep_threads.py``), takes its core with gcore, then measures in one run the
wall time and peak RSS (largest process of the tree, from ``RUSAGE_CHILDREN``) of:

  * ``hanganalyze CORE --format json`` (the whole CLI: gdb + gdbext + analysis + render)
  * ``gdb -batch`` + ``hang-dump`` (the gdb half alone)
  * ``pystack core CORE --native`` (installed into ``bench/.venv-pystack``, never a dependency)
  * ``gdb -batch -ex 'thread apply all bt'``

Each command runs ``--repeat`` times (default 3), round-robin (one run of each tool, then the
next round) so that a change of load on a shared machine hits every tool alike; the median is
reported, with the load average before and after.  hanganalyze runs once before the measured
rounds with an empty signature cache (``$XDG_CACHE_HOME``, reported as its first run); that run
also writes Python's bytecode caches, which the measured runs may use as pip-installed copies of
both tools do (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment).  Usage:
``python bench/bench_stacks.py [--python PATH] [--threads N] [--depth N] [--repeat N] [--core CORE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers import LOAD_PY, gcore, start_hung  # noqa: E402

PYSTACK_VENV = HERE / ".venv-pystack"
DEFAULT_PYTHON = Path.home() / ".pyenv" / "versions" / "3.11.7" / "bin" / "python3.11"

# Runs one command and prints its wall time and the peak RSS of its largest descendant.
_MEASURE = r"""
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
print("%f %d %d %d" % (wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode, len(r.stdout)))
if r.returncode not in (0, 3):
    sys.stderr.write(r.stderr.decode("utf-8", "replace")[-2000:])
"""


def run_once(argv, env=None):
    """(wall seconds, peak RSS MB) of one run."""
    out = subprocess.run([sys.executable, "-c", _MEASURE] + [str(a) for a in argv],
                         capture_output=True, text=True, timeout=900, env=env or ENV)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError("measurement failed: %s\n%s" % (argv, out.stderr[-2000:]))
    wall, maxrss, rc, nout = out.stdout.split()
    if int(rc) not in (0, 3):  # 3 = hanganalyze found something
        raise RuntimeError("%s exited %s: %s" % (argv[0], rc, out.stderr[-2000:]))
    return float(wall), int(maxrss) / 1024.0


def measure_all(commands, repeat: int):
    """Round-robin: {name: (median wall, max RSS)} (a failing command is reported and dropped)."""
    walls = {name: [] for name, _ in commands}
    rss = {name: [] for name, _ in commands}
    failed = set()
    for _ in range(repeat):
        for name, argv in commands:
            if name in failed:
                continue
            try:
                w, r = run_once(argv)
            except RuntimeError as e:
                print("note: %s failed: %s" % (name, str(e).strip().splitlines()[-1]))
                failed.add(name)
                continue
            walls[name].append(w)
            rss[name].append(r)
    return [(name, (statistics.median(walls[name]), max(rss[name]))) for name, _ in commands if name not in failed]


#: The measured commands' environment: bytecode caches allowed (as for installed packages).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def ensure_anchors():
    """(py-spy, pystack) of ``bench/.venv-pystack``, installed there on first use."""
    spy, exe = PYSTACK_VENV / "bin" / "py-spy", PYSTACK_VENV / "bin" / "pystack"
    if not (exe.exists() and spy.exists()):
        print("installing py-spy and pystack into %s ..." % PYSTACK_VENV, flush=True)
        if not (PYSTACK_VENV / "bin" / "python").exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(str(PYSTACK_VENV))
        subprocess.run([str(PYSTACK_VENV / "bin" / "python"), "-m", "pip", "install", "-q", "pystack", "py-spy"],
                       check=True, timeout=900)
    return spy, exe


def ensure_pystack() -> Path:
    return ensure_anchors()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", type=Path, default=DEFAULT_PYTHON)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--depth", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--core", type=Path, help="Use this core (of --python running the fixture) instead of making one.")
    args = ap.parse_args()
    pystack = ensure_pystack()
    # The console script next to this interpreter, not a pyenv shim (a shell script that would
    # add ~0.1 s of its own to every run).
    local = Path(sys.executable).with_name("hanganalyze")
    hanganalyze = str(local) if local.exists() else shutil.which("hanganalyze")
    work = Path(tempfile.mkdtemp(prefix="bench-stacks-"))
    try:
        if args.core is not None:
            core = args.core
        else:
            proc = start_hung([args.python, REPO / "tests" / "fixtures" / "py_deep_threads.py",
                               str(args.threads), str(args.depth)], ready="READY", timeout=120, settle=0.5)
            try:
                core = gcore(proc.pid, work)
            finally:
                proc.kill()
        size_mb = core.stat().st_size / 1e6
        gdb = ["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
               "-ex", "file %s" % args.python, "-ex", "core-file %s" % core]
        dump = work / "dump.json"
        commands = []
        first = None
        if hanganalyze:
            cli = [hanganalyze, core, "--exe", args.python, "--format", "json", "-o", work / "report.json"]
            cold = dict(ENV, XDG_CACHE_HOME=str(work / "empty-cache"))
            try:
                first = run_once(cli, env=cold)
                commands.append(("hanganalyze --format json", cli))
            except RuntimeError as e:
                print("note: the hanganalyze CLI failed, measuring gdb + hang-dump only: %s"
                      % str(e).strip().splitlines()[-1])
        else:
            print("note: hanganalyze CLI not on PATH; measuring gdb + hang-dump only")
        commands.append(("gdb -batch + hang-dump", gdb + ["-ex", "source %s" % LOAD_PY, "-ex", "hang-dump %s" % dump]))
        commands.append(("pystack core --native", [pystack, "core", core, args.python, "--native"]))
        commands.append(("gdb thread apply all bt", gdb + ["-ex", "thread apply all bt"]))
        load_before = os.getloadavg()[0]
        rows = measure_all(commands, args.repeat)
        load_after = os.getloadavg()[0]
        snap = json.loads(dump.read_text())
        threads = snap["processes"][0]["threads"]
        py = sum(1 for t in threads for f in t["frames"] if f["kind"] == "python")
        nat = sum(1 for t in threads for f in t["frames"] if f["kind"] == "native")
        merged = sum(1 for t in threads if t.get("merge") == "merged")
        print("core: %.0f MB, %d threads (%d merged), %d Python + %d native frames; Python %s"
              % (size_mb, len(threads), merged, py, nat, snap["processes"][0].get("python", {}).get("version")))
        print("load average (1 min): %.2f before, %.2f after the measured rounds" % (load_before, load_after))
        base = dict(rows)["pystack core --native"][0]
        print("| command | wall s (median of %d) | peak RSS MB | wall / pystack |" % args.repeat)
        print("|---|---|---|---|")
        for name, (wall, rss) in rows:
            print("| %s | %.2f | %.0f | %.2fx |" % (name, wall, rss, wall / base))
        if first is not None:
            print("| hanganalyze, first run (empty signature cache) | %.2f | %.0f | %.2fx |"
                  % (first[0], first[1], first[0] / base))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
