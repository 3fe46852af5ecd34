"""``hanganalyze watch``'s command line without a torch job: usage errors as one line and exit 2,
the launcher's exit code and output passed through, SIGTERM forwarded to it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Tuple

import pytest
from helpers import REPO, sigint_default

WATCH = [sys.executable, "-m", "hanganalyze", "watch"]


def _run(args, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(WATCH + list(args), capture_output=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    ([], "either --job PID or -- COMMAND"),
    (["--then", "explode", "--", "true"], "--then explode: one of keep|kill"),
    (["--stall", "0", "--", "true"], "--stall and --poll must be positive"),
    (["--", "/nonexistent/launcher"], "cannot start /nonexistent/launcher"),
    (["--job", "999999999"], "--job 999999999: no such process"),
])
def test_usage_errors_are_one_line(args, message) -> None:
    res = _run(args)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_job_that_is_no_launcher(tmp_path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        res = _run(["--job", str(sleeper.pid), "--poll", "0.2"])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert res.returncode == 2 and "found no Python worker" in res.stderr.decode(), res.stderr


def test_exit_code_and_output_passed_through() -> None:
    res = _run(["--stall", "5", "--", "sh", "-c", "echo out1; echo err1 >&2; echo out2; exit 7"])
    assert res.returncode == 7
    assert res.stdout == b"out1\nout2\n" and res.stderr == b"err1\n"


def test_help_lists_the_watch_options() -> None:
    res = _run(["--help"])
    out = res.stdout.decode()
    assert res.returncode == 0
    for opt in ("--stall", "--then", "--poll", "--job", "--output", "--node-summary"):
        assert opt in out


def test_sigterm_forwarded_to_the_launcher() -> None:
    p = subprocess.Popen(WATCH + ["--", sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_default)
    assert p.stdout.readline() == b"up\n"
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert time.monotonic() - t0 < 10


def _lone_job(tmp_path: Path, code: str, then: str = "kill") -> Tuple[subprocess.CompletedProcess, dict, float]:
    """``watch --then THEN`` on a lone Python process (its own worker) that runs ``code``; the
    result, the report's JSON and the seconds it took."""
    t0 = time.monotonic()
    res = _run(["--stall", "100", "--poll", "0.3", "--then", then, "-o", str(tmp_path / "r.json"),
                "--", sys.executable, "-c", code])
    doc = json.loads((tmp_path / "r.json").read_text()) if (tmp_path / "r.json").exists() else {}
    return res, doc, time.monotonic() - t0


def test_the_jobs_watchdog_line_triggers_the_capture_at_once(tmp_path: Path) -> None:
    """Long before --stall, the job's own alarm: captured, then killed (the sleep would last 60 s)."""
    res, doc, took = _lone_job(tmp_path, "import time; print('[Rank 0] Watchdog caught collective operation "
                                         "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)', flush=True); time.sleep(60)")
    assert res.returncode == 3, res.stderr
    assert doc["warnings"][0].startswith("hanganalyze watch: hang detected: the job wrote: [Rank 0] Watchdog caught")
    assert [p["source"] for p in doc["processes"]] == ["live"]
    assert b"Watchdog caught" in res.stdout and took < 40
    assert (tmp_path / "r.tail.log").read_text().startswith("[Rank 0] Watchdog caught")


def test_a_flight_recorder_dump_triggers_the_capture_and_joins_it(tmp_path: Path) -> None:
    """The dump lands where the watcher told PyTorch to write it (TORCH_FR_DUMP_TEMP_FILE): it is read
    with the live process (a real dump of a 2-rank NCCL straggler, tests/data/flight_recorder)."""
    dump = REPO / "tests" / "data" / "flight_recorder" / "straggler.fr.rank_0"
    code = ("import os, shutil, time; shutil.copy(%r, os.environ['TORCH_FR_DUMP_TEMP_FILE'] + '0'); "
            "time.sleep(60)" % str(dump))
    res, doc, took = _lone_job(tmp_path, code)
    assert res.returncode == 3, res.stderr
    assert "a flight-recorder dump appeared" in doc["warnings"][0]
    assert not any(w.startswith("flight-recorder dumps left out") for w in doc["warnings"])
    assert any(p.get("collectives") for p in doc["processes"]), [p.get("source") for p in doc["processes"]]
    assert took < 40


def test_then_keep_leaves_the_job_to_end_and_passes_its_output_on(tmp_path: Path) -> None:
    code = ("import time; print('[Rank 0] Watchdog caught collective operation timeout', flush=True); "
            "time.sleep(3); print('after the capture', flush=True)")
    res, doc, took = _lone_job(tmp_path, code, then="keep")
    assert res.returncode == 3, res.stderr
    assert doc["warnings"][0].startswith("hanganalyze watch: hang detected: the job wrote")
    assert res.stdout.endswith(b"after the capture\n") and took >= 3
    assert "ended the job" not in res.stderr.decode()
