"""The training loop ``bench/bench_watch.py`` measures: a real distributed job that counts its steps.

    torchrun --standalone --nproc_per_node=2 bench/watch_job.py WARMUP SECONDS

Every rank runs steps like a training loop's (a matmul, ``all_reduce`` of its result, ``.item()``:
the host waits for the step, as a loss print does), rank 0 prints ``rank 0 step S`` every 100
steps (a job's log, passed through by the watcher in wrapper mode).  After WARMUP seconds rank 0
starts counting and after SECONDS more every rank stops at the same step (a small ``all_reduce``
every 10 steps decides), rank 0 prints ``watch-bench steps=N seconds=T steps_per_s=X`` and the job
exits 0.  Each rank writes READY_DIR/rank<R>.pid when its group is up (``--job`` mode attaches then).
A thread of each rank wakes every 2 ms; rank 0 prints the longest gap between two wake-ups in the
window (``max_gap_ms``): the longest pause anything imposed on it.

WATCH_BENCH_BACKEND picks the backend: ``gloo`` (CPU, the default) or ``nccl`` (one GPU per local
rank; ranks share the GPUs when there are fewer, each with its own NCCL_HOSTID as in
tests/fixtures/gpu/nccl_job.py).  WATCH_BENCH_SIZE is the matmul's side (256 on CPU, 2048 on GPU).
"""

import os
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def init(rank: int, backend: str) -> str:
    """The process group; the device the steps run on."""
    timeout = timedelta(seconds=600)
    if backend != "nccl":
        torch.set_num_threads(1)
        dist.init_process_group(backend, timeout=timeout)
        return "cpu"
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    ngpu, world = torch.cuda.device_count(), int(os.environ.get("WORLD_SIZE", "1"))
    if 0 < ngpu < world:  # NCCL refuses two ranks of one host on one GPU
        os.environ["NCCL_HOSTID"] = "watch-bench-rank%d" % rank
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
        os.environ.setdefault("NCCL_IB_DISABLE", "1")
    device = "cuda:%d" % (local_rank % max(ngpu, 1))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=torch.device(device), timeout=timeout)
    return device


def mark_ready(rank: int) -> None:
    folder = os.environ.get("READY_DIR")
    if folder:
        tmp = Path(folder) / (".rank%d.tmp" % rank)
        tmp.write_text("%d\n" % os.getpid())
        os.rename(str(tmp), str(Path(folder) / ("rank%d.pid" % rank)))


GAP = {"max": 0.0, "on": False}


def ticker() -> None:
    """Wakes every 2 ms and keeps the longest gap between two wake-ups once counting: a ptrace stop
    of the rank (a capture's sample, a ``py-spy dump``) shows as a gap as long as the stop."""
    last = time.perf_counter()
    while True:
        time.sleep(0.002)
        now = time.perf_counter()
        if GAP["on"]:
            GAP["max"] = max(GAP["max"], now - last)
        last = now


def main() -> int:
    warmup, seconds = float(sys.argv[1]), float(sys.argv[2])
    rank = int(os.environ["RANK"])
    backend = os.environ.get("WATCH_BENCH_BACKEND", "gloo")
    device = init(rank, backend)
    size = int(os.environ.get("WATCH_BENCH_SIZE") or (2048 if backend == "nccl" else 256))
    a = torch.randn(size, size, device=device) / size ** 0.5
    flag = torch.zeros(1, device=device)
    threading.Thread(target=ticker, name="gap-ticker", daemon=True).start()
    mark_ready(rank)
    t0 = time.monotonic()
    counting_at = None
    step = first = 0
    while True:
        y = a @ a
        dist.all_reduce(y)
        y.sum().item()
        step += 1
        if rank == 0 and step % 100 == 0:
            print("rank 0 step %d" % step, flush=True)
        if step % 10:
            continue
        now = time.monotonic()
        if counting_at is None and now - t0 >= warmup:
            counting_at, first = now, step
            GAP["on"] = True
        flag.fill_(1.0 if counting_at is not None and now - counting_at >= seconds else 0.0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # the first rank whose window ended stops all
        if flag.item() > 0:
            break
    if rank == 0:
        took = time.monotonic() - counting_at
        print("watch-bench steps=%d seconds=%.3f steps_per_s=%.3f max_gap_ms=%.1f"
              % (step - first, took, (step - first) / took, 1000 * GAP["max"]), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
