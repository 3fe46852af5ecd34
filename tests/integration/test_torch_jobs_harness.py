"""The job harness itself (tests/jobs.py): every scenario really gets stuck and stays stuck, the
ranks are distinct processes with the right RANK / WORLD_SIZE, gcore works on every rank, and
stop() leaves no process of the job behind (also when starting fails)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import gdb_batch  # noqa: E402
from jobs import (  # noqa: E402
    Job,
    gcore_ranks,
    pid_alive,
    ppid_of,
    proc_environ,
    start_mp_job,
    start_torch_job,
    stuck_problems,
    torch_job_fixture,
)

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture
def require_torch_and_gdb():
    """Never a silent skip: `make install` installs PyTorch (CPU) and .ci/run installs gdb."""
    assert HAS_TORCH, "torch is not installed in this environment: run `make install`"
    assert shutil.which("gdb"), "gdb is not installed"


needs_torch = needs_gdb = pytest.mark.usefixtures("require_torch_and_gdb")

straggler_job = torch_job_fixture("straggler", name="straggler_job")


def check_ranks(job: Job, world: int, ranks) -> None:
    assert sorted(job.rank_pids) == sorted(ranks)
    pids = list(job.rank_pids.values())
    assert len(set(pids)) == len(pids) and job.launcher_pid not in pids
    for rank, pid in job.rank_pids.items():
        env = proc_environ(pid)
        assert (env.get("RANK"), env.get("LOCAL_RANK"), env.get("WORLD_SIZE")) == (str(rank), str(rank), str(world))
        assert env.get("OMP_NUM_THREADS") == "1"
        assert ppid_of(pid) == job.launcher_pid
    assert job.world_size == world
    assert stuck_problems(job, seconds=2.0) == []
    assert "Traceback" not in job.log_tail(100000)


def check_stopped(job: Job) -> None:
    pids = [job.launcher_pid, *job.rank_pids.values()]
    job.stop()
    assert job.alive_pids() == []
    for pid in pids:
        assert not pid_alive(pid) or proc_environ(pid).get("HANG_JOB_TAG") != job.tag
    assert job.proc is not None and job.proc.returncode is not None  # the launcher was reaped
    job.stop()  # idempotent


@needs_torch
def test_straggler_stuck(straggler_job: Job):
    job = straggler_job
    check_ranks(job, 4, [0, 1, 2, 3])
    assert job.exited_ranks == [] and job.bad_rank == 1
    assert sorted(job.markers) == ["rank%d.pid" % r for r in range(4)]
    print("straggler: stuck after %.1f s" % job.startup_s)


@needs_torch
@needs_gdb
def test_straggler_stacks_and_cores(straggler_job: Job, tmp_path: Path):
    job = straggler_job
    out = gdb_batch(["hang-bt"], pid=job.rank_pids[job.bad_rank], timeout=120)
    main = out[out.find('"MainThread"') :].split("\nThread ")[0]  # the bad rank's main thread
    assert "load_next_batch" in main and "train_step" not in main, out[-3000:]
    try:
        cores = gcore_ranks(job, tmp_path / "cores")
        assert sorted(cores) == [0, 1, 2, 3]
        for rank, core in cores.items():
            assert core.name == "core.%d" % job.rank_pids[rank]
            with open(core, "rb") as f:
                head = f.read(18)
            assert head[:4] == b"\x7fELF" and head[16] == 4, core  # ET_CORE
        assert stuck_problems(job, seconds=0.5) == []  # gdb detached: still stuck
    finally:
        for core in (tmp_path / "cores").glob("rank*/core.*"):
            core.unlink()  # ~710 MiB each: not left to pytest's kept tmp folders


@needs_torch
def test_mismatch_stuck(tmp_path: Path):
    with start_torch_job("mismatch", tmp_path, nproc=4, bad_rank=1) as job:
        check_ranks(job, 4, [0, 1, 2, 3])
        assert job.exited_ranks == []
        print("mismatch: stuck after %.1f s" % job.startup_s)
    check_stopped(job)


@needs_torch
def test_exit_stuck(tmp_path: Path):
    with start_torch_job("exit", tmp_path, nproc=4, bad_rank=2) as job:
        check_ranks(job, 4, [0, 1, 3])
        assert job.exited_ranks == [2]
        assert not pid_alive(job.markers["rank2.exited"])
        assert pid_alive(job.launcher_pid)  # torchrun keeps the job running after an exit 0
        print("exit: stuck after %.1f s" % job.startup_s)
    check_stopped(job)


def test_mp_job_stuck(tmp_path: Path):
    job = start_mp_job(tmp_path)
    with pytest.raises(ZeroDivisionError), job:
        assert job.markers["parent.pid"] == job.launcher_pid
        assert sorted(job.rank_pids) == [0, 1, 2] and len(set(job.rank_pids.values())) == 3
        assert job.rank_pids[job.bad_rank] == job.markers["slow_shard.pid"]
        for pid in job.rank_pids.values():
            assert ppid_of(pid) == job.launcher_pid
        assert stuck_problems(job, seconds=2.0) == []
        print("mp: stuck after %.1f s" % job.startup_s)
        raise ZeroDivisionError("a failing test: the context manager still stops the job")
    check_stopped(job)


@needs_torch
def test_start_failure_leaves_nothing(tmp_path: Path):
    with pytest.raises(RuntimeError, match="did not get stuck: timed out") as err:
        start_torch_job("straggler", tmp_path, nproc=2, timeout=1.0)
    assert "launcher log tail" in str(err.value)
    ready = str(tmp_path / "ready")
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    assert [p for p in pids if pid_alive(p) and proc_environ(p).get("HANG_READY_DIR") == ready] == []
