"""Signature matching speed: 200 signatures against 1,000 threads x 50 frames.

The 34 built-in signatures plus generated ones (exact names, globs, regexes, multi-thread rules,
counting rules, stripped fallbacks) against a process whose threads mix realistic frames (libc
waits, CPython eval frames, c10d/NCCL/TensorFlow names, Python frames) with unique names.  The
process is healthy for most signatures, which is the common case: most of the work is deciding
quickly that a signature does not apply.  Prints load (validate + compile) and match times.

    python bench/bench_match.py [--signatures 200] [--threads 1000] [--frames 50] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

from hanganalyze.analyze.match import match_snapshot
from hanganalyze.analyze.signatures import load_signatures
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread, ThreadState

COMMON = [
    ("___pthread_cond_wait", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("__futex_abstimed_wait_common64", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("__GI___poll", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so.1.0"),
    ("_PyObject_VectorcallTstate", "/usr/lib/libpython3.11.so.1.0"),
    ("take_gil", "/usr/lib/libpython3.11.so.1.0"),
    ("PyEval_RestoreThread", "/usr/lib/libpython3.11.so.1.0"),
    ("c10d::ProcessGroupNCCL::watchdogHandler", "/x/torch/lib/libtorch_cuda.so"),
    ("c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() const", "/x/torch/lib/libtorch_cuda.so"),
    ("at::native::_local_scalar_dense_cuda(at::Tensor const&)", "/x/torch/lib/libtorch_cuda.so"),
    ("cudaStreamSynchronize", "/x/libcudart.so.12"),
    (None, "/lib/x86_64-linux-gnu/libcuda.so.1"),
    ("tensorflow::DirectSession::Run", "/x/libtensorflow_framework.so.2"),
    ("std::thread::_State_impl<...>::_M_run", "/x/libstdc++.so.6"),
    ("start_thread", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("clone3", "/lib/x86_64-linux-gnu/libc.so.6"),
]

GEN = """\
  - id: gen-{i}
    title: Generated signature {i}
    severity: hang
    cause: A generated signature for the matching benchmark.
    fix: [{{kind: debug, text: Nothing to fix.}}]
    references: [https://example.org/gen/{i}]
    match:
      any:
        - threads:
            - rule: a
              stack:
                - {{function: 're:^_*(pthread_cond_wait|futex_\\w+)$', within: 6,
                   stripped: {{function: "??", library: "libc.so*"}}}}
                - {{function: "gen_ns{i}::Worker::wait*", gap: 8}}
                - {{function: gen_entry_{i}}}
            - rule: b
              stack: [{{function: ["gen_other_{i}", "gen_alt_{i}"]}}]
        - thread_count: {{min: 2}}
          threads:
            - rule: c
              min: 2
              stack:
                - {{function: "gen_{i}_*", kind: native}}
                - {{function: run_{i}, kind: python, file: "*/gen_{i}.py"}}
            - rule: idle
              max: 0
              stack: [{{function: 're:^Eigen::.*WaitForWork$'}}]
"""


def make_signatures(folder: Path, n: int) -> None:
    body = "".join(GEN.format(i=i) for i in range(n))
    (folder / "generated.yaml").write_text("signatures:\n" + body)


def make_snapshot(threads: int, frames: int, rng: random.Random) -> Snapshot:
    ts = []
    for t in range(threads):
        fs = []
        for k in range(frames):
            r = rng.random()
            if r < 0.5:
                fn, lib = COMMON[rng.randrange(len(COMMON))]
                fs.append(Frame(kind="native", function=fn, library=lib))
            elif r < 0.7:
                fs.append(Frame(kind="python", function="Module%d.step_%d" % (t % 37, k),
                                file="/app/pkg/mod%d.py" % (k % 13), line=k))
            else:  # unique C++ names with parameter lists: the normalizer's worst case
                fs.append(Frame(kind="native", function="app::ns%d::Class%d::method_%d(int, std::string const&)"
                                % (t, k, rng.randrange(1000)), library="/app/libapp.so"))
        ts.append(Thread(tid=1000 + t, name="worker-%d" % t, frames=fs, state=ThreadState(gil="no")))
    return Snapshot(processes=[Process(source="core", threads=ts)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--signatures", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(42)
    with tempfile.TemporaryDirectory() as tmp:
        builtin = len(load_signatures().signatures)
        make_signatures(Path(tmp), max(0, args.signatures - builtin))
        t0 = time.perf_counter()
        db = load_signatures([Path(tmp)])
        load_s = time.perf_counter() - t0
    snap = make_snapshot(args.threads, args.frames, rng)
    times = []
    found = []
    for _ in range(args.repeat):
        s = Snapshot.from_dict(snap.to_dict())  # fresh objects: no cache carried over
        t0 = time.perf_counter()
        found = match_snapshot(s, db)
        times.append(time.perf_counter() - t0)
    print(textwrap.dedent("""\
        signatures        %d (%d built-in)
        threads x frames  %d x %d = %d frames
        load+validate     %.3f s
        match (median)    %.3f s   (min %.3f, max %.3f over %d runs)
        findings          %d""") % (
        len(db.signatures), builtin, args.threads, args.frames, args.threads * args.frames, load_s,
        statistics.median(times), min(times), max(times), len(times), len(found)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
