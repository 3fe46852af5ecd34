"""A 4,096-rank job: the merged call tree and rank classes, and the whole job analysis + render.

Goal (the ``real`` shape, each measurement, and the whole pipeline of the ``heavy`` shape): <= 5 s
wall and <= 500 MB peak RSS, the JSON <= 50 MB.  The ``heavy`` tree alone is judged on the call
tree's own design target (tree + classes < 2 s); its memory is shown, not judged: 2.4 million
``Frame`` objects alone take about 700 MB.  The pipeline's snapshots are interned as they are made
(``acquire/many.py`` does that with each input as it comes in: equal stacks share one list of
frames), so they hold a few hundred distinct stacks, as a real run does.

The ranks are made from a real 2-rank NCCL straggler (``tests/data/job/``, py-spy --native of
PyTorch 2.11 on H200s): every rank is a copy of rank 0 (``train_step`` -> ``.item()`` ->
``cudaStreamSynchronize``) with its own pid, tids and Frame objects (as 4,096 separate
acquisitions would give), rank 17 is a copy of the straggler (rank 1, ``load_next_batch``), and a
few ranks have other line numbers, so the job has 5 classes:
``0-16,18-99,104-2047,2049-2999,3002-4095`` / ``17`` / ``100-103`` / ``2048`` / ``3000-3001``.

Two shapes:

* ``real``: the captured processes as they are (one thread each, 22 and 4 frames);
* ``heavy``: each rank also has 9 more threads of a PyTorch trainer (NCCL watchdog and heartbeat,
  pin-memory, data-loader and autograd threads: synthetic names, ~60 frames each, the main
  thread padded to ~60 frames with interpreter frames between its Python frames), i.e. the
  4,096 x 10 threads x ~60 frames that ``analyze/calltree.py`` is designed for (2.4 M frames).

Measured: (a) ``calltree.job_view`` (tree + classes) and ``render_tree_lines``; (b) when
``hanganalyze.pipeline.analyze_many`` exists, ``analyze_many`` (merge, matching, job analysis,
bucket) then ``render`` in html, md, json and text.  Each measurement runs in a fresh
subprocess, so its peak RSS (``ru_maxrss``: the snapshots in memory included, as in a real run)
does not carry the previous one's; the RSS before the measured step (the snapshots) is shown too.
Usage: ``python bench/bench_job.py [--ranks N] [--repeat N] [--heavy]`` (``--repeat``: the fastest
of N fresh runs, the largest peak; ``--heavy`` adds the whole pipeline on the heavy shape: about a
minute and several GB today).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "tests" / "data" / "job"
GOAL_S = 5.0
GOAL_MB = 500
JSON_GOAL_MB = 50
TREE_GOAL_S = 2.0
LIBPY = "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
TORCH = "/opt/torch/.venv/lib/python3.12/site-packages/torch/lib/"
#: rank -> (function whose line changes, new line): 3 more classes beside the straggler's
VARIANTS = {100: ("train_step", 10), 101: ("train_step", 10), 102: ("train_step", 10), 103: ("train_step", 10),
            2048: ("<module>", 16), 3000: ("train_step", 11), 3001: ("train_step", 11)}
STRAGGLER = 17


def _real_processes():
    from hanganalyze.acquire.text import parse_text

    return [parse_text((DATA / ("fstrag.rank%d.pyspy.txt" % r)).read_text()).processes[0] for r in (0, 1)]


def _extra_threads(pid: int):
    """9 threads of a PyTorch trainer, ~60 frames each (synthetic names, realistic shapes)."""
    from hanganalyze_gdbext.model import Frame, Thread

    def nat(name, lib, i=0):
        return Frame(kind="native", function=name, library=lib, address=0x7F0000000000 + i * 0x40)

    def native_thread(tid, name, inner):
        frames = [nat("__futex_abstimed_wait_common", LIBC, 1), nat("pthread_cond_timedwait", LIBC, 2)]
        frames += [nat(n, TORCH + "libtorch_cuda.so", 10 + k) for k, n in enumerate(inner)]
        while len(frames) < 57:
            frames.append(nat("c10d::detail::run_in_worker<int>::operator()(int) const", TORCH + "libtorch_cuda.so",
                              100 + len(frames)))
        frames += [nat("execute_native_thread_routine", LIBSTDCXX, 3), nat("start_thread", LIBC, 4),
                   nat("clone3", LIBC, 5)]
        return Thread(tid=tid, name=name, frames=frames)

    def python_thread(tid, name, where):
        frames = [nat("__futex_abstimed_wait_common", LIBC, 1), nat("sem_clockwait", LIBC, 2),
                  nat("PyThread_acquire_lock_timed", LIBPY, 3)]
        k = 0
        while len(frames) < 56:
            frames.append(Frame(kind="python", function="%s_%d" % (where, k), file="/srv/app/%s.py" % where,
                                line=10 + k))
            frames.append(nat("_PyEval_EvalFrameDefault", LIBPY, 20 + k))
            k += 1
        frames += [nat("thread_run", LIBPY, 6), nat("start_thread", LIBC, 4), nat("clone3", LIBC, 5)]
        return Thread(tid=tid, name=name, frames=frames)

    return [
        native_thread(pid + 1, "pt_nccl_watchdg", ["c10d::ProcessGroupNCCL::Watchdog::run",
                                                   "c10d::ProcessGroupNCCL::Watchdog::runLoop"]),
        native_thread(pid + 2, "pt_nccl_heartbt", ["c10d::ProcessGroupNCCL::HeartbeatMonitor::runLoop"]),
        native_thread(pid + 3, "pt_autograd_0", ["torch::autograd::Engine::thread_main"]),
        native_thread(pid + 4, "pt_autograd_1", ["torch::autograd::Engine::thread_main"]),
        native_thread(pid + 5, "cuda-EvtHandlr", ["cuda_event_handler_loop"]),
        python_thread(pid + 6, "pin_memory", "pin_memory"),
        python_thread(pid + 7, "QueueFeederThread", "queues"),
        python_thread(pid + 8, "Thread-1 (_worker_loop)", "dataloader"),
        python_thread(pid + 9, "Thread-2 (_monitor)", "monitor"),
    ]


def synthesise(world: int, heavy: bool, intern: bool = False):
    """One Snapshot per rank, every Frame a new object (as 4,096 acquisitions would give).  With
    ``intern``, each snapshot's threads are interned into one shared ``StackTable`` as soon as it is
    made, as ``acquire/many.py`` does with each input as it comes in (equal stacks share one list
    of frames; the copies are freed)."""
    from dataclasses import replace

    from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread
    from hanganalyze_gdbext.model.stacktable import StackTable, set_table

    table = StackTable()

    base0, base1 = _real_processes()
    snaps = []
    for rank in range(world):
        src = base1 if rank == STRAGGLER else base0
        pid = 200000 + rank * 32
        main = src.threads[0]
        frames = [replace(f) for f in main.frames]
        if rank in VARIANTS:
            func, line = VARIANTS[rank]
            frames = [replace(f, line=line) if f.function == func else f for f in frames]
        if heavy:
            # the depth of a real trainer's main thread: interpreter frames between the Python ones
            py_at = max(i for i, f in enumerate(frames) if f.kind == "python")
            pad = [Frame(kind="native", function=n, library=LIBPY, address=0x7F1000000000 + i)
                   for i, n in enumerate(["_PyEval_EvalFrameDefault", "PyObject_Vectorcall", "_PyFunction_Vectorcall"]
                                         * 12)]
            frames = frames[:py_at] + pad + frames[py_at:]
        threads = [Thread(tid=pid, name=main.name, frames=frames)]
        if heavy:
            threads += _extra_threads(pid)
        proc = Process(source="text", pid=pid, executable=src.executable, argv=src.argv, python=src.python,
                       threads=threads, rank=rank, label="rank%d" % rank)
        snap = Snapshot(processes=[proc])
        if intern:
            for t in proc.threads:
                table.intern(t)
            set_table(snap, table)
        snaps.append(snap)
    return snaps


def _measure_tree(world: int, heavy: bool) -> Dict[str, object]:
    from hanganalyze.analyze import calltree
    from hanganalyze.render.treetext import render_tree_lines

    snaps = synthesise(world, heavy)
    procs = [s.processes[0] for s in snaps]
    keys = calltree.default_keys(procs)
    _input_rss()
    t0 = time.perf_counter()
    tree, classes = calltree.job_view(procs, keys)
    t_view = time.perf_counter() - t0
    lines = render_tree_lines(tree)
    wall = time.perf_counter() - t0
    frames = sum(len(t.frames) for p in procs for t in p.threads)
    return {"wall": wall, "steps": {"job_view": t_view, "render_tree_lines": wall - t_view},
            "info": "%d processes, %d threads, %d frames; %d classes: %s; text tree %d lines, %d chars" % (
                len(procs), sum(len(p.threads) for p in procs), frames, len(classes),
                " / ".join(c["ranks"] for c in classes), len(lines), len("\n".join(lines))),
            "lines": lines}


def _measure_pipeline(world: int, heavy: bool) -> Dict[str, object]:
    from hanganalyze import pipeline
    from hanganalyze.render import render

    snaps = synthesise(world, heavy, intern=True)  # as acquire/many.py interns inputs as they come
    db = pipeline.load_signature_db()
    _input_rss()
    steps: Dict[str, float] = {}
    t0 = time.perf_counter()
    merged = pipeline.analyze_many(snaps, db)
    steps["analyze_many"] = time.perf_counter() - t0
    sizes = []
    json_mb = 0.0
    for fmt in ("html", "md", "json", "text"):
        t = time.perf_counter()
        out = render(merged, fmt)
        steps[fmt] = time.perf_counter() - t
        sizes.append("%s %.0f KiB" % (fmt, len(out.encode("utf-8")) / 1024.0))
        if fmt == "json":
            json_mb = len(out) / 1e6
    wall = time.perf_counter() - t0
    job = merged.job
    return {"wall": wall, "steps": steps, "json_mb": json_mb,
            "info": "%d findings, %d classes, job.tree %s; %s" % (
                len(merged.findings), len(job.classes) if job else 0, "yes" if job and job.tree else "no",
                ", ".join(sizes))}


_INPUT_MB = [0.0]


def _input_rss() -> None:
    """Peak RSS so far: the interpreter, the imports and the synthesised snapshots."""
    _INPUT_MB[0] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


MEASUREMENTS: Dict[str, Callable[[int, bool], Dict[str, object]]] = {
    "tree": _measure_tree,
    "pipeline": _measure_pipeline,
}


def _child(name: str, shape: str, world: int) -> int:
    res = MEASUREMENTS[name](world, shape == "heavy")
    res["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    res["input_mb"] = _INPUT_MB[0]
    print(json.dumps(res))
    return 0


def _has_analyze_many() -> bool:
    try:
        from hanganalyze import pipeline
    except ImportError:
        return False
    return callable(getattr(pipeline, "analyze_many", None))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--heavy", action="store_true", help="also the whole pipeline on the heavy shape")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest is shown")
    ap.add_argument("--measure", nargs=2, metavar=("NAME", "SHAPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        return _child(args.measure[0], args.measure[1], args.ranks)
    print("%d-rank job from a real NCCL straggler; goal (real shape, and the pipeline of both): <= %.0f s, "
          "<= %d MB peak RSS, JSON <= %d MB; heavy shape: tree + classes < %.0f s; load average %.2f" % (
              args.ranks, GOAL_S, GOAL_MB, JSON_GOAL_MB, TREE_GOAL_S, os.getloadavg()[0]))
    plan = [("tree", "real"), ("tree", "heavy")]
    if _has_analyze_many():
        plan += [("pipeline", "real")] + ([("pipeline", "heavy")] if args.heavy else [])
    else:
        print("pipeline: skipped (hanganalyze.pipeline.analyze_many does not exist yet)")
    ok = True
    for name, shape in plan:
        runs = []
        t = time.perf_counter()
        for _ in range(max(args.repeat, 1)):
            out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--ranks", str(args.ranks),
                                  "--measure", name, shape], capture_output=True, text=True)
            if out.returncode != 0 or not out.stdout.strip():
                break
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        total = (time.perf_counter() - t) / max(len(runs), 1)
        if out.returncode != 0 or not out.stdout.strip():
            print("%-8s %-5s FAIL (exit %d)\n%s" % (name, shape, out.returncode, out.stderr[-3000:]))
            ok = False
            continue
        # the fastest run (a shared machine only ever adds time) and the largest peak
        res = min(runs, key=lambda r: r["wall"])
        res["rss_mb"] = max(r["rss_mb"] for r in runs)
        if len(runs) > 1:
            res["steps"]["runs"] = len(runs)
        if shape == "real" or name == "pipeline":
            verdict = "PASS" if res["wall"] <= GOAL_S and res["rss_mb"] <= GOAL_MB else "FAIL"
            if name == "pipeline" and res.get("json_mb", 0.0) > JSON_GOAL_MB:
                verdict = "FAIL"
        elif name == "tree":
            verdict = "PASS" if res["steps"]["job_view"] < TREE_GOAL_S else "FAIL"
        else:
            verdict = "info"
        ok = ok and verdict != "FAIL"
        steps = ", ".join(("%s %.3f s" if isinstance(v, float) else "%s %s") % (k, v) for k, v in res["steps"].items())
        print("%-8s %-5s %6.3f s %7.1f MB peak (%.1f MB before the step)  %s   (%s; subprocess %.1f s with "
              "synthesis)" % (name, shape, res["wall"], res["rss_mb"], res["input_mb"], verdict, steps, total))
        print("               %s" % res["info"])
        for line in res.get("lines") or []:
            print("               | %s" % line)
    print("within goal" if ok else "NOT within goal")
    print("load average after: %.2f" % os.getloadavg()[0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
