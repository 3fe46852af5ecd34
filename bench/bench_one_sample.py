"""One sample of one rank against ``pystack remote --native``: the per-rank cost goal (issue 21).

Goal: ``hanganalyze --pid PID --samples 1 -f json -o /dev/null`` costs at most 1.0x
``pystack remote --native PID`` on the same live process, and ``hanganalyze CORE -f json`` at most
1.0x ``pystack core --native CORE`` on its core.  Each is the best of ``--repeat`` wall-clock runs
(a shared machine only ever adds time); "cold" runs each with an empty hanganalyze cache
(``HANGANALYZE_CACHE_DIR``: symbols, line tables, compiled signatures), "warm" with one a first run
filled.  Python's bytecode cache is on in both (``PYTHONPYCACHEPREFIX``; an installed package has
its .pyc files) so the numbers are not the source compilation of a checkout with
``PYTHONDONTWRITEBYTECODE``.

Usage: ``python bench/bench_one_sample.py [--pid PID] [--pystack PATH] [--repeat N] [--no-core]``;
without ``--pid`` it starts ``python -c 'import torch; torch.ones(4); sleep'`` (the current
interpreter's torch) and ends it afterwards; the core is written with ``gcore``.  pystack is not a
dependency: ``python3 -m venv /tmp/pystack-venv && /tmp/pystack-venv/bin/pip install pystack``.
Prints one JSON object: seconds per command and the ratios hanganalyze / pystack.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]


def _env(cache: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "hanganalyze-bench-pyc")
    env["PYTHONPATH"] = "%s:%s" % (ROOT / "analyzer", ROOT / "gdbext")
    env["HANGANALYZE_CACHE_DIR"] = cache
    return env


def _time(cmd: List[str], env: Optional[Dict[str, str]] = None) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    wall = time.perf_counter() - t
    if r.returncode not in (0, 3):  # 3: hanganalyze found something
        raise SystemExit("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.decode()[-500:]))
    return wall


def _best(cmd: List[str], repeat: int, cold: bool) -> float:
    times = []
    warm_dir = tempfile.mkdtemp(prefix="hanganalyze-bench-warm-")
    if not cold:
        _time(cmd, _env(warm_dir))  # fills the cache
    for _ in range(repeat):
        d = tempfile.mkdtemp(prefix="hanganalyze-bench-cold-") if cold else warm_dir
        times.append(_time(cmd, _env(d)))
        if cold:
            shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(warm_dir, ignore_errors=True)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pid", type=int)
    ap.add_argument("--pystack", default=shutil.which("pystack") or "/tmp/pystack-venv/bin/pystack")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-core", action="store_true")
    args = ap.parse_args()
    if not Path(args.pystack).exists():
        raise SystemExit("pystack not found (see the docstring): --pystack PATH")
    child = None
    pid = args.pid
    if pid is None:
        child = subprocess.Popen([sys.executable, "-c", "import torch, time; torch.ones(4); print('R', flush=True); "
                                  "time.sleep(3000)"], stdout=subprocess.PIPE)
        child.stdout.readline()
        pid = child.pid
    ha = [sys.executable, "-m", "hanganalyze"]
    out: Dict[str, object] = {"pid": pid, "repeat": args.repeat}
    try:
        live = ha + ["--pid", str(pid), "--samples", "1", "-f", "json", "-o", "/dev/null"]
        out["pystack_live"] = _best([args.pystack, "remote", "--native", str(pid)], args.repeat, cold=False)
        for mode in ("cold", "warm"):
            out["live_" + mode] = _best(live, args.repeat, cold=mode == "cold")
            out["live_%s_ratio" % mode] = round(out["live_" + mode] / out["pystack_live"], 2)
        if not args.no_core:
            with tempfile.TemporaryDirectory(prefix="hanganalyze-bench-core-") as tmp:
                core = os.path.join(tmp, "core")
                subprocess.run(["gcore", "-o", core, str(pid)], check=True, capture_output=True, timeout=600)
                core = "%s.%d" % (core, pid)
                out["pystack_core"] = _best([args.pystack, "core", "--native", core], args.repeat, cold=False)
                for mode in ("cold", "warm"):
                    out["core_" + mode] = _best(ha + [core, "-f", "json", "-o", "/dev/null"], args.repeat,
                                                cold=mode == "cold")
                    out["core_%s_ratio" % mode] = round(out["core_" + mode] / out["pystack_core"], 2)
    finally:
        if child is not None:
            child.kill()
            child.wait()
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}, indent=1))


if __name__ == "__main__":
    main()
