"""Wall time and peak RSS of ``hanganalyze CORE --format json`` against plain
``gdb -batch -ex 'thread apply all bt'`` on the same fixture cores.

Each run happens in a fresh helper process that starts the command, waits for it and reports
``getrusage(RUSAGE_CHILDREN)``: ``ru_maxrss`` is the peak RSS of the largest process of the tree
(hanganalyze's Python or its gdb; plain gdb for the baseline), user+sys the CPU time of the whole
tree (steadier than wall time on a shared machine).  Median (and min wall) of --runs runs.

Cores: the C++ mutex deadlock (3 threads), the Python lock deadlock (3 threads) and a Python
process with --threads waiting threads (the 200-thread case the design aims at).

    python bench/e2e_time.py [--runs 3] [--threads 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers import FIXTURES, fixture_binary, gcore, pyenv_pythons, start_hung  # noqa: E402

#: Runs one command and prints {"wall": s, "maxrss_kib": n, "rc": n}; a fresh process per run
#: so that RUSAGE_CHILDREN covers exactly that command's tree.
_MEASURE = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    t0 = time.perf_counter()
    rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru.ru_utime + ru.ru_stime
    print(json.dumps({"wall": wall, "cpu": cpu, "maxrss_kib": ru.ru_maxrss, "rc": rc}))
    """
)

_MANY_THREADS = textwrap.dedent(
    """
    import sys, threading, time
    threading.stack_size(256 * 1024)  # keeps the core small; the frames are what we measure
    n = int(sys.argv[1])
    stop = threading.Event()
    lock_a, lock_b = threading.Lock(), threading.Lock()
    def idle():
        stop.wait()
    def ab():
        with lock_a:
            time.sleep(0.2)
            with lock_b:
                pass
    def ba():
        with lock_b:
            time.sleep(0.2)
            with lock_a:
                pass
    ts = [threading.Thread(target=idle, name="idle-%d" % i) for i in range(n - 3)]
    ts += [threading.Thread(target=ab, name="ab"), threading.Thread(target=ba, name="ba")]
    for t in ts:
        t.start()
    time.sleep(0.5)
    print("READY", flush=True)
    stop.wait()
    """
)


def measure(cmd) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *map(str, cmd)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def take_core(argv, dest: Path) -> Path:
    h = start_hung(argv, timeout=60, settle=0.5)
    try:
        return gcore(h.pid, dest)
    finally:
        h.kill()


def bench_core(name: str, core: Path, exe: Path, runs: int, hanganalyze: str):
    tools = {
        "hanganalyze --format json": [hanganalyze, core, "--format", "json"],
        "gdb thread apply all bt": [
            "gdb", "-nx", "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
            "-ex", "thread apply all bt", exe, core,
        ],
    }
    rows = {}
    for tool, cmd in tools.items():
        results = [measure(cmd) for _ in range(runs)]
        bad = [r["rc"] for r in results if r["rc"] not in (0, 3)]
        if bad:
            raise SystemExit("%s failed on %s (exit %s)" % (tool, core, bad[0]))
        walls = [r["wall"] for r in results]
        cpu = statistics.median(r["cpu"] for r in results)
        rows[tool] = (statistics.median(walls), min(walls), cpu, max(r["maxrss_kib"] for r in results) / 1024.0)
    base = rows["gdb thread apply all bt"]
    for tool, (med, lo, cpu, rss) in rows.items():
        print(
            "%-22s %-27s %7.3f s %7.3f s %7.3f s %8.1f MiB   x%.2f wall  x%.2f cpu  x%.2f RSS"
            % (name, tool, med, lo, cpu, rss, med / base[0], cpu / base[2], rss / base[3])
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--keep", type=Path, help="keep the cores in this folder")
    args = ap.parse_args()
    hanganalyze = shutil.which("hanganalyze")
    if hanganalyze is None or shutil.which("gdb") is None or shutil.which("gcore") is None:
        print("e2e_time: needs hanganalyze, gdb and gcore on PATH")
        return 1
    py = pyenv_pythons().get("3.11") or Path(sys.executable)
    work = Path(tempfile.mkdtemp(prefix="hanganalyze-bench-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        cxx = fixture_binary("cxx_mutex_deadlock")
        script = work / "many_threads.py"
        script.write_text(_MANY_THREADS)
        cores = [
            ("cxx deadlock (3 thr)", take_core([cxx], work / "cxx"), cxx),
            ("py deadlock (3 thr)", take_core([py, FIXTURES / "py_deadlock.py"], work / "py"), py),
            (
                "py %d threads" % args.threads,
                take_core([py, script, str(args.threads)], work / "many"),
                py,
            ),
        ]
        print("python %s, %d run(s) each; wall median / min, peak RSS of the largest process in the tree"
              % (py, args.runs))
        print("%-22s %-27s %9s %9s %9s %12s" % ("core", "tool", "wall med", "wall min", "cpu med", "peak RSS"))
        for name, core, exe in cores:
            bench_core(name, core, exe, args.runs, hanganalyze)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
