"""Render a 1,000-thread snapshot in every format; print time and size (targets: < 2 s, HTML < 5 MB).

Two shapes: a realistic trainer (a few hundred identical pool workers, data loaders that differ by
a line, a hundred unique stacks) and the worst case (every one of 1,000 stacks unique, 40 frames
each, so grouping cannot help).  Each snapshot goes through ``bucket_id`` and ``render`` exactly
as the CLI does (grouping and the view are rebuilt per format, as in a real run).
"""

from __future__ import annotations

import sys
import time
from typing import Callable, List

from hanganalyze.analyze.bucket import bucket_id
from hanganalyze.analyze.redact import redact
from hanganalyze.render import render
from hanganalyze_gdbext.model import Evidence, Finding, Frame, Process, PythonFacts, Snapshot, Thread

TARGET_S = 2.0
TARGET_HTML = 5 * 1024 * 1024
LIBPY = "/usr/lib/libpython3.11.so.1.0"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def native(name: str, lib: str, n: int) -> Frame:
    return Frame(kind="native", function=name, library=lib, address=0x7F0000000000 + n * 0x40)


def python_frame(name: str, file: str, line: int) -> Frame:
    return Frame(kind="python", function=name, file=file, line=line)


def stack(variant: int, unique: bool, depth: int = 40) -> List[Frame]:
    frames = [native("__futex_abstimed_wait_common", LIBC, 1), native("pthread_cond_wait", LIBC, 2)]
    k = 0
    while len(frames) < depth - 2:
        tag = "%d_%d" % (variant, k) if unique else str(k % 7)
        line = 10 + k + (variant if unique else 0)
        frames.append(python_frame("step_" + tag, "/srv/app/pkg/module_%s.py" % tag, line))
        frames.append(native("_PyEval_EvalFrameDefault", LIBPY, 100 + k))
        k += 1
    frames += [native("start_thread", LIBC, 3), native("clone3", LIBC, 4)]
    return frames


def trainer(n: int = 1000) -> Snapshot:
    threads = []
    for i in range(n):
        if i < 600:
            frames = stack(0, False)  # identical pool workers
        elif i < 900:
            frames = stack(i % 30, False)
            frames[2] = python_frame("fetch", "/srv/app/data/loader.py", 100 + i % 30)  # 30 loader variants
        else:
            frames = stack(i, True)  # unique
        threads.append(Thread(tid=1000 + i, name="t%d" % i, frames=frames))
    return _snapshot(threads)


def worst_case(n: int = 1000) -> Snapshot:
    return _snapshot([Thread(tid=1000 + i, name="worker-%d" % i, frames=stack(i, True)) for i in range(n)])


def _snapshot(threads: List[Thread]) -> Snapshot:
    threads[0].current = True
    p = Process(source="core", pid=1000, executable="/usr/bin/python3.11", argv=["python", "train.py"],
                signal="SIGABRT", python=PythonFacts(version="3.11.7"), threads=threads)
    f = Finding(signature="bench", title="bench finding", severity="hang", process=0, threads=[1950],
                fix=["do the thing"], evidence=[Evidence(thread=1950, frame=3, rule="frame", text="x")])
    return Snapshot(processes=[p], findings=[f])


def measure(name: str, make: Callable[[], Snapshot]) -> bool:
    snap = make()
    ok = True
    t0 = time.perf_counter()
    snap.bucket = bucket_id(snap)
    t_bucket = time.perf_counter() - t0
    print("%-10s bucket_id %.3f s (%s)" % (name, t_bucket, snap.bucket))
    t0 = time.perf_counter()
    redact(snap)
    print("%-10s redact    %.3f s" % (name, time.perf_counter() - t0))
    for fmt in ("html", "md", "text", "json"):
        t0 = time.perf_counter()
        out = render(snap, fmt)
        dt = time.perf_counter() - t0
        size = len(out.encode("utf-8"))
        flag = ""
        if dt >= TARGET_S or (fmt == "html" and size >= TARGET_HTML):
            flag = "  OVER TARGET"
            ok = False
        print("%-10s %-5s %6.3f s %9.1f KiB%s" % (name, fmt, dt, size / 1024.0, flag))
    return ok


def main() -> int:
    print("1,000-thread snapshots; targets: each format < %.1f s, HTML < %d MiB" % (TARGET_S, TARGET_HTML >> 20))
    ok = measure("trainer", trainer)
    ok = measure("worst", worst_case) and ok
    print("within targets" if ok else "NOT within targets")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
