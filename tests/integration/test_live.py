"""`hanganalyze --pid PID` on live hung processes: the report is right, and the process is left
exactly as it was (alive, same state letter, same threads, not traced), even when the analysis
fails half-way."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, fixture_binary, pyenv_pythons, run_hanganalyze  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


def observe(pid: int) -> dict:
    """What must not change: state letter, thread ids, tracer."""
    status = {}
    for line in Path("/proc/%d/status" % pid).read_text().splitlines():
        k, _, v = line.partition(":")
        status[k] = v.strip()
    tasks = sorted(int(p.name) for p in Path("/proc/%d/task" % pid).iterdir())
    return {"state": status["State"][:1], "tracer": status["TracerPid"], "tasks": tasks}


def assert_left_alone(h, before: dict) -> None:
    time.sleep(0.2)
    assert h.alive()
    after = observe(h.pid)
    assert after["tracer"] == "0"
    assert after == before


def test_live_cxx_deadlock(hung):
    exe = fixture_binary("cxx_mutex_deadlock")
    h = hung([str(exe), "live", "two words"])
    before = observe(h.pid)
    assert before["tracer"] == "0" and len(before["tasks"]) == 3
    res = run_hanganalyze(["--pid", h.pid, "--format", "json"], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    assert_left_alone(h, before)
    (proc,) = json.loads(res.stdout)["processes"]
    assert proc["source"] == "live" and proc["pid"] == h.pid
    assert proc["executable"] == str(exe)
    assert proc["argv"] == [str(exe), "live", "two words"]
    assert proc["signal"] is None
    assert sorted(t["tid"] for t in proc["threads"]) == before["tasks"]
    by_func = {f.get("function"): t for t in proc["threads"] for f in t["frames"]}
    for func in ("take_a_then_b", "take_b_then_a"):
        names = [f.get("function") or "" for f in by_func[func]["frames"]]
        assert any("pthread_mutex_lock" in n for n in names[: names.index(func)]), names
    # live threads have their OS names (gdb reads /proc/PID/task/*/comm)
    assert {"ab-worker", "ba-worker"} <= {t.get("os_name") or t.get("name") for t in proc["threads"]}


def test_live_python_deadlock(hung):
    py = pyenv_pythons().get("3.11")
    if py is None:
        pytest.skip("pyenv python 3.11 not installed")
    h = hung([str(py), str(FIXTURES / "py_deadlock.py")])
    before = observe(h.pid)
    res = run_hanganalyze(["--pid", h.pid, "--format", "json"], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    assert_left_alone(h, before)
    (proc,) = json.loads(res.stdout)["processes"]
    assert len(proc["threads"]) == 3
    assert proc["argv"] == [str(py), str(FIXTURES / "py_deadlock.py")]
    assert proc["python"] and proc["python"]["version"].startswith("3.11")
    # live and core agree on the Python side too: named threads in the fixture's functions
    funcs = {t.get("name"): {f.get("function") for f in t["frames"] if f["kind"] == "python"} for t in proc["threads"]}
    assert "take_a_then_b" in funcs.get("worker-a", set()), funcs
    assert "take_b_then_a" in funcs.get("worker-b", set()), funcs


@pytest.mark.parametrize("timeout", ["0.05", "0.3", "0.6"])
def test_live_target_resumed_when_gdb_is_cut_off(hung, timeout):
    """Whatever step the short --timeout interrupts (start, attach, hang-dump, detach), the
    target is never left stopped or traced."""
    h = hung([str(fixture_binary("cxx_mutex_deadlock"))])
    before = observe(h.pid)
    res = run_hanganalyze(["--pid", h.pid, "--format", "json", "--timeout", timeout], timeout=120)
    err = res.stderr.decode()
    assert res.returncode in (0, 3, 4, 5, 6), err
    if res.returncode == 4:
        assert len(err.splitlines()) == 1 and "timed out" in err, err
    assert_left_alone(h, before)


def test_live_target_left_alone_when_gdb_crashes(hung, tmp_path):
    """gdb segfaults while attached: one-line error (exit 4), target running and untraced."""
    h = hung([str(fixture_binary("cxx_mutex_deadlock"))])
    before = observe(h.pid)
    crash = "python import gdb, os; gdb.events.new_objfile.connect(lambda e: os.kill(os.getpid(), 11))"
    fake = tmp_path / "crashing-gdb"
    fake.write_text('#!/bin/sh\nexec %s "$@" -iex "%s"\n' % (shutil.which("gdb"), crash))
    fake.chmod(0o755)
    res = run_hanganalyze(["--pid", h.pid, "--gdb", fake], timeout=120)
    err = res.stderr.decode()
    assert res.returncode == 4 and len(err.splitlines()) == 1 and "died of SIGSEGV" in err, err
    assert_left_alone(h, before)
