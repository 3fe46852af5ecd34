"""asyncio tasks that wait on each other's ``Event``s (issue 30), live and from a gcore core of the real
fixture (``tests/fixtures/py_asyncio.py events``): the finding says they wait for each other (not "the
producer raised"), and the events are named from the code that holds them (``a`` and ``b`` of
``main``) where they were addresses; a consumer whose producer raised keeps the producer text."""

from __future__ import annotations

import json
import re
import sys

import pytest
from helpers import FIXTURES, gcore, run_hanganalyze, start_hung

from hanganalyze.errors import EXIT_HANG

FIXTURE = FIXTURES / "py_asyncio.py"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("asyncio-mutual")
    out = {}
    for mode in ("events", "orphan"):
        hung = start_hung([sys.executable, FIXTURE, mode], settle=0.5)
        try:
            out[mode, "live"] = run_hanganalyze(["--pid", hung.pid, "--format", "json", "--samples", "1"], timeout=120)
            out[mode, "core"] = run_hanganalyze([gcore(hung.pid, tmp / mode), "--format", "json"], timeout=120)
        finally:
            hung.kill()
    return out


def _finding(res) -> dict:
    assert res.returncode == EXIT_HANG, res.stderr.decode()[-2000:]
    rep = json.loads(res.stdout)
    return next(f for f in rep["findings"] if f["signature"] == "asyncio-orphan-wait"), rep


@pytest.mark.parametrize("source", ["live", "core"])
def test_tasks_waiting_on_each_others_events(reports, source):
    f, rep = _finding(reports["events", source])
    assert f["severity"] == "hang"  # a hang, as before; only the words change
    assert "wait for each other" in f["title"]
    assert "producer" not in f["cause"] and "raised or returned" not in f["cause"]
    assert re.search(r"task Task-\d waits on event [ab], held by task Task-\d; task Task-\d waits on event [ab], "
                     r"held by task Task-\d", f["summary"]), f["summary"]
    tasks = {t["name"]: t for t in rep["processes"][0]["asyncio"]["loops"][0]["tasks"]}
    names = sorted(t["awaits"][0]["name"] for t in tasks.values() if t["awaits"] and t["awaits"][0]["kind"] == "event")
    assert names == ["a", "b"]  # main's names for the two events, not their addresses
    for t in tasks.values():
        a = t["awaits"][0] if t["awaits"] else {}
        if a.get("kind") == "event":
            other = [x for x in tasks.values() if x["id"] in a["referenced_by"] and x["id"] != tasks["Task-1"]["id"]]
            assert len(other) == 1 and other[0]["awaits"][0]["kind"] == "event"  # the other waiting task holds it
            assert re.match(r"Event\.wait on Event [ab] \(0x[0-9a-f]+\)$", a["detail"]), a["detail"]


@pytest.mark.parametrize("source", ["live", "core"])
def test_a_consumer_whose_producer_raised_keeps_the_producer_text(reports, source):
    f, _rep = _finding(reports["orphan", source])
    assert "wait for each other" not in f["title"] and "producer task raised or returned" in f["cause"]
    assert "task(s) already ended" in f["summary"]
