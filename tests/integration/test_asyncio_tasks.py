"""asyncio tasks of real hung programs (``tests/fixtures/py_asyncio.py``), read live and from a
gcore core by the default (direct) engine, under every interpreter the suite has: task names,
coroutine stacks, who awaits whom, and the asyncio findings (or none for a healthy server).
On 3.14 the task names and stacks agree with ``python -m asyncio pstree PID``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, all_pythons, gcore, run_hanganalyze, start_hung  # noqa: E402

PYTHONS = {k: v for k, v in all_pythons().items() if not k.startswith("nodebug-")}
FIXTURE = FIXTURES / "py_asyncio.py"
MODES = ("cycle", "events", "orphan", "gather", "blocked", "healthy")


def _report(target) -> dict:
    res = run_hanganalyze([str(target), "--format", "json", "--samples", "1"] if not isinstance(target, int)
                          else ["--pid", str(target), "--format", "json", "--samples", "1"], timeout=300)
    assert res.returncode in (0, 2, 3, 4, 5, 6), res.stderr.decode()[-2000:]  # 5: the await cycle (a deadlock)
    return json.loads(res.stdout)


@pytest.fixture(scope="module", params=sorted(PYTHONS))
def runs(request, tmp_path_factory) -> Dict[str, Dict[str, dict]]:
    """{mode: {"live": report, "core": report, "pstree": text or ""}} of one interpreter."""
    exe = PYTHONS[request.param]
    out: Dict[str, Dict[str, dict]] = {}
    tmp = tmp_path_factory.mktemp("asyncio-%s" % request.param)
    for mode in MODES:
        hung = start_hung([exe, FIXTURE, mode], settle=0.5)
        try:
            got = {"live": _report(hung.pid)}
            got["core"] = _report(gcore(hung.pid, tmp / mode))
            got["pstree"] = ""
            if request.param in ("3.14", "3.14t") and mode == "gather":
                res = subprocess.run([str(exe), "-m", "asyncio", "pstree", str(hung.pid)], capture_output=True,
                                     text=True, timeout=60)
                got["pstree"] = res.stdout
        finally:
            hung.kill()
        out[mode] = got
    return out


def _loop(rep: dict) -> dict:
    loops = rep["processes"][0]["asyncio"]["loops"]
    assert len(loops) == 1, loops
    return loops[0]


def _tasks(rep: dict) -> Dict[str, dict]:
    return {t["name"]: t for t in _loop(rep)["tasks"]}


def _stack(t: dict):
    return [f["function"] for f in t["coroutine_stack"]]


def _findings(rep: dict):
    return {f["signature"] for f in rep["findings"] if f["signature"].startswith("asyncio-")}


@pytest.mark.parametrize("source", ["live", "core"])
def test_await_cycle(runs, source):
    rep = runs["cycle"][source]
    lp = _loop(rep)
    assert lp["thread"] == rep["processes"][0]["pid"]
    tasks = _tasks(rep)
    assert _stack(tasks["Task-2"]) == ["first"] and _stack(tasks["Task-3"]) == ["second"]
    assert tasks["Task-2"]["awaits"][0]["task"] == tasks["Task-3"]["id"]
    assert tasks["Task-3"]["awaits"][0]["task"] == tasks["Task-2"]["id"]
    assert set(tasks["Task-2"]["awaited_by"]) == {tasks["Task-1"]["id"], tasks["Task-3"]["id"]}
    assert [a["kind"] for a in tasks["Task-1"]["awaits"]] == ["gather", "gather"]
    assert _findings(rep) == {"asyncio-await-cycle"}


@pytest.mark.parametrize("source", ["live", "core"])
def test_events_and_orphan_queue(runs, source):
    ev = _tasks(runs["events"][source])
    waiting = [t for t in ev.values() if _stack(t) == ["Event.wait", "waits_then_sets"]]
    assert len(waiting) == 2 and all(t["awaits"][0]["kind"] == "event" for t in waiting)
    assert _findings(runs["events"][source]) == {"asyncio-orphan-wait"}
    rep = runs["orphan"][source]
    tasks = _tasks(rep)
    cons = [t for t in tasks.values() if _stack(t) == ["Queue.get", "consumer"]]
    assert len(cons) == 1 and cons[0]["awaits"][0]["kind"] == "queue-get"
    ended = [t["state"] for t in tasks.values() if t["state"] != "pending"]
    # the producer: kept in the WeakSet registry while referenced; 3.14 unlinks a task as it ends
    version = tuple(int(x) for x in rep["processes"][0]["python"]["version"].split(".")[:2])
    assert ended == ([] if version >= (3, 14) else ["finished"])
    assert _findings(rep) == {"asyncio-orphan-wait"}


@pytest.mark.parametrize("source", ["live", "core"])
def test_gather_with_executor_child(runs, source):
    rep = runs["gather"][source]
    tasks = _tasks(rep)
    main = tasks["Task-1"]
    assert _stack(main) == ["main"] and len(main["awaits"]) == 2
    ex = [t for t in tasks.values() if _stack(t) == ["in_executor"]][0]
    sl = [t for t in tasks.values() if _stack(t) == ["sleep", "napper"]][0]
    assert {a["task"] for a in main["awaits"]} == {ex["id"], sl["id"]}
    assert ex["awaited_by"] == [main["id"]]
    worker = [th for th in rep["processes"][0]["threads"]
              if any(f["function"] == "blocking_job" for f in th["frames"])]
    assert len(worker) == 1
    assert ex["awaits"][0]["kind"] == "executor" and ex["awaits"][0]["thread"] == worker[0]["tid"]
    assert sl["awaits"][0]["kind"] == "sleep"
    assert not _findings(rep)
    text = runs["gather"]["pstree"]
    if text:  # 3.14: the interpreter's own view of the same live process
        assert "in_executor" in text and "napper" in text and "main" in text
        assert set(re.findall(r"Task-\d+", text)) == {"Task-1", "Task-2", "Task-3"} == set(tasks)


@pytest.mark.parametrize("source", ["live", "core"])
def test_loop_blocked_and_healthy(runs, source):
    rep = runs["blocked"][source]
    assert _findings(rep) == {"asyncio-loop-blocked"}
    f = [f for f in rep["findings"] if f["signature"] == "asyncio-loop-blocked"][0]
    assert "sync_sleeper" in f["summary"] and f["threads"] == [rep["processes"][0]["pid"]]
    healthy = runs["healthy"][source]
    tasks = _tasks(healthy)
    assert any(_stack(t)[-1:] == ["consumer"] for t in tasks.values())
    assert any("ticker" in _stack(t) for t in tasks.values())
    assert not _findings(healthy)


@pytest.mark.parametrize("version", [v for v in ("3.12", "3.14") if v in PYTHONS])
def test_hang_tasks_command(version, tmp_path):
    """gdbext's ``hang-tasks`` inside real gdb, on a live process and on its core."""
    from helpers import gdb_batch

    hung = start_hung([PYTHONS[version], FIXTURE, "gather"], settle=0.5)
    try:
        core = gcore(hung.pid, tmp_path)
        outs = [gdb_batch(["hang-tasks"], pid=hung.pid), gdb_batch(["hang-tasks"], core=core, exe=PYTHONS[version])]
    finally:
        hung.kill()
    for out in outs:
        assert re.search(r"Loop 0x[0-9a-f]+ \(_UnixSelectorEventLoop\) on LWP %d: 3 tasks" % hung.pid, out), out
        assert re.search(r"Task-2 \[pending\] awaits: run_in_executor: .* being run by thread \d+", out), out
        assert "#0   sleep (" in out and "#1   napper (" in out
