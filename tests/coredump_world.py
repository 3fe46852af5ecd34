"""A private systemd-coredump world for the ``--coredumpctl`` tests: the real systemd-journald,
the real systemd-coredump (socket-activated by systemd's own ``systemd-socket-activate``, as
systemd-coredump.socket does) and the real coredumpctl, in a private mount namespace so that
nothing of the machine's /run/systemd, /run/log or /var/lib/systemd/coredump is touched.

Run as root inside ``unshare -m --propagation private``::

    python3 tests/coredump_world.py PLAN.json OUTDIR

The plan is a list of steps, run in order:

* ``{"crash": ARGV, "signal": 6, "name": N}``: start ARGV (a fixture that prints READY and hangs),
  take its core with gcore, and hand that core to systemd-coredump exactly as the kernel does
  (``|/lib/systemd/systemd-coredump %P %u %g %s %t %c %h``, core on stdin) while the process
  still runs (systemd-coredump reads its /proc entries); wait until coredumpctl lists it.
  OUTDIR/N.pid gets the pid.
* ``{"run": ARGV, "name": N, "env": {...}}``: run ARGV; OUTDIR/N.out, N.err, N.rc.  ``{PID:name}``
  in ARGV is replaced by that crash's pid.
* ``{"shell": "rm /var/lib/systemd/coredump/*"}``: a shell command (for storage that went away).
* ``{"storage": "journal"}``: systemd-coredump stores the next cores in the journal itself
  (a coredump.conf bind-mounted over /etc/systemd/coredump.conf in this namespace only).

Only the kernel's part is done by hand (the core comes from gcore, not from a dying process: the
machine's core_pattern is global and not ours to change); every systemd program is the real one.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

COREDUMP = "/lib/systemd/systemd-coredump"
JOURNALD = "/lib/systemd/systemd-journald"
SOCKET = "/run/systemd/coredump"


def available() -> str:
    """"" when this machine can run the world, else why not."""
    if os.geteuid() != 0:
        return "needs root (mount namespace, journald)"
    for tool in (COREDUMP, JOURNALD, "/usr/bin/coredumpctl", "/usr/bin/systemd-socket-activate", "/usr/bin/unshare"):
        if not os.path.exists(tool):
            return "%s is not installed (apt-get install systemd-coredump)" % tool
    try:
        subprocess.run(["unshare", "-m", "true"], check=True, timeout=30, capture_output=True)
    except (OSError, subprocess.SubprocessError):
        return "unshare -m is not allowed here"
    return ""


def _mount_tmpfs(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", path], check=True)


def _wait_for(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for %s" % what)


def _listed(pid: int) -> bool:
    res = subprocess.run(["coredumpctl", "--no-pager", "-q", "--json=short", "list", "COREDUMP_PID=%d" % pid],
                         capture_output=True, timeout=30)
    return res.returncode == 0 and b'"pid":%d' % pid in res.stdout


def _start_ready(argv):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    buf = b""
    deadline = time.monotonic() + 30
    while b"READY" not in buf:
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("%r never got ready: %r" % (argv, buf[-500:]))
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            buf += os.read(proc.stdout.fileno(), 4096)
    time.sleep(0.3)
    return proc


def crash(argv, signo: int, out: Path, name: str) -> int:
    proc = _start_ready(argv)
    try:
        prefix = out / ("gcore-" + name)
        subprocess.run(["gcore", "-o", str(prefix), str(proc.pid)], check=True, capture_output=True, timeout=120)
        core = Path("%s.%d" % (prefix, proc.pid))
        with open(core, "rb") as f:
            # the kernel's argv for systemd-coredump (sysctl.d/50-coredump.conf): %P %u %g %s %t %c %h
            subprocess.run([COREDUMP, str(proc.pid), str(os.getuid()), str(os.getgid()), str(signo),
                            str(int(time.time())), "9223372036854775808", socket.gethostname()],
                           stdin=f, check=True, capture_output=True, timeout=120)
        core.unlink()
        _wait_for(lambda: _listed(proc.pid), 30, "coredumpctl to list pid %d" % proc.pid)
        (out / (name + ".pid")).write_text(str(proc.pid))
        return proc.pid
    finally:
        proc.kill()
        proc.wait()


def main(plan_path: str, outdir: str) -> int:
    out = Path(outdir)
    plan = json.loads(Path(plan_path).read_text())
    for path in ("/run/systemd", "/run/log", "/var/lib/systemd/coredump"):
        _mount_tmpfs(path)
    os.makedirs("/run/systemd/journal", exist_ok=True)
    logs = open(out / "services.log", "wb")
    services = [
        subprocess.Popen([JOURNALD], stdout=logs, stderr=logs),
        subprocess.Popen(["systemd-socket-activate", "--seqpacket", "--accept", "-l", SOCKET, COREDUMP],
                         stdout=logs, stderr=logs),
    ]
    pids = {}
    try:
        _wait_for(lambda: os.path.exists("/run/systemd/journal/socket") and os.path.exists(SOCKET), 30,
                  "journald and the coredump socket")
        for step in plan:
            if "crash" in step:
                pids[step["name"]] = crash(step["crash"], int(step.get("signal", 6)), out, step["name"])
            elif "storage" in step:
                conf = out / "coredump.conf"
                conf.write_text("[Coredump]\nStorage=%s\n" % step["storage"])
                subprocess.run(["mount", "--bind", str(conf), "/etc/systemd/coredump.conf"], check=True)
            elif "shell" in step:
                subprocess.run(step["shell"], shell=True, check=True, timeout=60)
            else:
                argv = list(step["run"])
                for k, v in pids.items():
                    argv = [a.replace("{PID:%s}" % k, str(v)) for a in argv]
                env = dict(os.environ, **step.get("env", {}))
                res = subprocess.run(argv, capture_output=True, timeout=600, env=env)
                name = step["name"]
                (out / (name + ".out")).write_bytes(res.stdout)
                (out / (name + ".err")).write_bytes(res.stderr)
                (out / (name + ".rc")).write_text(str(res.returncode))
    finally:
        for s in services:
            s.send_signal(signal.SIGTERM)
        for s in services:
            try:
                s.wait(timeout=10)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait()
        logs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
