"""Makes the samples in this folder with the installed PyTorch (a 2-rank gloo straggler on CPU).

    python tests/data/torch_debug/make_samples.py OUT_DIR      (needs jinja2, tabulate, requests)

Run as a torchrun worker (``RANK`` set) it is the job: every rank starts PyTorch's distributed
debug server (``torch.distributed.debug.start_debug_server``, with ``dump_dir`` and a 1 s
``dump_interval``: rank 0's frontend writes ``stacks_<time>.txt`` and ``fr_trace_<time>.txt``),
then trains; at step 2 rank 1 sleeps in ``load_next_batch`` and rank 0 waits in ``all_reduce``.
Run with OUT_DIR it is the driver: it starts the job, waits for the periodic dumps, asks each
rank's worker server for ``dump_traceback`` and ``fr_trace_json`` (the per-rank endpoints the
frontend itself fetches), saves them as ``rank<R>.dump_traceback.txt`` / ``rank<R>.fr_trace.json``,
and stops the job.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


def worker() -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    out = Path(os.environ["TD_OUT"])
    dist.init_process_group("gloo", timeout=timedelta(seconds=3600))
    import torch.distributed.debug as dd

    dd.start_debug_server(port=int(os.environ["TD_FRONT_PORT"]), dump_dir=str(out / "dump"),
                          dump_interval=1.0, fetch_timeout=10.0)
    (out / ("rank%d.url" % rank)).write_text("http://localhost:%d" % dd._WORKER_SERVER.port)

    def load_next_batch(step: int) -> torch.Tensor:
        if step == 2 and rank == 1:
            while True:  # the data pipeline never delivers
                time.sleep(1000)
        return torch.full((1024,), float(step + 1))

    def train_step(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x)
        return x

    for step in range(5):
        train_step(load_next_batch(step))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def driver(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TD_OUT=str(out), TD_FRONT_PORT=str(free_port()), TORCH_FR_BUFFER_SIZE="2000",
               OMP_NUM_THREADS="1")
    torchrun = str(Path(sys.executable).parent / "torchrun")
    job = subprocess.Popen([torchrun, "--standalone", "--nproc_per_node=2", __file__], env=env,
                           start_new_session=True)
    try:
        time.sleep(12)  # both ranks at step 2, a few periodic dumps written
        for rank in (0, 1):
            base = (out / ("rank%d.url" % rank)).read_text()
            for ep, name in (("dump_traceback", "dump_traceback.txt"), ("fr_trace_json", "fr_trace.json")):
                req = urllib.request.Request("%s/handler/%s" % (base, ep), method="POST")
                data = urllib.request.urlopen(req, timeout=30).read()
                (out / ("rank%d.%s" % (rank, name))).write_bytes(data)
        time.sleep(1.5)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


if __name__ == "__main__":
    if "RANK" in os.environ:
        worker()
    else:
        driver(Path(sys.argv[1]))
