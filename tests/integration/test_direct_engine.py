"""The direct reader (default engine) against gdb (``--engine gdb``) on the same processes and
cores: real PyTorch ranks, the Python wait-for fixture on every interpreter, C++ deadlocks.
What must agree and what may differ is spelled out in ``tests/engines.py``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engines import snapshot_differences  # noqa: E402
from helpers import (  # noqa: E402
    FIXTURES,
    all_pythons,
    assert_one_line_error,
    fixture_binary,
    gcore,
    run_hanganalyze,
    start_hung,
)
from jobs import gcore_ranks, start_torch_job  # noqa: E402

ENGINE_NOTE = "read directly"


def _report(args, engine):
    # One sample each: the readers are compared on one read (the gdb engine takes one by default,
    # the direct one three, whose merged progress changes what the triage and the bucket say).
    res = run_hanganalyze(list(args) + ["--engine", engine, "--samples", "1", "--format", "json"], timeout=300)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    return json.loads(res.stdout)


def _both(args):
    direct, gdb = _report(args, "direct"), _report(args, "gdb")
    assert all(any(ENGINE_NOTE in n for n in p.get("notes") or []) for p in direct["processes"])
    assert not any(ENGINE_NOTE in n for p in gdb["processes"] for n in p.get("notes") or [])
    return direct, gdb


def _status(pid: int) -> dict:
    out = {}
    for line in Path("/proc/%d/status" % pid).read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


# ------------------------------------------------------------------------------ real PyTorch


@pytest.fixture(scope="module")
def torch_job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("direct-torch")
    job = start_torch_job("straggler", tmp / "job", nproc=2, bad_rank=1)
    try:
        cores = gcore_ranks(job, tmp / "cores", verbose=False)
        yield job, cores
    finally:
        job.stop()


@pytest.mark.parametrize("rank", [0, 1])
def test_torch_rank_live_same_as_gdb(torch_job, rank):
    job, _cores = torch_job
    pid = job.rank_pids[rank]
    before = _status(pid)["State"][:1]
    direct, gdb = _both(["--pid", pid])
    assert snapshot_differences(direct, gdb) == []
    (proc,) = direct["processes"]
    assert proc["rank"] == rank and proc["python"]["version"]
    threads = proc["threads"]
    assert len(threads) >= 4
    names = [f.get("function") or "" for t in threads for f in t["frames"]]
    # demangled C++ from libtorch's symbol table, and the Python frames merged in place
    assert any(n.startswith("c10d::") and "(" in n for n in names), names
    assert any(f["kind"] == "python" and f["function"] in ("all_reduce", "load_next_batch")
               for t in threads for f in t["frames"])
    time.sleep(0.2)
    st = _status(pid)
    assert st["TracerPid"] == "0" and st["State"][:1] == before  # released as found


def test_torch_rank_core_same_as_gdb(torch_job):
    _job, cores = torch_job
    direct, gdb = _both([cores[0]])
    assert snapshot_differences(direct, gdb) == []
    assert direct["processes"][0]["rank"] == 0


def test_torch_job_view_direct(torch_job):
    """Both ranks in one run (the job view): the straggler is found from direct reads alone."""
    job, _cores = torch_job
    rep = _report(["--pid", job.rank_pids[0], "--pid", job.rank_pids[1]], "direct")
    sigs = {f["signature"]: f for f in rep["findings"]}
    assert "collective-straggler" in sigs, sorted(sigs)
    assert sigs["collective-straggler"]["ranks"] == [1]


# ---------------------------------------------------------------- every interpreter, locks


def _live_then_core(argv, tmp_path, **hung):
    """Both engines on the live process (which must agree), then its core: (direct report, core)."""
    h = start_hung(argv, **hung)
    try:
        direct, gdb = _both(["--pid", h.pid])
        core = gcore(h.pid, tmp_path)
    finally:
        h.kill()
    assert snapshot_differences(direct, gdb) == []
    return direct, core

PYTHONS = sorted(all_pythons())


@pytest.mark.parametrize("key", PYTHONS)
def test_python_waitfor_live_and_core_same_as_gdb(key, tmp_path):
    fixture_binary("libwf_gil.so")
    direct, core = _live_then_core([all_pythons()[key], FIXTURES / "wf_python.py"], tmp_path, ready="READY",
                                   settle=1.0)
    owners = [t["waits"]["owner_tid"] for t in direct["processes"][0]["threads"]
              if (t.get("waits") or {}).get("kind") == "rlock"]
    assert owners and all(owners), owners  # RLock owners named without gdb, with or without debug info
    cd, cg = _both([core])
    assert snapshot_differences(cd, cg) == []


@pytest.mark.parametrize("name", ["cxx_mutex_deadlock", "cxx_mutex_deadlock.stripped"])
def test_cxx_deadlock_same_as_gdb(name, tmp_path):
    direct, core = _live_then_core([str(fixture_binary(name)), "x"], tmp_path)
    waits = [t.get("waits") or {} for t in direct["processes"][0]["threads"]]
    assert sum(1 for w in waits if w.get("kind") == "mutex" and w.get("owner_tid")) == 2
    assert any(f["signature"] == "lock-order-inversion" or "deadlock" in f.get("severity", "")
               for f in direct["findings"]), direct["findings"]
    cd, cg = _both([core])
    assert snapshot_differences(cd, cg) == []


# ------------------------------------------------------------------------------- selection


def test_unknown_engine_is_one_line_error():
    assert_one_line_error(run_hanganalyze(["--pid", "1", "--engine", "lldb"], timeout=60), 2, "--engine")


def test_naming_a_gdb_selects_the_gdb_engine(hung):
    exe = fixture_binary("cxx_mutex_deadlock")
    h = hung([str(exe), "x"])
    res = run_hanganalyze(["--pid", h.pid, "--gdb", "gdb-for-test-that-does-not-exist", "--format", "json"],
                          timeout=60)
    # the named debugger is used (and missing), not silently replaced by the direct reader
    assert_one_line_error(res, None, "gdb-for-test-that-does-not-exist")


def test_live_reader_releases_the_process_on_interrupt(hung):
    """Ctrl-C (or any error) while the threads are stopped: every thread is detached and runs on."""
    from hanganalyze.direct.live import LiveProcess

    exe = fixture_binary("cxx_mutex_deadlock")
    h = hung([str(exe), "x"])
    before = _status(h.pid)
    assert before["TracerPid"] == "0"
    with pytest.raises(KeyboardInterrupt):
        with LiveProcess(h.pid) as lp:
            assert len(lp.regs) == 3 and all(r["rip"] for r in lp.regs.values())
            tracer = [_status_of_task(h.pid, tid)["TracerPid"] for tid in lp.regs]
            assert set(tracer) == {str(os.getpid())}  # really stopped by us
            raise KeyboardInterrupt
    time.sleep(0.2)
    for tid in sorted(int(p.name) for p in Path("/proc/%d/task" % h.pid).iterdir()):
        st = _status_of_task(h.pid, tid)
        assert st["TracerPid"] == "0" and st["State"][:1] in ("S", "R"), (tid, st["State"])


def _status_of_task(pid: int, tid: int) -> dict:
    out = {}
    for line in Path("/proc/%d/task/%d/status" % (pid, tid)).read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


# ------------------------------------------------------------------------------ the vDSO


def _in_vdso(report) -> list:
    return [t for t in report["processes"][0]["threads"]
            if t["frames"] and t["frames"][0].get("library") == "[vdso]"]


def test_a_thread_in_the_vdso_is_named_and_unwound_as_gdb_does(tmp_path):
    """A thread caught in ``clock_gettime`` runs in the vDSO, which no file maps: the direct reader
    reads its image from the process (and from the core, which keeps it), names the frame as gdb
    does and unwinds through it by its CFI to the same callers (CI once caught a Python thread
    waiting for the GIL in that spot, and the readers disagreed)."""
    h = start_hung([str(fixture_binary("vdso_clock_spin"))])
    try:
        # one snapshot finds the spinner in the vDSO most of the time, not always (it can be in
        # libc's wrapper or in ``spin``): take snapshots until one does, at most eight
        for _ in range(8):
            live = _report(["--pid", h.pid], "direct")
            spinning = _in_vdso(live)
            if spinning:
                break
        cores = [gcore(h.pid, tmp_path / str(i)) for i in range(4)]
    finally:
        h.kill()
    assert spinning, [t["frames"][:2] for t in live["processes"][0]["threads"]]
    frames = spinning[0]["frames"]
    assert frames[0]["function"] == "clock_gettime"
    assert "clock_gettime" in frames[1]["function"] and "libc" in frames[1]["library"], frames
    assert frames[2]["function"] == "spin", frames
    hits = 0
    for core in cores:
        cd, cg = _both([core])
        assert snapshot_differences(cd, cg) == []
        hits += bool(_in_vdso(cd))
    assert hits, "no core caught the spinner in the vDSO"
