"""What ``hanganalyze watch`` costs a running job (issue 33: goal <= 1% fewer steps/s): a real
distributed training loop (``bench/watch_job.py``, torchrun, gloo on CPU or NCCL on GPUs) run bare,
under the watcher (wrapper mode: ``hanganalyze watch -- torchrun ...``, its output passed through)
and with the watcher attached to it (``hanganalyze watch --job PID``), N repeats, interleaved.

    python bench/bench_watch.py [--repeats 3] [--seconds 20] [--backend gloo|nccl] [--watch-args "--stall 10"]

Each run's steps/s is the job's own count over a fixed window after a warm-up (the watcher is
attached before the window starts); the watcher's CPU seconds and peak RSS come from /proc while it
runs.  Prints one line per run, then per mode the median steps/s, its ratio to the bare median
(``--json FILE`` writes them too), the watcher's CPU share and memory; exit 1 when a healthy run was
captured (a report was written) or a run gave no count.  The NVLink-multicast switches
(NCCL_NVLS_ENABLE=0 ...) are set in every process: the GPU machines' rules.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
JOB = HERE / "watch_job.py"
MODES = ("bare", "wrapper", "job")
#: ``--modes`` may also name ``fr``: the job bare but with the flight-recorder environment wrapper mode sets
#: (TORCH_FR_BUFFER_SIZE ...), no watcher: wrapper's cost less the recorder's is the watcher's own
ALL_MODES = MODES + ("fr",)
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
RESULT = re.compile(r"watch-bench steps=(\d+) seconds=([\d.]+) steps_per_s=([\d.]+) max_gap_ms=([\d.]+)")
#: ``--pause``: one read of the running job in the middle of the window, by the watcher's capture
#: (``hanganalyze --job``, three samples, as a candidate gets) or by ``py-spy dump`` of rank 0
PAUSE_MODES = ("bare", "capture", "pyspy")


def hanganalyze() -> List[str]:
    exe = shutil.which("hanganalyze")
    return [exe] if exe else [sys.executable, "-m", "hanganalyze"]


def proc_usage(pid: int) -> Optional[Tuple[float, int]]:
    """(CPU seconds of all its threads, peak RSS KiB) of a live process; None once it is gone.

    The threads' ``schedstat`` (nanoseconds): ``stat``'s clock ticks (10 ms) are coarser than a
    whole window of polls (~0.4 ms each).  A thread that ended took its time with it (the
    watcher's capture thread, which a healthy run never starts)."""
    cpu_ns = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    cpu_ns += int(f.read().split()[0])
            except (OSError, IndexError, ValueError):
                pass
        with open("/proc/%d/status" % pid) as f:
            hwm = next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
    except (OSError, ValueError):
        return None
    return cpu_ns / 1e9, hwm


def wait_ready(folder: Path, nproc: int, proc: subprocess.Popen, timeout: float = 300.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(folder.glob("rank*.pid"))) >= nproc:
            return True
        time.sleep(0.1)
    return False


def one_run(mode: str, args: argparse.Namespace, work: Path) -> Dict[str, object]:
    """One job, start to end, in ``mode``; its steps/s and the watcher's cost."""
    ready = work / "ready"
    ready.mkdir(parents=True)
    env = dict(os.environ, READY_DIR=str(ready), WATCH_BENCH_BACKEND=args.backend, PYTHONUNBUFFERED="1",
               **NO_MULTICAST)
    if args.size:
        env["WATCH_BENCH_SIZE"] = str(args.size)
    if mode == "fr":  # no watcher: only the flight recorder the wrapper switches on (what it costs by itself)
        from hanganalyze.acquire.watchjob import flight_recorder_env  # here: only this mode needs the package

        env, _ = flight_recorder_env(env, work / "fr")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    job = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % args.nproc,
           str(JOB), str(args.warmup), str(args.seconds)]
    watch = hanganalyze() + ["watch", "-o", str(work / "report.json")] + shlex.split(args.watch_args)
    log = open(work / "out.log", "wb")
    t0 = time.monotonic()
    watcher: Optional[subprocess.Popen] = None
    if mode == "wrapper":
        watcher = proc = subprocess.Popen(watch + ["--"] + job, env=env, stdout=log, stderr=subprocess.STDOUT)
    else:
        proc = subprocess.Popen(job, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    if mode == "job":
        if wait_ready(ready, args.nproc, proc):
            watcher = subprocess.Popen(watch + ["--job", str(proc.pid)], env=env, stdout=log,
                                       stderr=subprocess.STDOUT)
    probe = None
    if mode in ("capture", "pyspy") and wait_ready(ready, args.nproc, proc):
        time.sleep(args.warmup + args.seconds / 2)
        rank0 = int((ready / "rank0.pid").read_text())
        argv = (hanganalyze() + ["--job", str(proc.pid), "-f", "json", "-o", os.devnull] if mode == "capture"
                else [args.py_spy, "dump", "--native", "--pid", str(rank0)])
        s0 = time.monotonic()
        probe = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probe_wall = time.monotonic() - s0
    usage: Optional[Tuple[float, int]] = None
    steady: List[Tuple[float, float]] = []  # (time, watcher CPU s) once its start-up is over
    deadline = t0 + args.warmup + args.seconds + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if watcher is not None:
                usage = proc_usage(watcher.pid) or usage  # the last reading before it ends
                if usage is not None and ready.exists() and time.monotonic() - t0 > args.warmup + 3:
                    steady.append((time.monotonic(), usage[0]))
            time.sleep(0.25)
        if watcher is not None and proc.poll() is not None:  # the watcher sees the job end at its next poll
            try:
                watcher.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for p in (proc, watcher):
            if p is not None and p.poll() is None:
                p.kill()
    rc = proc.wait()
    wrc = watcher.wait(timeout=60) if watcher is not None else None
    wall = time.monotonic() - t0
    log.close()
    text = (work / "out.log").read_text(errors="replace")
    m = RESULT.search(text)
    run: Dict[str, object] = {
        "mode": mode, "rc": rc, "watch_rc": wrc, "wall_s": round(wall, 2),
        "steps": int(m.group(1)) if m else None, "steps_per_s": float(m.group(3)) if m else None,
        "captured": (work / "report.json").exists(), "load": round(os.getloadavg()[0], 2),
        "max_gap_ms": float(m.group(4)) if m else None,
    }
    if probe is not None:
        run["probe_rc"], run["probe_wall_s"] = probe.returncode, round(probe_wall, 3)
    if usage is not None:
        run["watch_cpu_s"], run["watch_peak_rss_mib"] = round(usage[0], 2), round(usage[1] / 1024, 1)
        run["watch_cpu_share"] = round(usage[0] / wall, 4)
    if len(steady) > 8 and steady[-1][0] - steady[0][0] > 5:  # polling only: what a long job pays
        run["watch_steady_cpu_share"] = round((steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0]), 5)
    if m is None:
        run["log_tail"] = text[-1500:]
    return run


def summarize(runs: List[Dict[str, object]]) -> Dict[str, Dict[str, float]]:
    """Per mode: the median steps/s, its ratio to the bare median, the watcher's median CPU and memory."""
    out: Dict[str, Dict[str, float]] = {}
    for mode in ALL_MODES + PAUSE_MODES[1:]:
        rates = [r["steps_per_s"] for r in runs if r["mode"] == mode and r["steps_per_s"] is not None]
        if rates:
            out[mode] = {"median_steps_per_s": round(statistics.median(rates), 2), "runs": len(rates),
                         "min": min(rates), "max": max(rates)}  # type: ignore[dict-item]
            for key in ("max_gap_ms", "probe_wall_s", "watch_cpu_s", "watch_cpu_share", "watch_steady_cpu_share",
                        "watch_peak_rss_mib"):
                vals = [r[key] for r in runs if r["mode"] == mode and key in r]
                if vals:
                    out[mode][key] = statistics.median(vals)  # type: ignore[arg-type]
    bare = out.get("bare", {}).get("median_steps_per_s")
    for mode, s in out.items():
        if bare:
            s["ratio_to_bare"] = round(s["median_steps_per_s"] / bare, 4)
        # paired: each repeat's run against the bare run of the same repeat (the load drifts less
        # within a repeat than over the whole bench)
        pairs = []
        for i in {r["repeat"] for r in runs}:
            mine = [r["steps_per_s"] for r in runs if r["repeat"] == i and r["mode"] == mode]
            base = [r["steps_per_s"] for r in runs if r["repeat"] == i and r["mode"] == "bare"]
            if mine and base and mine[0] and base[0]:
                pairs.append(mine[0] / base[0])  # type: ignore[operator]
        if pairs and mode != "bare":
            s["median_paired_ratio"] = round(statistics.median(pairs), 4)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0, help="the counted window of each run")
    ap.add_argument("--warmup", type=float, default=5.0, help="before the window (the watcher attaches)")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    ap.add_argument("--size", type=int, default=0, help="matmul side (default 256 gloo, 2048 nccl)")
    ap.add_argument("--watch-args", default="", help="options for hanganalyze watch (default: its defaults)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--pause", action="store_true", help="the longest pause of rank 0 under one capture and "
                    "under one py-spy dump (modes %s)" % ",".join(PAUSE_MODES))
    ap.add_argument("--py-spy", default=shutil.which("py-spy") or str(HERE / ".venv-pystack" / "bin" / "py-spy"))
    ap.add_argument("--json", type=Path, help="write the runs and the summary here")
    args = ap.parse_args(argv)
    os.environ.update(NO_MULTICAST)
    try:
        import torch  # noqa: F401 - the job needs it; say so in one line
    except ImportError:
        print("bench_watch: torch is not importable with %s" % sys.executable)
        return 0
    modes = list(PAUSE_MODES) if args.pause else [m for m in args.modes.split(",") if m]
    if "pyspy" in modes and not os.access(args.py_spy, os.X_OK):
        modes.remove("pyspy")
        print("bench_watch: no py-spy (%s): its mode left out" % args.py_spy)
    runs: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        for i in range(args.repeats):
            for k, mode in enumerate(modes[i % len(modes):] + modes[:i % len(modes)]):  # rotated: no mode always first
                run = one_run(mode, args, Path(tmp) / ("%d-%d" % (i, k)))
                run["repeat"] = i
                runs.append(run)
                print(json.dumps(run), flush=True)
    summary = summarize(runs)
    print("%d rank(s) %s, window %.0f s, watch %s, load %.2f" % (
        args.nproc, args.backend, args.seconds, args.watch_args or "(defaults)", os.getloadavg()[0]))
    for mode, s in summary.items():
        print("  %-8s median %8.2f steps/s (%d runs, %.2f-%.2f), longest pause %.0f ms%s%s%s%s" % (
            mode, s["median_steps_per_s"], s["runs"], s["min"], s["max"], s.get("max_gap_ms", float("nan")),
            "  (the read took %.2f s)" % s["probe_wall_s"] if "probe_wall_s" in s else "",
            "  ratio %.4f" % s["ratio_to_bare"] if "ratio_to_bare" in s else "",
            " (paired %.4f)" % s["median_paired_ratio"] if "median_paired_ratio" in s else "",
            "  watcher CPU %.2f s (%.2f%% of a core, %.3f%% once polling), peak RSS %.0f MiB" % (
                s["watch_cpu_s"], 100 * s["watch_cpu_share"], 100 * s.get("watch_steady_cpu_share", float("nan")),
                s["watch_peak_rss_mib"]) if "watch_cpu_s" in s else ""))
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs,
                                         "summary": summary}, indent=1) + "\n")
    bad = [r for r in runs if r["captured"] or r["steps_per_s"] is None]
    if bad:
        print("bench_watch: %d run(s) captured or without a count: %s" % (len(bad), [r["mode"] for r in bad]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
