"""No ptrace permission, for real (issue 35): hanganalyze with CAP_SYS_PTRACE dropped (``setpriv``,
util-linux: in every Debian/Ubuntu image) on another user's process, and on a process a real gdb
already traces.  Each time: one stderr line that names the cause and the fix, then the report of
what /proc shows (threads, kernel state, CPU; no stacks), exit 4 (the analysis could not read it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import fixture_binary, run_hanganalyze  # noqa: E402

NOBODY = 65534


def _warning(stderr: str, pid: int) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr  # the one line, and nothing else
    assert lines[0].startswith("hanganalyze: warning: cannot attach to pid %d: " % pid), stderr
    assert lines[0].endswith("; reporting /proc only (no stacks)"), stderr
    return lines[0]


def _degraded(stdout: str, pid: int) -> dict:
    report = json.loads(stdout)
    (proc,) = report["processes"]
    assert proc["pid"] == pid and proc["threads"] and all(not t["frames"] for t in proc["threads"])
    assert all(any(n.startswith("kernel: state ") for n in t["notes"]) for t in proc["threads"]), proc["threads"]
    assert any("without stacks (low confidence)" in w for w in report["warnings"]), report["warnings"]
    return proc


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="dropping CAP_SYS_PTRACE and running a process as another user need root and setpriv")
def test_without_cap_sys_ptrace_says_why_and_reports_proc(tmp_path):
    target = subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                               "sleep", "120"])
    try:
        for _ in range(200):  # until setpriv has become sleep (its argv is the one to see)
            if Path("/proc/%d/cmdline" % target.pid).read_bytes().startswith(b"sleep\0"):
                break
            time.sleep(0.02)
        cmd = ["setpriv", "--inh-caps=-all", "--bounding-set=-sys_ptrace", sys.executable, "-m", "hanganalyze",
               "--pid", str(target.pid), "-f", "json", "--interval", "0.2"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert res.returncode == 4, res.stderr
        line = _warning(res.stderr, target.pid)
        assert "belongs to uid %d and this process lacks CAP_SYS_PTRACE" % NOBODY in line, line
        assert "--cap-add=SYS_PTRACE" in line or "kubectl debug" in line or "sudo hanganalyze" in line, line
        proc = _degraded(res.stdout, target.pid)
        assert proc["argv"] == ["sleep", "120"]
        # /proc sampled three times: it never woke nor used CPU, so it is stuck, without any stack
        assert [t["progress"]["state"] for t in proc["threads"]] == ["stuck"], proc["threads"]
    finally:
        target.kill()
        target.wait()


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
def test_pid_already_traced_by_a_debugger(hung):
    """Another debugger holds the process (ptrace allows one tracer): the line names it and its pid."""
    h = hung([str(fixture_binary("cxx_mutex_deadlock"))])
    other = subprocess.Popen(
        ["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-p", str(h.pid), "-ex", "shell sleep 60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(200):
            status = Path("/proc/%d/status" % h.pid).read_text()
            if "TracerPid:\t0\n" not in status:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the other gdb did not attach")
        res = run_hanganalyze(["--pid", h.pid, "-f", "json", "--samples", "1"], timeout=60)
        stderr = res.stderr.decode()
        assert res.returncode == 4, stderr
        line = _warning(stderr, h.pid)
        assert "already traced by pid %d (gdb)" % other.pid in line and "kill %d" % other.pid in line, line
        assert len(_degraded(res.stdout.decode(), h.pid)["threads"]) >= 3  # main and the two deadlocked threads
    finally:
        os.killpg(other.pid, 9)
        other.wait()
