"""queue-join-task-done-missing on a real hung process (tests/fixtures/py_queue_join.py): a worker
skips task_done() for a job that raised, so queue.Queue.join() waits for ever while every worker is
idle in get().  Read live (the direct reader) and from a gcore'd core, through the CLI.  Near miss:
the same pool with one worker still inside a long job: join() only waits for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, cli_json_report, gcore, real_text, start_hung, text_verdict

from hanganalyze.errors import EXIT_HANG

SIG = "queue-join-task-done-missing"
FIXTURE = FIXTURES / "py_queue_join.py"
#: Signatures this module tests on real hung processes and near misses (test_signature_coverage.py).
COVERED = [SIG]


def _report(args, tmp: Path, name: str) -> dict:
    return cli_json_report(args, tmp / name, (0, EXIT_HANG))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qjoin")
    out = {}
    for mode in ("lost", "busy"):
        h = start_hung([sys.executable, str(FIXTURE), mode])
        try:
            out[mode, "live"] = _report(["--pid", h.pid, "--samples", "2"], tmp, "%s-live.json" % mode)
            if mode == "lost":
                out[mode, "core"] = _report([gcore(h.pid, tmp / mode)], tmp, "%s-core.json" % mode)
        finally:
            h.kill()
    return out


@pytest.mark.parametrize("how", ["live", "core"])
def test_a_join_whose_workers_are_all_idle_is_a_lost_task_done(reports, how):
    data = reports["lost", how]
    f = next(f for f in data["findings"] if f["signature"] == SIG)
    assert f["severity"] == "hang" and f["fix"]
    text = json.dumps(f["evidence"])
    assert "join" in text and "get" in text  # the joiner, and an idle worker as evidence
    assert data["rc"] == EXIT_HANG


def test_a_join_waiting_for_a_busy_worker_is_not_named(reports):
    data = reports["busy", "live"]
    assert SIG not in [f["signature"] for f in data["findings"]]
    assert next(f for f in data["findings"] if f["signature"] == "triage")["triage"]["wait"] == "queue"


def test_a_lone_joining_thread_is_not_named(db):
    """The joiner's traceback alone (the corpus's watchtower-115: a logging handler whose worker keeps
    feeding its own queue) shows no worker, idle or busy: no finding."""
    snap, wait = text_verdict(real_text("watchtower/watchtower-115-1.txt"), db)
    assert SIG not in [f.signature for f in snap.findings] and wait == "queue"
