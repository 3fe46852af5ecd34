"""Fixture: a real distributed PyTorch job on GPUs (NCCL) that really hangs.

    HANG_READY_DIR=DIR PG_TIMEOUT=90 torchrun --standalone --nproc_per_node=2 \
        tests/fixtures/gpu/nccl_job.py SCENARIO BAD_RANK

The GPU twin of tests/fixtures/torch_job.py (gloo on CPU), run by scripts/gpu_job_capture.sh on a
machine with one GPU per rank; its reports are kept in tests/data/gpu_job/ and re-checked in CI by
tests/unit/test_gpu_job_reports.py (no GPU needed there).

Every rank runs a small train loop (``load_next_batch`` -> ``train_step``: ``dist.all_reduce(x)``
then ``x.sum().item()``); at step HANG_STEP (2) the scenario breaks rank BAD_RANK:

- ``straggler``: rank BAD_RANK calls ``load_next_batch``, which sleeps forever.  The others enqueue
  ``all_reduce`` (collective #3; NCCL queues it on the GPU and returns at once) and then block in
  the device sync of ``.item()`` until the process-group timeout.
- ``mismatch``: rank BAD_RANK calls ``sync_params`` -> ``dist.broadcast(x, src=0)`` then
  ``.item()``, the others ``train_step`` -> ``all_reduce`` then ``.item()``: both collectives are
  #3 but NCCL does not check that the ops match, so each rank blocks in its own ``.item()``.

Just before the call that blocks, each rank writes DIR/rank<R>.pid (its pid); files appear
atomically (rename).  If a collective of step HANG_STEP completes after all (it should not), the
rank writes DIR/rank<R>.returned and raises, so the capture script sees it.

The process group's timeout is PG_TIMEOUT seconds (90 by default): long enough for the analysis,
short enough that the NCCL watchdog then times out and, with TORCH_NCCL_DUMP_ON_TIMEOUT=1, every
rank writes its flight-recorder dump.

With HANG_DIE_WITH_PARENT=1 each rank asks the kernel for SIGKILL when its parent (the torchrun
agent) dies.  On a machine with fewer GPUs than ranks, the ranks share the GPUs and each one sets
its own NCCL_HOSTID (NCCL refuses two ranks of one host on one GPU), so NCCL connects them with
its socket transport instead of NVLink; the host side (what hanganalyze reads) is the same.
HANG_BACKEND=gloo runs the same program on CPU with gloo: only for a dry run of the
capture script on a machine with no GPU.
"""

import os
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore", message=".*Failed to initialize NumPy.*")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

HANG_STEP = 2
STEPS = 5
SCENARIOS = ("straggler", "mismatch")
BACKEND = os.environ.get("HANG_BACKEND", "nccl")
DEVICE = "cpu"


def die_with_parent() -> None:
    if os.environ.get("HANG_DIE_WITH_PARENT") != "1":
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent died before prctl
        os._exit(1)


def mark(rank: int, suffix: str) -> None:
    ready_dir = Path(os.environ["HANG_READY_DIR"])
    name = "rank%d.%s" % (rank, suffix)
    tmp = ready_dir / (".%s.tmp" % name)
    tmp.write_text("%d\n" % os.getpid())
    os.rename(str(tmp), str(ready_dir / name))


def load_next_batch(step: int, rank: int, stall: bool = False) -> torch.Tensor:
    if stall:
        mark(rank, "pid")
        while True:  # the data pipeline never delivers
            time.sleep(1000)
    return torch.full((1024,), float(step + 1), device=DEVICE)


def train_step(x: torch.Tensor) -> float:
    dist.all_reduce(x)
    return x.sum().item()  # NCCL: the host blocks here, in the device sync, until the collective completes


def sync_params(x: torch.Tensor) -> float:
    dist.broadcast(x, src=0)
    return x.sum().item()


def train(scenario: str, rank: int, bad_rank: int) -> None:
    for step in range(STEPS):
        hang = step == HANG_STEP
        bad = hang and rank == bad_rank
        x = load_next_batch(step, rank, stall=bad and scenario == "straggler")
        if hang:
            mark(rank, "pid")
        if bad and scenario == "mismatch":
            total = sync_params(x)
        else:
            total = train_step(x)
        if hang:
            mark(rank, "returned")
            raise RuntimeError("rank %d: the collective of step %d completed (sum %s); it should block"
                               % (rank, step, total))
        print("rank %d step %d sum %s" % (rank, step, total), flush=True)


def main() -> int:
    global DEVICE
    if len(sys.argv) != 3 or sys.argv[1] not in SCENARIOS:
        print("usage: nccl_job.py {%s} BAD_RANK" % "|".join(SCENARIOS), file=sys.stderr)
        return 2
    scenario, bad_rank = sys.argv[1], int(sys.argv[2])
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    die_with_parent()
    timeout = timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "90")))
    if BACKEND == "nccl":
        ngpu, world = torch.cuda.device_count(), int(os.environ.get("WORLD_SIZE", "1"))
        if 0 < ngpu < world:
            # Fewer GPUs than ranks (a 1-GPU machine): NCCL refuses two ranks of one host on one GPU
            # ("Duplicate GPU detected"), so each rank claims a host of its own and NCCL connects
            # them through its socket transport over the loopback interface.
            os.environ["NCCL_HOSTID"] = "nccl-job-rank%d" % rank
            os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
            os.environ.setdefault("NCCL_IB_DISABLE", "1")
            print("rank %d: %d GPU(s) for %d ranks: NCCL_HOSTID=%s, socket transport"
                  % (rank, ngpu, world, os.environ["NCCL_HOSTID"]), flush=True)
        torch.cuda.set_device(local_rank % max(ngpu, 1))
        DEVICE = "cuda:%d" % (local_rank % max(ngpu, 1))
        dist.init_process_group("nccl", device_id=torch.device(DEVICE), timeout=timeout)
    else:
        torch.set_num_threads(1)
        dist.init_process_group(BACKEND, timeout=timeout)
    train(scenario, rank, bad_rank)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
