"""Run every benchmark script in bench/ (``make bench``); each prints its own table and ratios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    rc = 0
    for script in sorted(HERE.glob("bench_*.py")) + sorted(HERE.glob("e2e_*.py")):
        print("=== %s" % script.name, flush=True)
        res = subprocess.run([sys.executable, str(script)])
        rc = rc or res.returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
