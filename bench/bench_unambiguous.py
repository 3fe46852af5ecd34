"""``hanganalyze --job`` on a stopped 2-rank job, end to end, against ``pystack remote`` on each rank
(issue 31: an unambiguous hang -- one rank asleep for ever, nothing woke in any sample -- must not
wait for NCCL RAS's 2 s window; goal <= 1.5 s wall on 2 GPU ranks).

The job is ``tests/fixtures/gpu/nccl_job.py straggler 1`` under torchrun: rank 1 sleeps for ever
in ``load_next_batch``, rank 0 waits for it in ``all_reduce``.  ``--backend nccl`` runs it on the
GPUs with NCCL, RAS on (NCCL's own answers).  ``--backend gloo`` runs it on CPU; with ``--ras
replay`` (the default for gloo) each rank also maps a file named like NCCL's library and has
``NCCL_RAS_ADDR`` pointing at the tests' replaying RAS server (``tests/rasserver.py``), which answers
with the stopped job's captured answers (``tests/data/nccl_ras/stuck.query*.json``, their pids made
the ranks'): the RAS path of a live run, without a GPU.

    python bench/bench_unambiguous.py [--backend gloo|nccl] [--ras replay|none] [--repeat 5]
                                      [--pystack PATH] [--pystack-native] [--phases] [--nvml N]

Prints one JSON object: the first run (it fills the caches) and each warm run's wall time, their
median, the verdict of the last run (findings, RAS queries and their window), ``pystack remote``
per rank (median of ``--repeat``, when pystack is there) and the ratio of the median to their sum.
``--phases`` adds one run inside this process with every phase timed (start-up, planning the job,
each read and the /proc counters around it, the sleeps between samples, each RAS query, the wait
for RAS, the NVML read, analysis, rendering).  ``--nvml N`` times what the GPU columns cost (issue 34,
goal <= 0.1 s): ``read_nvml()`` in N fresh interpreters, as each CLI run pays it once, and N ``--job`` runs
with the columns and N without them, interleaved (the read runs beside the samples: its wall cost).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "tests" / "fixtures" / "gpu" / "nccl_job.py"
RAS_DATA = REPO / "tests" / "data" / "nccl_ras"
#: Rank pids in the captured answers (rank 0, rank 1): replaced by the live ranks' pids.
CAPTURED = (673, 674)
#: Runs the fixture with a file named like NCCL's library mapped first (what a rank's maps show).
WRAPPER = """import mmap, runpy, sys
_f = open(sys.argv[1], "rb")
_m = mmap.mmap(_f.fileno(), 0, prot=mmap.PROT_READ)
sys.argv = [sys.argv[2]] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _hanganalyze() -> List[str]:
    exe = shutil.which("hanganalyze")
    return [exe] if exe else [sys.executable, "-m", "hanganalyze"]


def _torchrun() -> List[str]:
    exe = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    return [exe] if Path(exe).exists() else [sys.executable, "-m", "torch.distributed.run"]


class Job:
    """The stopped job: torchrun, its two ranks' pids, the replaying RAS server (gloo)."""

    def __init__(self, backend: str, ras: str, nproc: int, tmp: Path) -> None:
        self.tmp, self.server = tmp, None
        env = dict(os.environ, HANG_READY_DIR=str(tmp), PG_TIMEOUT="900", HANG_DIE_WITH_PARENT="1",
                   HANG_BACKEND=backend)
        argv = [str(JOB), "straggler", "1"]
        if backend == "gloo" and ras == "replay":
            sys.path.insert(0, str(REPO / "tests"))
            from rasserver import RasServer  # the tests' replaying server (a checkout's tests/)

            self.server = RasServer([b""])
            env["NCCL_RAS_ADDR"] = self.server.addr
            lib = tmp / "libnccl.so.2"
            lib.write_bytes(b"\0" * 4096)
            wrapper = tmp / "rank.py"
            wrapper.write_text(WRAPPER)
            argv = [str(wrapper), str(lib)] + argv
        self.log = open(tmp / "job.log", "wb")
        self.proc = subprocess.Popen(_torchrun() + ["--standalone", "--nproc_per_node=%d" % nproc] + argv,
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.ranks = self._wait(nproc, 300.0)
        time.sleep(1.0)  # rank 0 inside its collective, rank 1 asleep
        if self.server is not None:
            texts = [(RAS_DATA / ("stuck.query%d.json" % i)).read_text() for i in (1, 2, 3)]
            for old, new in zip(CAPTURED, self.ranks):
                texts = [t.replace('"pid": %d' % old, '"pid": %d' % new) for t in texts]
            self.server.answers[:] = [t.encode() for t in texts]

    def _wait(self, nproc: int, limit: float) -> List[int]:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            files = [self.tmp / ("rank%d.pid" % r) for r in range(nproc)]
            if all(f.exists() for f in files):
                return [int(f.read_text()) for f in files]
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.close()
        raise SystemExit("the job did not start: see the end of its log:\n" +
                         (self.tmp / "job.log").read_text()[-3000:])

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        self.log.close()
        if self.server is not None:
            self.server.close()


#: Python's bytecode cache, on for every run (an installed wheel has its .pyc files; a checkout
#: under PYTHONDONTWRITEBYTECODE would compile every module at every start: ~0.3 s here).
PYC = os.path.join(tempfile.gettempdir(), "hanganalyze-bench-pyc")


def _env() -> Dict[str, str]:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=PYC)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _timed(argv: List[str], env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    t = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600, env=env or _env())
    return {"wall": time.perf_counter() - t, "rc": r.returncode, "stderr": r.stderr.decode("utf-8", "replace")}


def _verdict(path: Path) -> Dict[str, Any]:
    d = json.loads(path.read_text())
    ras = d.get("nccl_ras") or {}
    ts = [q.get("time_s") for q in ras.get("queries") or []]
    return {"findings": ["%s%s" % (f["signature"], f.get("ranks") or "") for f in d["findings"]
                         if f["severity"] in ("hang", "deadlock")],
            "ras_queries": len(ts), "ras_window_s": round(ts[-1] - ts[0], 3) if len(ts) > 1 and None not in ts
            else None,
            "samples_window_s": max(((p.get("samples") or {}).get("window_s") or 0.0) for p in d["processes"])}


def _phases(launcher: int, out: Path) -> Dict[str, Any]:
    """One run in this process, every phase timed (module doc)."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], timeout=120)
    startup = time.perf_counter() - t  # the interpreter alone; imports_s: the CLI's modules on top
    sys.dont_write_bytecode, sys.pycache_prefix = False, PYC  # the .pyc files the runs above wrote
    t0 = time.perf_counter()
    from hanganalyze import cli, pipeline, render  # noqa: I001 - timed: the CLI's own imports
    from hanganalyze.acquire import engine, nvml, raslive, request, sampling

    imports = time.perf_counter() - t0
    events: List[Dict[str, Any]] = []
    lock = threading.Lock()

    def wrap(owner: Any, name: str, label: str, arg: Optional[Callable[..., str]] = None) -> None:
        fn = getattr(owner, name)

        def timed(*a: Any, **kw: Any) -> Any:
            s = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                with lock:
                    events.append({"phase": label, "at": round(s - start, 3), "s": round(time.perf_counter() - s, 3),
                                   "thread": threading.current_thread().name,
                                   **({"what": arg(*a, **kw)} if arg else {})})

        setattr(owner, name, timed)

    wrap(engine, "from_pid", "read", lambda pid, *_a, **_k: "pid %d" % pid)
    wrap(sampling, "thread_stats", "/proc counters")
    sleep = time.sleep
    wrap(sampling.time, "sleep", "sleep")  # the time module's: only the main thread's sleeps are counted
    wrap(raslive.RasSampler, "_query", "ras query")
    wrap(raslive.RasSampler, "_extend", "ras window wait")
    wrap(raslive.RasSampler, "finish", "ras finish")
    wrap(request, "plan_inputs", "plan (job tree)")
    wrap(request.AcquireRequest, "acquire", "acquire (all samples)")
    wrap(nvml, "read_nvml", "nvml (GPU columns)")  # many.py looks it up at call time: the wrapper is seen
    wrap(pipeline, "analyze", "analysis")
    wrap(render, "render", "render")
    wrap(cli, "write_output", "write")
    start = time.perf_counter()
    rc = cli.run(["--job", str(launcher), "--format", "json", "-o", str(out)])
    wall = time.perf_counter() - start
    time.sleep = sleep
    totals: Dict[str, float] = {}
    for e in events:
        if e["phase"] == "sleep" and e["thread"] != "MainThread":
            continue
        totals[e["phase"]] = round(totals.get(e["phase"], 0.0) + e["s"], 3)
    return {"python_startup_s": round(startup, 3), "imports_s": round(imports, 3), "run_s": round(wall, 3), "rc": rc,
            "totals_s": totals, "events": [e for e in events if e["phase"] != "/proc counters"],
            "verdict": _verdict(out)}


def _pystack(pystack: Optional[str], pids: List[int], repeat: int, native: bool) -> Optional[Dict[str, Any]]:
    """``pystack remote`` (``--native`` too where asked) on each rank in turn: median per rank, and their sum
    (what reading every rank's stacks once takes with it)."""
    if not pystack or not Path(pystack).exists():
        return None
    per = {}
    for pid in pids:
        walls = []
        for _ in range(repeat):
            r = _timed([pystack, "remote"] + (["--native"] if native else []) + [str(pid)])
            if r["rc"] != 0:
                return {"error": "pystack remote %d: rc %d: %s" % (pid, r["rc"], r["stderr"][-300:])}
            walls.append(r["wall"])
        per[str(pid)] = round(statistics.median(walls), 3)
    return {"per_rank_s": per, "sum_s": round(sum(per.values()), 3)}


NVML_PROBE = ("import sys, time; from hanganalyze.acquire.nvml import read_nvml; t = time.perf_counter(); "
              "state, note = read_nvml(); s = time.perf_counter() - t; "
              "print('%.4f %d %s' % (s, len(state.gpus) if state else 0, note or ''))")


def _nvml_cost(repeat: int) -> Dict[str, Any]:
    """What the GPU columns add to a ``--job`` run: ``read_nvml()`` (importing the binding, nvmlInit, every
    GPU's fields and its last 2 s of utilization samples, nvmlShutdown) timed in a fresh interpreter each
    time, as each CLI run pays it once; the rest of the columns is rendering, a few rows of text."""
    walls, gpus, note = [], 0, ""
    for _ in range(repeat):
        r = subprocess.run([sys.executable, "-c", NVML_PROBE], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return {"error": r.stderr.strip().splitlines()[-1:] or ["rc %d" % r.returncode]}
        s, n, *rest = r.stdout.split(" ", 2)
        walls.append(float(s))
        gpus, note = int(n), (rest[0].strip() if rest else "")
    return {"read_nvml_s": [round(w, 4) for w in walls], "median_s": round(statistics.median(walls), 4),
            "max_s": round(max(walls), 4), "gpus": gpus, "note": note or None}


def _nvml_ab(launcher: int, repeat: int, tmp: Path) -> Dict[str, Any]:
    """``--job`` end to end with the GPU columns and without them (a ``pynvml`` that cannot be imported put
    first on the path: the report then says "not read" in one line), the two interleaved: what the columns
    add to the wall time, whatever the read's own cost (it runs beside the stack samples)."""
    shim = tmp / "no-nvml"
    shim.mkdir(exist_ok=True)
    (shim / "pynvml.py").write_text("raise ImportError('hidden by bench_unambiguous --nvml')\n")
    without = _env()
    without["PYTHONPATH"] = str(shim) + os.pathsep + without.get("PYTHONPATH", "")
    walls: Dict[str, List[float]] = {"with": [], "without": []}
    for k in range(repeat):
        for mode in (("with", "without") if k % 2 == 0 else ("without", "with")):
            r = _timed(_hanganalyze() + ["--job", str(launcher), "--format", "json", "-o", str(tmp / "ab.json")],
                       None if mode == "with" else without)
            if r["rc"] not in (0, 3):
                return {"error": "hanganalyze failed (%d): %s" % (r["rc"], r["stderr"][-300:])}
            walls[mode].append(round(r["wall"], 3))
    med = {m: round(statistics.median(w), 3) for m, w in walls.items()}
    return {"walls_s": walls, "median_s": med, "added_s": round(med["with"] - med["without"], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("nccl", "gloo"), default="gloo")
    ap.add_argument("--ras", choices=("replay", "none"), default=None,
                    help="gloo: answer RAS queries from the captured stopped job (default) or have no NCCL")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--pystack", default=shutil.which("pystack") or "/tmp/pystack-venv/bin/pystack")
    ap.add_argument("--pystack-native", action="store_true", help="pystack remote --native (C frames too)")
    ap.add_argument("--phases", action="store_true", help="also one run in this process, each phase timed")
    ap.add_argument("--nvml", type=int, default=0, metavar="N",
                    help="also time read_nvml() (the GPU columns' cost) in N fresh interpreters")
    ap.add_argument("--keep", help="a folder for the job's log and the reports (default: a temporary one)")
    args = ap.parse_args()
    ras = args.ras or ("replay" if args.backend == "gloo" else "none")
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-unambiguous-"))
    tmp.mkdir(parents=True, exist_ok=True)
    job = Job(args.backend, ras, args.nproc, tmp)
    out: Dict[str, Any] = {"backend": args.backend, "ras": ras if args.backend == "gloo" else "nccl",
                           "ranks": job.ranks, "repeat": args.repeat}
    try:
        report = tmp / "job.json"
        walls = []
        for k in range(args.repeat + 1):  # the first fills the caches (.pyc, symbols): the warm runs are timed
            r = _timed(_hanganalyze() + ["--job", str(job.proc.pid), "--format", "json", "-o", str(report)])
            if r["rc"] not in (0, 3):
                raise SystemExit("hanganalyze failed (%d): %s" % (r["rc"], r["stderr"][-1000:]))
            if k:
                walls.append(round(r["wall"], 3))
            else:
                out["first_s"] = round(r["wall"], 3)
        out["walls_s"], out["median_s"] = walls, round(statistics.median(walls), 3)
        out["verdict"] = _verdict(report)
        ps = _pystack(args.pystack, job.ranks, args.repeat, args.pystack_native)
        if ps is not None:
            out["pystack"] = ps
            if "sum_s" in ps:
                out["ratio_to_pystack"] = round(out["median_s"] / ps["sum_s"], 2)
        else:
            out["pystack"] = "not found (--pystack PATH; python3 -m venv v && v/bin/pip install pystack)"
        if args.nvml:
            out["nvml"] = _nvml_cost(args.nvml)
            out["nvml_ab"] = _nvml_ab(job.proc.pid, args.nvml, tmp)
        if args.phases:
            out["phases"] = _phases(job.proc.pid, tmp / "phases.json")
    finally:
        job.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
