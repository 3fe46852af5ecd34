"""``hanganalyze watch``'s command line without a torch job: usage errors as one line and exit 2,
the launcher's exit code and output passed through, SIGTERM forwarded to it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from helpers import sigint_default

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
