"""Waits for a future from inside the machinery that must produce it, on real hung processes read
live (the direct reader) and from gcore'd cores, through the CLI as a user runs it:

* thread-pool-starved-by-nested-wait (tests/fixtures/py_executor_starve.py): every worker of a
  ThreadPoolExecutor waits in Future.result() for a task queued behind it.  Near miss: one worker
  waits while another runs the task and a third is idle.
* asyncio-loop-blocked-on-sync-wait (tests/fixtures/py_loop_blocked.py): a coroutine calls
  run_coroutine_threadsafe(..., its own loop).result(), or reads a plain queue.Queue.  Read live or
  from a core, the loop is known from memory and the rule ``asyncio-loop-blocked`` (which names the
  running task) answers instead; the signature answers the fixture's own faulthandler dump, the text a
  user pastes.  Near miss: the main thread waits for a coroutine of a loop running free in another
  thread.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from helpers import FIXTURES, cli_json_report, gcore, start_hung, text_verdict

from hanganalyze.errors import EXIT_DEADLOCK, EXIT_HANG

STARVE, BLOCKED = "thread-pool-starved-by-nested-wait", "asyncio-loop-blocked-on-sync-wait"
#: Signatures this module tests on real hung processes and near misses (test_signature_coverage.py).
COVERED = [STARVE, BLOCKED]
CASES = {"starve": FIXTURES / "py_executor_starve.py", "loop": FIXTURES / "py_loop_blocked.py"}


def _report(args, tmp: Path, name: str) -> dict:
    return cli_json_report(args, tmp / name, (0, EXIT_HANG, EXIT_DEADLOCK))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("futures")
    out = {}
    for case, mode, core in (("starve", "nested", True), ("starve", "spare", False),
                             ("loop", "self", True), ("loop", "queue", False), ("loop", "other", False)):
        dump = tmp / ("%s.faulthandler.txt" % mode)
        env = {"HANG_DUMP": str(dump)} if case == "loop" else None
        h = start_hung([sys.executable, str(CASES[case]), mode], env=env)
        try:
            if case == "loop":
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not (dump.exists() and dump.stat().st_size):
                    time.sleep(0.2)
                time.sleep(0.3)
                out[mode, "text"] = dump.read_text()
            out[mode, "live"] = _report(["--pid", h.pid, "--samples", "2"], tmp, "%s-live.json" % mode)
            if core:
                out[mode, "core"] = _report([gcore(h.pid, tmp / mode)], tmp, "%s-core.json" % mode)
        finally:
            h.kill()
    return out


def _finding(data: dict, sig: str) -> dict:
    return next(f for f in data["findings"] if f["signature"] == sig)


@pytest.mark.parametrize("how", ["live", "core"])
def test_every_pool_worker_waiting_on_its_own_pool_is_a_deadlock(reports, how):
    data = reports["nested", how]
    f = _finding(data, STARVE)
    assert f["severity"] == "deadlock" and f["fix"] and f["references"]
    text = json.dumps(f["evidence"])
    assert "result" in text and "_worker" in text
    names = {t.get("tid"): t.get("name") for p in data["processes"] for t in p["threads"]}
    assert all((names.get(e["thread"]) or "").startswith("crawler_") for e in f["evidence"] if e.get("thread")), names
    assert data["rc"] == EXIT_DEADLOCK
    assert BLOCKED not in [x["signature"] for x in data["findings"]]


def test_a_pool_with_a_free_worker_is_not_starved(reports):
    data = reports["spare", "live"]
    assert STARVE not in [f["signature"] for f in data["findings"]]
    assert _finding(data, "triage")["triage"]["wait"] == "future"


@pytest.mark.parametrize("mode", ["self", "queue"])
def test_a_blocked_loop_in_a_pasted_faulthandler_dump_is_named(reports, db, mode):
    snap, wait = text_verdict(reports[mode, "text"], db)
    f = next(f for f in snap.findings if f.signature == BLOCKED)
    assert f.severity == "hang" and ("result" in json.dumps([e.text for e in f.evidence]) if mode == "self" else True)
    assert STARVE not in [x.signature for x in snap.findings]


@pytest.mark.parametrize("how", ["live", "core"])
def test_a_loop_read_from_memory_is_answered_by_the_loop_rule_alone(reports, how):
    """Live or from a core the loop state is read: ``asyncio-loop-blocked`` names the running task and
    supersedes the stack-only signature (one finding, not two)."""
    sigs = [f["signature"] for f in reports["self", how]["findings"]]
    assert "asyncio-loop-blocked" in sigs and BLOCKED not in sigs


def test_a_loop_blocked_in_a_threads_queue_read_is_named_live(reports):
    sigs = [f["signature"] for f in reports["queue", "live"]["findings"]]
    assert "asyncio-loop-blocked" in sigs and BLOCKED not in sigs


def test_a_future_wait_outside_a_free_loop_is_not_a_blocked_loop(reports, db):
    data = reports["other", "live"]
    assert BLOCKED not in [f["signature"] for f in data["findings"]]
    assert "asyncio-loop-blocked" not in [f["signature"] for f in data["findings"]]
    assert BLOCKED not in [f.signature for f in text_verdict(reports["other", "text"], db)[0].findings]
    assert _finding(data, "triage")["triage"]["wait"] == "future"
