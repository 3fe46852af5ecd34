"""Real multi-process jobs that really hang, for the job-view tests: start, wait until stuck, core, stop.

    job = start_torch_job("straggler", tmp_path, nproc=4, bad_rank=1)   # torchrun + gloo on CPU
    with job:                                    # or job.stop() in a finaliser; stop() is idempotent
        cores = gcore_ranks(job, tmp_path / "cores")            # {rank: Path}
        ... hanganalyze --job job.launcher_pid / --pid job.rank_pids[r] / cores ...

    straggler_job = torch_job_fixture("straggler", name="straggler_job")   # a module-scoped fixture

Scenarios (tests/fixtures/torch_job.py says what gloo does in each): "straggler" (BAD_RANK sleeps in
load_next_batch, the others wait in all_reduce), "mismatch" (BAD_RANK in broadcast, the others in
all_reduce), "exit" (BAD_RANK exits 0 before init_process_group, the others wait in it).
start_mp_job() starts tests/fixtures/mp_job.py: a multiprocessing Pool whose worker never answers.

Every process of a job carries HANG_JOB_TAG=<uuid> in its environment; stop() kills the launcher's
process group (torchrun puts each rank in its own session, so that is not enough) and then every
process with the tag, and checks that none is left.  As a safety net for a test run that is killed,
ranks and pool workers die with their parent (PR_SET_PDEATHSIG, HANG_DIE_WITH_PARENT=1) and the
launcher dies with the test process (when started from the main thread); jobs still running at
interpreter exit are stopped (atexit).

Imported as `jobs` (tests/conftest.py puts tests/ on sys.path, like `helpers`) or as `tests.jobs`.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

try:
    from helpers import FIXTURES, REPO, gcore
except ImportError:  # imported as tests.jobs
    from tests.helpers import FIXTURES, REPO, gcore

TORCH_JOB = FIXTURES / "torch_job.py"
MP_JOB = FIXTURES / "mp_job.py"
TORCH_SCENARIOS = ("straggler", "mismatch", "exit")
TAG_VAR = "HANG_JOB_TAG"
START_TIMEOUT = 180.0  # 4 ranks import torch in ~5 s on 2 idle cores; leave room for a loaded CI box
STUCK_WINDOW = 0.5  # a blocked main thread must stay in state S, without using CPU, this long
SETTLE = 0.3

_LIVE: Dict[str, Job] = {}


def _venv_bin(name: str) -> str:
    """`name` next to the running interpreter (the venv's torchrun), else from PATH."""
    cand = Path(sys.executable).parent / name
    return str(cand) if cand.exists() else name


# ---------------------------------------------------------------------------------------------- /proc


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_environ(pid: int) -> Dict[str, str]:
    """The environment a process was started with ({} if it is gone or unreadable)."""
    data = _read("/proc/%d/environ" % pid)
    env: Dict[str, str] = {}
    for item in (data or b"").split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


def _stat_fields(path: str) -> Optional[List[str]]:
    """Fields of a /proc stat file from the state on (index 0 = state, 1 = ppid, 11/12 = utime/stime)."""
    data = _read(path)
    if not data:
        return None
    return data[data.rfind(b")") + 2 :].decode().split()


def thread_state(pid: int, tid: Optional[int] = None) -> Optional[str]:
    """One-letter state of a thread (main thread by default), None if it is gone."""
    f = _stat_fields("/proc/%d/task/%d/stat" % (pid, pid if tid is None else tid))
    return f[0] if f else None


def _main_thread_sample(pid: int):
    """(state, utime + stime) of the main thread, or None if the process is gone."""
    f = _stat_fields("/proc/%d/task/%d/stat" % (pid, pid))
    return (f[0], int(f[11]) + int(f[12])) if f else None


def ppid_of(pid: int) -> Optional[int]:
    f = _stat_fields("/proc/%d/stat" % pid)
    return int(f[1]) if f else None


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    f = _stat_fields("/proc/%d/stat" % pid)
    return bool(f) and f[0] not in ("Z", "X")


def rss_kb(pid: int) -> Optional[int]:
    for line in (_read("/proc/%d/status" % pid) or b"").decode().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def tagged_pids(tag: str) -> List[int]:
    """Every live (non-zombie) process whose environment carries HANG_JOB_TAG=tag."""
    needle = ("%s=%s" % (TAG_VAR, tag)).encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        data = _read("/proc/%s/environ" % name)
        if data and needle in data + b"\0" and pid_alive(int(name)):
            found.append(int(name))
    return sorted(found)


# ------------------------------------------------------------------------------------------------ Job


@dataclass
class Job:
    """A running job.  rank_pids: rank -> pid of the live ranks (for the mp job: pool worker index ->
    pid); exited_ranks: ranks that exited on purpose (scenario "exit"); bad_rank: the rank the
    scenario breaks (mp job: the worker stuck in slow_shard); markers: ready-marker name -> pid."""

    kind: str  # "torch" | "mp"
    scenario: str  # torch scenario, or "slow_shard" for the mp job
    launcher_pid: int  # torchrun, or the mp parent
    rank_pids: Dict[int, int]
    exited_ranks: List[int]
    world_size: int
    bad_rank: int
    ready_dir: Path
    log_path: Path
    tag: str
    markers: Dict[str, int] = field(default_factory=dict)
    startup_s: float = 0.0
    proc: Optional[subprocess.Popen] = field(default=None, repr=False)

    @property
    def live_rank_pids(self) -> Dict[int, int]:
        return {r: p for r, p in self.rank_pids.items() if pid_alive(p)}

    def alive_pids(self) -> List[int]:
        """Every live process of this job (launcher, ranks, pool workers, helpers), by tag."""
        return tagged_pids(self.tag)

    def log_tail(self, n: int = 4000) -> str:
        data = _read(str(self.log_path)) or b""
        return data[-n:].decode("utf-8", "replace")

    def stop(self, timeout: float = 20.0) -> None:
        """SIGKILL every process of the job, reap the launcher, and check that nothing is left.
        Idempotent; raises RuntimeError if some process survives `timeout` seconds."""
        # The launcher's group first (it cannot restart ranks then); only while the launcher is not
        # reaped, so that its pid cannot name someone else's group.  Then everything with the tag.
        if self.proc is None or self.proc.poll() is None:
            try:
                os.killpg(self.launcher_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + timeout
        left: List[int] = []
        while True:
            left = self.alive_pids()
            for pid in left + [p for p in self.rank_pids.values() if p not in left]:
                if pid_alive(pid) and proc_environ(pid).get(TAG_VAR) == self.tag:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
            left = self.alive_pids()
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        _LIVE.pop(self.tag, None)
        if left:
            raise RuntimeError("job %s: processes still alive after SIGKILL: %s" % (self.tag, left))

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@atexit.register
def _stop_leftovers() -> None:
    for job in list(_LIVE.values()):
        try:
            job.stop(timeout=5)
        except Exception:  # best effort at interpreter exit
            pass


def _die_with_parent() -> None:  # preexec_fn of the launcher: SIGKILL when the test process dies
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _launch(kind: str, argv: List[str], ready_dir: Path, log_path: Path, extra_env: Dict[str, str]) -> Job:
    tag = uuid.uuid4().hex
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "HANG_READY_DIR": str(ready_dir),
            "HANG_DIE_WITH_PARENT": "1",
            TAG_VAR: tag,
        }
    )
    env.update(extra_env)
    ready_dir.mkdir(parents=True, exist_ok=True)
    for stale in ready_dir.iterdir():  # a reused folder: markers of an earlier job would mislead
        stale.unlink()
    log = open(log_path, "wb")
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(REPO),
            start_new_session=True,
            # PR_SET_PDEATHSIG fires when the *thread* that forked exits: only from the main thread
            preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,
        )
    finally:
        log.close()
    job = Job(
        kind=kind, scenario="", launcher_pid=proc.pid, rank_pids={}, exited_ranks=[], world_size=0,
        bad_rank=-1, ready_dir=ready_dir, log_path=log_path, tag=tag, proc=proc,
    )
    _LIVE[tag] = job
    return job


def _markers(ready_dir: Path) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for p in ready_dir.iterdir():
        if p.name.startswith("."):
            continue
        try:
            out[p.name] = int(p.read_text().strip())
        except (OSError, ValueError):
            continue  # being written (should not happen: markers are renamed into place)
    return out


def wait_rank_pids(job: Job, nproc: int, timeout: float, launcher: str) -> Dict[int, int]:
    """{rank: pid} once every rank wrote its ``rank<R>.pid`` marker; a launcher that exits first or
    a timeout fails the test with the launcher's log (for launchers started with ``_launch``)."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # only rank markers: a rank's own children (a DataLoader worker's worker<R>.pid) may write theirs
        # between two polls, and counting them would never reach nproc again
        ranks = {int(m.group(1)): p for m, p in ((re.match(r"rank(\d+)\.pid$", n), p)
                                                  for n, p in _markers(job.ready_dir).items()) if m}
        if len(ranks) == nproc:
            return ranks
        if job.proc.poll() is not None:
            pytest.fail("%s exited %s before the hang:\n%s" % (launcher, job.proc.poll(), job.log_tail()))
        time.sleep(0.1)
    pytest.fail("the %s ranks did not all reach the hang in %d s:\n%s" % (launcher, timeout, job.log_tail()))


def _describe(job: Job, markers: Dict[str, int]) -> str:
    states = {name: "%d:%s" % (pid, thread_state(pid) or "gone") for name, pid in sorted(markers.items())}
    return "launcher %d %s; markers %s\n--- launcher log tail (%s) ---\n%s" % (
        job.launcher_pid,
        "running" if job.proc is not None and job.proc.poll() is None else "exited (%s)" % (
            job.proc.poll() if job.proc is not None else "?"),
        states or "none",
        job.log_path,
        job.log_tail(),
    )


def _wait_stuck(job: Job, expected: Callable[[Dict[str, int]], bool], blocked: Callable[[Dict[str, int]], List[int]],
                gone: Callable[[Dict[str, int]], List[int]], timeout: float) -> Dict[str, int]:
    """Wait until the markers are complete, the pids in gone() have exited, and the main thread of
    every pid in blocked() stays in state S without using CPU for STUCK_WINDOW seconds."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    markers: Dict[str, int] = {}

    def fail(why: str) -> None:
        try:
            msg = "%s job %r did not get stuck: %s\n%s" % (job.kind, job.scenario, why, _describe(job, markers))
        finally:
            job.stop()
        raise RuntimeError(msg)

    while True:
        if time.monotonic() > deadline:
            fail("timed out after %.0f s" % timeout)
        if job.proc is not None and job.proc.poll() is not None:
            markers = _markers(job.ready_dir)
            fail("the launcher exited with status %s" % job.proc.returncode)
        markers = _markers(job.ready_dir)
        if not expected(markers):
            time.sleep(0.1)
            continue
        pids = blocked(markers)
        dead = [p for p in pids if not pid_alive(p)]
        if dead:
            fail("processes %s died after writing their ready marker" % dead)
        if any(pid_alive(p) for p in gone(markers)):
            time.sleep(0.05)
            continue
        first = {p: _main_thread_sample(p) for p in pids}
        ok = all(s is not None and s[0] == "S" for s in first.values())
        end = time.monotonic() + STUCK_WINDOW
        while ok and time.monotonic() < end:
            time.sleep(0.05)
            for p in pids:
                s = _main_thread_sample(p)
                if s is None or s[0] != "S" or s[1] != first[p][1]:
                    ok = False
                    break
        if ok:
            time.sleep(SETTLE)
            job.startup_s = time.monotonic() - t0
            return markers


def _check_env(job: Job, pid: int, want: Dict[str, str]) -> None:
    env = proc_environ(pid)
    bad = {k: (env.get(k), v) for k, v in want.items() if env.get(k) != v}
    if bad:
        try:
            msg = "pid %d: environment (have, want) %s" % (pid, bad)
        finally:
            job.stop()
        raise RuntimeError(msg)


def start_torch_job(
    scenario: str,
    tmp_path: Path,
    nproc: int = 4,
    bad_rank: int = 1,
    timeout: float = START_TIMEOUT,
    env: Optional[Dict[str, str]] = None,
    script: Optional[Path] = None,
) -> Job:
    """torchrun --standalone --nproc_per_node=nproc tests/fixtures/torch_job.py scenario bad_rank
    (``script``: a copy of it elsewhere, e.g. in a folder named torch/ as users' examples are),
    returned once every rank is really stuck (see _wait_stuck).  --standalone picks a free port
    itself (rendezvous on localhost:0), so parallel jobs never collide.  Files in tmp_path:
    ready/ (markers) and launcher.log (torchrun's and the ranks' stdout + stderr)."""
    if scenario not in TORCH_SCENARIOS:
        raise ValueError("scenario %r: one of %s" % (scenario, TORCH_SCENARIOS))
    if not 0 <= bad_rank < nproc:
        raise ValueError("bad_rank %d outside 0..%d" % (bad_rank, nproc - 1))
    tmp_path = Path(tmp_path)
    argv = [
        _venv_bin("torchrun"), "--standalone", "--nproc_per_node=%d" % nproc, str(script or TORCH_JOB), scenario,
        str(bad_rank),
    ]
    job = _launch("torch", argv, tmp_path / "ready", tmp_path / "launcher.log", env or {})
    job.scenario, job.world_size, job.bad_rank = scenario, nproc, bad_rank
    exiting = {bad_rank} if scenario == "exit" else set()

    def expected(m: Dict[str, int]) -> bool:
        return all(("rank%d.%s" % (r, "exited" if r in exiting else "pid")) in m for r in range(nproc))

    def blocked(m: Dict[str, int]) -> List[int]:
        return [m["rank%d.pid" % r] for r in range(nproc) if r not in exiting]

    def gone(m: Dict[str, int]) -> List[int]:
        return [m["rank%d.exited" % r] for r in exiting]

    markers = _wait_stuck(job, expected, blocked, gone, timeout)
    job.markers = markers
    job.rank_pids = {r: markers["rank%d.pid" % r] for r in range(nproc) if r not in exiting}
    job.exited_ranks = sorted(exiting)
    extra = sorted(set(markers) - {"rank%d.%s" % (r, "exited" if r in exiting else "pid") for r in range(nproc)})
    if extra or len(set(markers.values())) != len(markers):
        job.stop()
        raise RuntimeError("unexpected ready markers %s" % markers)
    for r, pid in job.rank_pids.items():
        _check_env(job, pid, {"RANK": str(r), "WORLD_SIZE": str(nproc), TAG_VAR: job.tag})
        if ppid_of(pid) != job.launcher_pid:
            job.stop()
            raise RuntimeError("rank %d (pid %d) is not a child of torchrun %d" % (r, pid, job.launcher_pid))
    return job


def start_mp_job(tmp_path: Path, slow_shard: int = 1, timeout: float = 60.0) -> Job:
    """tests/fixtures/mp_job.py: a Pool of 3 workers, one stuck in slow_shard, the parent (launcher_pid)
    in pool.map, the two others idle.  rank_pids: worker index -> pid; bad_rank: the stuck worker's
    index; markers also has "parent.pid" and "slow_shard.pid"."""
    tmp_path = Path(tmp_path)
    argv = [sys.executable, str(MP_JOB), str(slow_shard)]
    job = _launch("mp", argv, tmp_path / "ready", tmp_path / "launcher.log", {})
    job.scenario, job.world_size = "slow_shard", 3
    names = ["parent.pid", "slow_shard.pid"] + ["worker%d.pid" % i for i in range(3)]

    def expected(m: Dict[str, int]) -> bool:
        return all(n in m for n in names)

    def blocked(m: Dict[str, int]) -> List[int]:
        return sorted({m[n] for n in names})

    markers = _wait_stuck(job, expected, blocked, lambda m: [], timeout)
    job.markers = markers
    job.rank_pids = {i: markers["worker%d.pid" % i] for i in range(3)}
    stuck = [i for i, p in job.rank_pids.items() if p == markers["slow_shard.pid"]]
    if markers["parent.pid"] != job.launcher_pid or len(stuck) != 1 or len(set(job.rank_pids.values())) != 3:
        job.stop()
        raise RuntimeError("unexpected ready markers %s (parent %d)" % (markers, job.launcher_pid))
    job.bad_rank = stuck[0]
    for pid in job.rank_pids.values():
        if ppid_of(pid) != job.launcher_pid:
            job.stop()
            raise RuntimeError("worker %d is not a child of the parent %d" % (pid, job.launcher_pid))
    return job


def blocked_pids(job: Job) -> List[int]:
    """The pids whose main thread is blocked: the live ranks, and the parent of the mp job."""
    pids = set(job.rank_pids.values())
    if job.kind == "mp":
        pids.add(job.launcher_pid)
    return sorted(pids)


def stuck_problems(job: Job, seconds: float = 2.0, interval: float = 0.1) -> List[str]:
    """Watch the job for `seconds`: every blocked main thread must stay in state S without using
    CPU, the launcher must keep running and exited ranks stay gone.  Returns the problems ([] = ok)."""
    pids = blocked_pids(job)
    first = {p: _main_thread_sample(p) for p in pids}
    problems: List[str] = []
    end = time.monotonic() + seconds
    while True:
        for p in pids:
            s = _main_thread_sample(p)
            if s is None or first[p] is None:
                problems.append("pid %d is gone" % p)
            elif s[0] != "S":
                problems.append("pid %d main thread in state %s" % (p, s[0]))
            elif s[1] != first[p][1]:
                problems.append("pid %d main thread used CPU (%d ticks)" % (p, s[1] - first[p][1]))
        if not pid_alive(job.launcher_pid):
            problems.append("launcher %d is gone" % job.launcher_pid)
        for r in job.exited_ranks:
            pid = job.markers.get("rank%d.exited" % r)
            if pid is not None and pid_alive(pid) and proc_environ(pid).get(TAG_VAR) == job.tag:
                problems.append("exited rank %d (pid %d) is alive" % (r, pid))
        if problems or time.monotonic() >= end:
            return sorted(set(problems))
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------- cores


def gcore_fast(pid: int, dest_dir: Path, timeout: float = 120.0) -> Path:
    """Like tests/helpers.gcore (same gdb flags as /usr/bin/gcore, same dest_dir/core.<pid>), but with
    `set auto-solib-add off`: gdb reads no shared-library symbols, which for a torch rank is nearly all
    of gcore's time (libtorch_cpu.so: ~7 s of a 10-16 s gcore; this takes ~0.7 s).  The core is the
    same: the segments come from /proc/PID/smaps and the notes from ptrace and /proc, not from symbols
    (checked: same notes, segments and size, and `hanganalyze --format json` gives the same report)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    core = dest_dir / ("core.%d" % pid)
    res = subprocess.run(
        ["gdb", "--nx", "--batch", "--readnever", "-iex", "set debuginfod enabled off",
         "-iex", "set auto-solib-add off", "-iex", "set auto-load off",
         "-ex", "set pagination off", "-ex", "set height 0", "-ex", "set width 0",
         "-ex", "attach %d" % pid, "-ex", "gcore %s" % core, "-ex", "detach", "-ex", "quit"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
    )
    if not core.exists() or core.stat().st_size == 0:
        raise RuntimeError("gcore of pid %d failed (gdb exit %d):\n%s"
                           % (pid, res.returncode, res.stdout.decode("utf-8", "replace")[-3000:]))
    return core


def gcore_ranks(
    job: Job,
    out_dir: Path,
    timeout: float = 120.0,
    parallel: int = 2,
    fast: bool = True,
    verbose: bool = True,
) -> Dict[int, Path]:
    """A core of every live rank (the processes keep running), at most `parallel` at a time, each
    bounded by `timeout` seconds: gcore_fast, or tests/helpers.gcore (stock /usr/bin/gcore) with
    fast=False.  Returns rank -> core path (out_dir/rank<R>/core.<pid>).  Prints each core's size and
    time unless verbose is False.  A torch rank's core is ~710 MiB (mostly libtorch_cpu.so's text,
    which gdb dumps whole because it holds the ELF header, and glibc's 64 MiB arena reservations)."""
    out_dir = Path(out_dir)
    live = job.live_rank_pids
    take = gcore_fast if fast else gcore

    def one(item):
        rank, pid = item
        t0 = time.monotonic()
        core = take(pid, out_dir / ("rank%d" % rank), timeout=timeout)
        return rank, core, time.monotonic() - t0

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        results = list(pool.map(one, sorted(live.items())))
    cores: Dict[int, Path] = {}
    for rank, core, secs in results:
        cores[rank] = core
        if verbose:
            print("gcore rank %d (pid %d): %s %.1f MiB in %.1f s"
                  % (rank, live[rank], core, core.stat().st_size / 2**20, secs))
    return cores


# -------------------------------------------------------------------------------------- fixtures


def torch_job_fixture(scenario: str, name: Optional[str] = None, scope: str = "module", nproc: int = 4,
                      bad_rank: int = 1):
    """A pytest fixture that starts the job once per `scope` and stops it at teardown:
        straggler_job = torch_job_fixture("straggler", name="straggler_job")"""
    import pytest

    @pytest.fixture(scope=scope, name=name or "%s_job" % scenario)
    def _fixture(tmp_path_factory) -> Iterator[Job]:
        job = start_torch_job(scenario, tmp_path_factory.mktemp("torch_%s" % scenario), nproc=nproc,
                              bad_rank=bad_rank)
        try:
            yield job
        finally:
            job.stop()

    return _fixture


def mp_job_fixture(name: str = "mp_job", scope: str = "module"):
    """A pytest fixture for start_mp_job (see torch_job_fixture)."""
    import pytest

    @pytest.fixture(scope=scope, name=name)
    def _fixture(tmp_path_factory) -> Iterator[Job]:
        job = start_mp_job(tmp_path_factory.mktemp("mp_job"))
        try:
            yield job
        finally:
            job.stop()

    return _fixture
