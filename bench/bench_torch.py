"""Real PyTorch processes: hanganalyze against py-spy and pystack on one rank of a stuck job.

Starts a 2-rank ``torchrun`` job (gloo, CPU; ``tests/fixtures/torch_job.py``, rank 1 a straggler,
so rank 0 waits in ``all_reduce`` with libtorch's 1 GB of libraries mapped), then measures, on
rank 0, live and from a gcore'd core of it, round-robin (A B C A B C ...):

  * ``hanganalyze --pid`` / ``hanganalyze CORE`` (the default engine: the direct reader)
  * the same with ``--engine gdb`` (what 0.1 did: gdb + gdbext)
  * ``py-spy dump --native --pid`` / ``py-spy dump --native --core``
  * ``pystack remote --native`` / ``pystack core --native``

wall time (median) and peak RSS (largest process of the tree), each with its ratio to py-spy and
pystack.  hanganalyze runs once first with an empty cache (its per-build-id symbol order is
computed then; reported as "first run").  py-spy and pystack are installed into
``bench/.venv-pystack``, never dependencies.  ``python bench/bench_torch.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(HERE))

from bench_stacks import ENV, ensure_anchors, measure_all, run_once  # noqa: E402
from jobs import gcore_ranks, start_torch_job  # noqa: E402


def _table(title: str, rows, first, spy: str, pst: str, spy_fallback=None) -> None:
    d = dict(rows)
    if spy not in d and spy_fallback is not None:
        # py-spy reads no core of a shared-libpython process ("failed to get python version"):
        # the core is compared with py-spy on the live process it was taken from
        spy, d[spy_fallback[0]] = spy_fallback
        print("\n(%s failed; the py-spy column compares with %s)" % (title, spy_fallback[0]))
    print("\n%s" % title)
    print("| command | wall s (median) | peak RSS MiB | wall / py-spy | wall / pystack |")
    print("|---|---|---|---|---|")
    for name, (wall, rss) in list(rows) + ([("hanganalyze, first run (empty cache)", first)] if first else []):
        r1 = "%.2fx" % (wall / d[spy][0]) if spy in d else "-"
        r2 = "%.2fx" % (wall / d[pst][0]) if pst in d else "-"
        print("| %s | %.2f | %.0f | %s | %s |" % (name, wall, rss, r1, r2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gdb", action="store_true", help="Leave out the --engine gdb rows (slow).")
    args = ap.parse_args()
    pyspy, pystack = ensure_anchors()
    local = Path(sys.executable).with_name("hanganalyze")
    ha = str(local) if local.exists() else shutil.which("hanganalyze")
    work = Path(tempfile.mkdtemp(prefix="bench-torch-"))
    job = start_torch_job("straggler", work / "job", nproc=2, bad_rank=1)
    try:
        pid = job.rank_pids[0]
        core = gcore_ranks(job, work / "cores", verbose=False)[0]
        exe = os.readlink("/proc/%d/exe" % pid)
        cold = dict(ENV, XDG_CACHE_HOME=str(work / "empty-cache"))
        # one read, as the tools it is compared with take; the default (three samples over about a
        # second, to tell stuck from slow) is its own row
        live = [("hanganalyze --pid --samples 1", [ha, "--pid", pid, "--samples", "1", "-f", "json", "-o",
                                                   work / "live.json"]),
                ("hanganalyze --pid (3 samples)", [ha, "--pid", pid, "-f", "json", "-o", work / "live3.json"])]
        if not args.no_gdb:
            live.append(("hanganalyze --engine gdb --pid",
                         [ha, "--engine", "gdb", "--pid", pid, "-f", "json", "-o", work / "live-gdb.json"]))
        live += [("py-spy dump --native --pid", [pyspy, "dump", "--native", "--pid", pid]),
                 ("pystack remote --native", [pystack, "remote", "--native", pid])]
        first_live = run_once(live[0][1], env=cold)
        rows_live = measure_all(live, args.repeat)
        cores = [("hanganalyze CORE", [ha, core, "-f", "json", "-o", work / "core.json"])]
        if not args.no_gdb:
            cores.append(("hanganalyze --engine gdb CORE",
                          [ha, "--engine", "gdb", core, "-f", "json", "-o", work / "core-gdb.json"]))
        cores += [("py-spy dump --native --core", [pyspy, "dump", "--native", "--core", core]),
                  ("pystack core --native", [pystack, "core", core, exe, "--native"])]
        first_core = run_once(cores[0][1], env=dict(ENV, XDG_CACHE_HOME=str(work / "empty-cache-2")))
        rows_core = measure_all(cores, args.repeat)
        print("rank 0 of a 2-rank gloo job (PyTorch %s), %d CPUs, load %.2f; core %.0f MB"
              % (_torch_version(), os.cpu_count() or 0, os.getloadavg()[0], core.stat().st_size / 1e6))
        _table("live (--pid)", rows_live, first_live, "py-spy dump --native --pid", "pystack remote --native")
        live_spy = dict(rows_live).get("py-spy dump --native --pid")
        _table("core", rows_core, first_core, "py-spy dump --native --core", "pystack core --native",
               ("py-spy dump --native --pid", live_spy) if live_spy else None)
    finally:
        job.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _torch_version() -> str:
    try:
        import torch

        return torch.__version__
    except ImportError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
