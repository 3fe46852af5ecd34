"""NCCL RAS queried live beside the stack samples (``acquire/raslive.py``): a real process that has a
library named like NCCL's mapped (what ``/proc/PID/maps`` shows of a rank) and ``NCCL_RAS_ADDR`` in
its environment, and a real TCP server replaying the captured RAS answers (tests/data/nccl_ras);
no NCCL = no note, NCCL with RAS off or unreachable = one note, a server that never answers =
bounded time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, Optional

import pytest
from rasserver import RasServer

from hanganalyze.acquire import raslive
from hanganalyze.acquire.many import Input
from hanganalyze.acquire.ncclras import read_ras
from hanganalyze.analyze import rasprogress
from hanganalyze.analyze.rasprogress import BEHIND, STUCK, ras_progress
from hanganalyze.render.rasview import ras_text_lines
from hanganalyze_gdbext.model import Process, Samples, Snapshot, Thread, ThreadProgress

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_ras"
#: Maps ``sys.argv[1]`` (a file named like libnccl) and waits: what a rank's maps show of NCCL.
MAPPER = ("import mmap, sys, time\nf = open(sys.argv[1], 'rb')\n"
          "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\nprint('ready', flush=True)\ntime.sleep(60)\n")


def _rank(tmp_path: Path, env: Dict[str, str], lib: Optional[str] = "libnccl.so.2") -> Iterator[int]:
    target = tmp_path / (lib or "plain.bin")
    target.write_bytes(b"\0" * 4096)
    proc = subprocess.Popen([sys.executable, "-c", MAPPER, str(target)], stdout=subprocess.PIPE,
                            env={**os.environ, **env})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def rank(tmp_path):
    made = []

    def start(env: Dict[str, str], lib: Optional[str] = "libnccl.so.2") -> int:
        gen = _rank(tmp_path, env, lib)
        made.append(gen)
        return next(gen)

    yield start
    for gen in made:
        gen.close()


CAPTURED_PID = {"stuck": 674, "slow": 821, "healthy": 963}


def answers(job: str, pid: Optional[int] = None):
    """The captured answers; with ``pid``, rank 1's pid made that one (the sampler keeps only answers
    about the job's own processes)."""
    out = [(DATA / ("%s.query%d.json" % (job, i))).read_text() for i in (1, 2, 3)]
    if pid is not None:
        out = [a.replace('"pid": %d' % CAPTURED_PID[job], '"pid": %d' % pid) for a in out]
    return [a.encode() for a in out]


def sampled(pid: int, samples: int = 3, interval: float = 0.05, work_s: float = 0.2) -> Snapshot:
    """What ``request.py`` does: start the sampler, read the stacks (here: wait), finish."""
    s = raslive.sampler([Input(pid=pid)], samples, interval)
    assert s is not None
    time.sleep(work_s)
    snap = Snapshot()
    s.finish(snap)
    return snap


def test_stuck_job_queried_once_per_round_and_longer_when_a_rank_is_accused(rank, monkeypatch):
    monkeypatch.setattr(raslive, "STUCK_WINDOW_S", 0.6)  # suite time: the window the analysis needs, shorter
    monkeypatch.setattr(rasprogress, "STUCK_MIN_SPAN_S", 0.6)
    monkeypatch.setattr(raslive, "MIN_SPACING_S", 0.05)
    srv = RasServer([])
    try:
        pid = rank({"NCCL_RAS_ADDR": srv.addr})
        srv.answers[:] = answers("stuck", pid)
        snap = sampled(pid)
    finally:
        srv.close()
    s = snap.nccl_ras
    assert s is not None and s.live == srv.addr and s.notes == []
    times = [q.time_s for q in s.queries]
    assert len(times) >= 3 and times == sorted(times) and times[-1] - times[0] >= 0.6  # extended to the window
    (c,) = ras_progress(s).communicators
    assert c.state == STUCK and [lag.pid for lag in c.stuck] == [pid]
    assert "live queries of %s at " % srv.addr in "\n".join(ras_text_lines(snap))


def test_healthy_job_is_not_extended(rank, monkeypatch):
    monkeypatch.setattr(raslive, "MIN_SPACING_S", 0.05)
    srv = RasServer([])
    try:
        pid = rank({"NCCL_RAS_ADDR": srv.addr})
        srv.answers[:] = answers("healthy", pid)
        s = raslive.sampler([Input(pid=pid)], 3, 0.1)
        time.sleep(0.25)  # the stacks' three rounds
        ended = time.time()
        snap = Snapshot()
        s.finish(snap)
    finally:
        srv.close()
    times = [q.time_s for q in snap.nccl_ras.queries]
    assert len(times) >= 2 and max(times) < ended  # no query after the sampling: nothing accused, no extension
    assert time.time() - ended < 0.5


def test_one_sample_is_one_instant_and_never_extended(rank, monkeypatch):
    """--samples 1 on a stuck job: no time verdict is asked of RAS, so no wait for a window (on 2 GPU
    ranks the extension made one sample 2.3 s against pystack's 0.35 s)."""
    monkeypatch.setattr(raslive, "STUCK_WINDOW_S", 1.5)
    monkeypatch.setattr(raslive, "MIN_SPACING_S", 0.05)
    srv = RasServer([])
    try:
        pid = rank({"NCCL_RAS_ADDR": srv.addr})
        srv.answers[:] = answers("stuck", pid)
        s = raslive.sampler([Input(pid=pid)], 1, 0.1)
        time.sleep(0.1)
        t0 = time.time()
        snap = Snapshot()
        s.finish(snap)
        took = time.time() - t0
    finally:
        srv.close()
    assert took < 1.0 and snap.nccl_ras is not None and len(snap.nccl_ras.queries) <= 2


def test_no_nccl_no_note(rank):
    pid = rank({"NCCL_RAS_ADDR": "127.0.0.1:9"}, lib=None)
    assert raslive.sampler([Input(pid=pid)], 3, 0.05) is None


def test_nccl_loaded_but_nothing_listens_is_one_note(rank, monkeypatch):
    monkeypatch.setattr(raslive, "MIN_SPACING_S", 0.05)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()  # nothing listens there now
    snap = sampled(rank({"NCCL_RAS_ADDR": addr}))
    assert snap.nccl_ras.queries == [] and len(snap.nccl_ras.notes) == 1
    assert "nothing listens on %s" % addr in snap.nccl_ras.notes[0]
    assert "no answer" in "\n".join(ras_text_lines(snap))


def test_ras_disabled_is_one_note_without_a_query(rank):
    snap = sampled(rank({"NCCL_RAS_ENABLE": "0", "NCCL_RAS_ADDR": "127.0.0.1:9"}))
    assert snap.nccl_ras.queries == [] and ["NCCL_RAS_ENABLE=0" in n for n in snap.nccl_ras.notes] == [True]


def test_a_server_that_never_answers_costs_bounded_time(rank, monkeypatch):
    monkeypatch.setattr(raslive, "QUERY_TIMEOUT_S", 0.4)
    silent = RasServer([], handler=lambda c: time.sleep(5))
    try:
        t0 = time.monotonic()
        snap = sampled(rank({"NCCL_RAS_ADDR": silent.addr}), work_s=0.0)
        took = time.monotonic() - t0
    finally:
        silent.close()
    assert took < 1.5
    assert snap.nccl_ras.queries == [] and "did not answer within 0.4 s" in snap.nccl_ras.notes[0]


def test_saved_output_wins_over_live_queries(rank, monkeypatch):
    monkeypatch.setattr(raslive, "MIN_SPACING_S", 0.05)
    srv = RasServer(answers("healthy"))
    try:
        s = raslive.sampler([Input(pid=rank({"NCCL_RAS_ADDR": srv.addr}))], 2, 0.05)
        snap = Snapshot(nccl_ras=read_ras([str(DATA / "slow.query1.json")]))
        time.sleep(0.1)
        s.finish(snap)
    finally:
        srv.close()
    assert [q.source for q in snap.nccl_ras.queries] == [str(DATA / "slow.query1.json")]
    assert "saved RAS output was given" in snap.nccl_ras.notes[-1]


def test_another_jobs_answers_on_a_shared_port_are_asked_again_and_left_out(monkeypatch):
    monkeypatch.setattr(raslive, "MIN_SPACING_S", 0.05)
    monkeypatch.setattr(raslive, "STUCK_WINDOW_S", 0.4)  # suite time
    healthy, stuck = answers("healthy"), answers("stuck")  # pids 962/963 (another job), 673/674 (ours)
    srv = RasServer([a for pair in zip(healthy, stuck) for a in pair])
    try:
        s = raslive.RasSampler({"NCCL_RAS_ADDR": srv.addr}, 3, 0.05, pids=[673, 674])
        s.start()
        time.sleep(0.3)
        snap = Snapshot()
        s.finish(snap)
    finally:
        srv.close()
    got = snap.nccl_ras
    pids = {r.pid for q in got.queries for c in q.communicators for r in c.ranks}
    assert len(got.queries) >= 3 and pids == {673, 674}
    assert any("of another job on this host left out (pids 962, 963)" in n for n in got.notes)


# --- the stacks settle it: no wait for RAS's window (issue 31) --------------------------------------

GPU = Path(__file__).resolve().parents[1] / "data"


def _capture(name: str, within_s: float = 1.6) -> Snapshot:
    """A live --job report of a real GPU job, its RAS queries cut to the stack samples' window (what
    the run had when the sampling ended, before it waited for RAS's 2 s)."""
    snap = Snapshot.from_dict(json.loads((GPU / name).read_text()))
    qs = snap.nccl_ras.queries
    snap.nccl_ras.queries = [q for q in qs if q.time_s - qs[0].time_s < within_s]
    return snap


@pytest.mark.parametrize("name, settled", [
    # rank 1 asleep in load_next_batch / save_checkpoint: its main thread never woke in any sample
    ("gpu_verdicts_onecard/straggler.run1.json", [953]),
    ("gpu_nvml/checkpoint.run1.json", [1085]),
    ("gpu_shapes/loader.run2.json", [1294]),
    # rank 1's host spins in the device sync (CPU: a kernel longer than the window looks the same)
    ("gpu_shapes/spin.run1.json", []),
    # rank 1's main thread moved (Python locals changed) while RAS had it behind
    ("gpu_shapes/loader.run1.json", []),
    # the counts moved: the job is not stopped
    ("gpu_shapes/slow.run2.json", []),
])
def test_settled_by_stacks_on_real_gpu_jobs(name, settled):
    snap = _capture(name)
    assert raslive.settled_by_stacks(snap, snap.nccl_ras.queries) == settled


def test_settled_by_stacks_near_misses():
    def snap() -> Snapshot:
        return _capture("gpu_verdicts_onecard/straggler.run1.json")

    s = snap()
    main = next(t for p in s.processes if p.pid == 953 for t in p.threads if t.tid == 953)
    main.progress.evidence, main.progress.own_wakeups = "same-place", 1  # it woke once of its own
    assert raslive.settled_by_stacks(s, s.nccl_ras.queries) == []
    s = snap()
    s.processes[0].samples.extended = "pid 952 thread 952 held its place ... stuck, or a step longer?"
    assert raslive.settled_by_stacks(s, s.nccl_ras.queries) == []  # the sampling itself was in doubt
    s = snap()
    s.processes = [p for p in s.processes if p.pid != 953]  # the rank behind is not one we sampled
    assert raslive.settled_by_stacks(s, s.nccl_ras.queries) == []
    s = snap()
    s.nccl_ras.queries[-1].communicators[0].ranks[0].counts["AllReduce"] += 1  # rank 0 launched one more
    assert raslive.settled_by_stacks(s, s.nccl_ras.queries) == []
    s = snap()
    assert raslive.settled_by_stacks(s, s.nccl_ras.queries[:1]) == []  # one query: nothing over time


def _stopped(pid: int, evidence: str = "never-woke", own_wakeups: int = 0) -> Snapshot:
    """What the sampling made of a process whose main thread held its place in 3 samples."""
    prog = ThreadProgress(samples=3, state="stuck", evidence=evidence, own_wakeups=own_wakeups, cpu_s=0.0)
    return Snapshot(processes=[Process(source="live", pid=pid, samples=Samples(count=3, window_s=0.2),
                                       threads=[Thread(tid=pid, progress=prog)])])


@pytest.mark.parametrize("evidence, own, held", [("never-woke", 0, False), ("same-place", 1, True)])
def test_a_rank_the_stacks_settled_is_not_held_for_the_window(rank, monkeypatch, evidence, own, held):
    """The stopped job's answers, rank 1 this process: never woke in the samples = the run ends with
    them (RAS over that window, one note); woke once of its own = RAS's window is waited for."""
    monkeypatch.setattr(raslive, "STUCK_WINDOW_S", 0.8)  # suite time
    monkeypatch.setattr(raslive, "MIN_SPACING_S", 0.05)
    srv = RasServer([])
    try:
        pid = rank({"NCCL_RAS_ADDR": srv.addr})
        srv.answers[:] = answers("stuck", pid)
        s = raslive.sampler([Input(pid=pid)], 3, 0.1)
        time.sleep(0.25)  # the stacks' three rounds
        snap = _stopped(pid, evidence, own)
        t0 = time.monotonic()
        s.finish(snap)
        took = time.monotonic() - t0
    finally:
        srv.close()
    times = [q.time_s for q in snap.nccl_ras.queries]
    assert len(times) >= 2
    settled = [n for n in snap.nccl_ras.notes if "never woke in any sample" in n]
    if held:
        assert times[-1] - times[0] >= 0.8 and settled == []
    else:
        assert took < 0.5 and times[-1] - times[0] < 0.8
        assert settled == ["RAS queried over the stack samples' window only (%.1f s): pid %d never woke in any "
                           "sample, so the run was not held to RAS's 0.8 s window" % (times[-1] - times[0], pid)]
        (c,) = ras_progress(snap.nccl_ras).communicators
        assert c.state == BEHIND and [lag.pid for lag in c.held] == [pid]
