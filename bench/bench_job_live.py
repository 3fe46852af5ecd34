"""``hanganalyze --job`` on a real 4-rank torchrun job (gloo, CPU) against running hanganalyze once
per rank, on the same stuck job: wall time and peak RSS (of the whole process tree, summed,
sampled every 50 ms: gdbs that run at once add up).

    python bench/bench_job_live.py [--runs 3] [--nproc 4]

Prints a table and the ratio ``--job`` / sum of per-rank runs (wall) and the peak RSS of each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from jobs import start_torch_job  # noqa: E402


def _hanganalyze() -> List[str]:
    exe = shutil.which("hanganalyze")
    return [exe] if exe else [sys.executable, "-m", "hanganalyze"]


def _tree_rss_kib(root: int) -> int:
    """Resident memory of ``root`` and all its descendants now (hanganalyze and its gdbs)."""
    from hanganalyze.acquire.jobtree import descendants

    total = 0
    for pid in [root] + descendants(root):
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return total


def timed(argv: List[str]) -> Tuple[float, float, int]:
    """(wall s, peak RSS MiB of the whole process tree summed: gdbs running at once add up, exit code).

    ``wait4``'s ru_maxrss is the largest single process only; the tree is sampled every 50 ms."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while p.poll() is None:
        peak = max(peak, _tree_rss_kib(p.pid))
        time.sleep(0.05)
    wall = time.monotonic() - t0
    return wall, peak / 1024.0, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nproc", type=int, default=4)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-job-"))
    job = start_torch_job("straggler", tmp, nproc=args.nproc, bad_rank=1)
    rows = []
    try:
        for _ in range(args.runs):
            wall, rss, rc = timed(_hanganalyze() + ["--job", str(job.launcher_pid), "--format", "json",
                                                    "-o", str(tmp / "job.json")])
            assert rc == 3, rc
            per_wall, per_rss = 0.0, 0.0
            for pid in job.rank_pids.values():
                w, r, rc = timed(_hanganalyze() + ["--pid", str(pid), "--format", "json", "-o", str(tmp / "one.json")])
                assert rc in (0, 3), rc
                per_wall += w
                per_rss = max(per_rss, r)
            rows.append((wall, rss, per_wall, per_rss))
            print("run: --job %.1f s %.0f MiB | %d x --pid %.1f s (sum) %.0f MiB (max)"
                  % (wall, rss, len(job.rank_pids), per_wall, per_rss), flush=True)
    finally:
        job.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    med = [statistics.median(col) for col in zip(*rows)]
    print()
    print("| %d-rank torchrun job (gloo, CPU), median of %d | wall | peak RSS |" % (args.nproc, len(rows)))
    print("|---|---|---|")
    print("| `hanganalyze --job` (one report, ranks in a pool of %d) | %.1f s | %.0f MiB |"
          % (min(os.cpu_count() or 1, args.nproc), med[0], med[1]))
    print("| `hanganalyze --pid` once per rank, one after another (sum of walls; largest peak) | %.1f s | %.0f MiB |"
          % (med[2], med[3]))
    print("ratio --job / per-rank runs: wall %.2fx" % (med[0] / med[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
