"""Cost of reading asyncio tasks: ``hanganalyze --pid`` (direct engine, one sample) on a process
with N pending tasks (each awaiting an Event: ``tests/fixtures/py_asyncio.py many N``) against the
same program with one task.  Prints wall time and peak RSS of the analyzer, the tasks it found.

    python bench/asyncio_tasks.py [--python EXE] [--tasks 10000] [--repeat 3]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers import FIXTURES, start_hung  # noqa: E402


def measure(pid: int, fmt: str = "json"):
    """(seconds, peak RSS MiB of this analyzer run, report) of one ``hanganalyze --pid``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "hanganalyze", "--pid", str(pid), "--samples", "1",
                          "--format", fmt], capture_output=True, timeout=600, env=dict(os.environ))
    took = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rep = json.loads(res.stdout) if fmt == "json" else res.stdout.decode()
    return took, max(peak, before) / 1024.0, rep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for label, mode in (("1 task", "none"), ("%d tasks" % args.tasks, "many")):
        hung = start_hung([args.python, FIXTURES / "py_asyncio.py", mode, str(args.tasks)], settle=0.5, timeout=120)
        try:
            runs = [measure(hung.pid) for _ in range(args.repeat)]
        finally:
            hung.kill()
        best = min(r[0] for r in runs)
        rep = runs[-1][2]
        loops = (rep["processes"][0].get("asyncio") or {}).get("loops", [])
        found = sum(len(lp["tasks"]) for lp in loops)
        print("%-12s best %.2f s of %d, peak RSS %.0f MiB, tasks read %d, findings %s" % (
            label, best, args.repeat, runs[-1][1], found, sorted({f["signature"] for f in rep["findings"]})))


if __name__ == "__main__":
    main()
