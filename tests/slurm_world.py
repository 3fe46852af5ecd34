"""A private single-node Slurm cluster for the tests (issue 24): Debian's munge, slurmctld, slurmd,
started from a folder of their own and stopped afterwards, the machine's configuration untouched.

Everything lives in one folder: a fresh MUNGE key and socket (munged --key-file/--socket/...), a
slurm.conf naming that socket (AuthInfo), its own state and spool folders, pid and log files, and
free TCP ports (SlurmctldPort, SlurmdPort, SrunPortRange).  Clients reach it through SLURM_CONF.
No cgroups are needed (proctrack/linuxproc, task/none), so no namespace either.  The node is this
host (slurmd checks its name) with 8 CPUs declared (config_overrides): 4 ranks plus an
`srun --overlap` step on a machine of 2 cores.

    with SlurmCluster(tmp_path) as c:      # raises ClusterUnavailable (the reason) if it cannot start
        subprocess.run(["srun", "-n", "4", ...], env=c.env())
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib/slurm")


class ClusterUnavailable(RuntimeError):
    """Why the cluster cannot run here (the tests skip with it)."""


def _free_ports(n: int) -> List[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def missing_tools() -> List[str]:
    return [t for t in ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scancel") if shutil.which(t) is None]


class SlurmCluster:
    def __init__(self, root: Path):
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.pids: Dict[str, int] = {}

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.root / "slurm.conf")
        for k in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del env[k]  # a test run inside someone's allocation: not that cluster's job
        return env

    def _log(self, name: str) -> str:
        p = self.root / "log" / name
        return p.read_text(errors="replace")[-2000:] if p.exists() else "(no %s)" % p

    def start(self, timeout: float = 60.0) -> SlurmCluster:
        missing = missing_tools()
        if missing:
            raise ClusterUnavailable("%s not installed (apt-get install slurmctld slurmd slurm-client munge)"
                                     % ", ".join(missing))
        plugins = next((d for d in PLUGIN_DIRS if Path(d, "select_cons_tres.so").exists()), None)
        if plugins is None:
            raise ClusterUnavailable("no Slurm plugin folder with select_cons_tres.so in %s" % (PLUGIN_DIRS,))
        r = self.root
        for d in ("munge", "state", "spool", "log"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o700)  # munged refuses a key in a folder others can write
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = r / "munge" / "munge.sock"
        res = subprocess.run(["munged", "--force", "--key-file=%s" % key, "--socket=%s" % sock,
                              "--pid-file=%s" % (r / "munge" / "munged.pid"),
                              "--log-file=%s" % (r / "log" / "munged.log"),
                              "--seed-file=%s" % (r / "munge" / "munged.seed")],
                             capture_output=True, text=True, timeout=30)
        self._pid_from("munged", r / "munge" / "munged.pid", 10)
        if res.returncode != 0 or "munged" not in self.pids:
            raise ClusterUnavailable("munged did not start: %s %s" % (res.stderr.strip(), self._log("munged.log")))
        ctld, slurmd, lo = _free_ports(3)
        srun_lo = max(lo, 20000) if lo < 60000 else 20000
        conf = """\
ClusterName=hanganalyze
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SrunPortRange={srun_lo}-{srun_hi}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser={user}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
PluginDir={plugins}
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""".format(host=self.host, ctld=ctld, slurmd=slurmd, srun_lo=srun_lo, srun_hi=srun_lo + 200, sock=sock,
           user=subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip() or "root",
           r=r, plugins=plugins)
        (r / "slurm.conf").write_text(conf)
        env = self.env()
        for daemon, extra in (("slurmctld", ["-i"]), ("slurmd", [])):
            res = subprocess.run([daemon, *extra, "-f", str(r / "slurm.conf")], env=env, capture_output=True,
                                 text=True, timeout=60)
            self._pid_from(daemon, r / ("%s.pid" % daemon), 15)
            if res.returncode != 0 or daemon not in self.pids:
                self.stop()
                raise ClusterUnavailable("%s did not start: %s %s" % (daemon, res.stderr.strip(),
                                                                    self._log("%s.log" % daemon)))
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True,
                                   timeout=30).stdout.strip()
            if state in ("idle", "mixed", "allocated"):
                return self
            time.sleep(0.5)
        self.stop()
        raise ClusterUnavailable("the node did not come up (sinfo: %r): %s" % (state, self._log("slurmd.log")))

    def _pid_from(self, name: str, pidfile: Path, wait: float) -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                pid = int(pidfile.read_text().split()[0])
                os.kill(pid, 0)
                self.pids[name] = pid
                return
            except (OSError, ValueError, IndexError):
                time.sleep(0.1)

    def _stepds(self) -> List[int]:
        """This cluster's slurmstepd processes: forked by our slurmd, they carry its SLURM_CONF."""
        needle = b"\0SLURM_CONF=%s\0" % str(self.root / "slurm.conf").encode()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if Path("/proc", name, "comm").read_text().strip() != "slurmstepd":
                    continue
                if needle in b"\0" + Path("/proc", name, "environ").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
        return found

    def stop(self) -> None:
        """Cancel every job, then stop the daemons this cluster started (by their pid files) and the
        step daemons they left (a step whose tasks were killed can outlive slurmd)."""
        if "slurmctld" in self.pids:
            subprocess.run(["scancel", "--full", "-u", str(os.getuid())], env=self.env(), capture_output=True,
                           timeout=30)
        for name in ("slurmd", "slurmctld", "munged"):
            pid: Optional[int] = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
                for _ in range(100):
                    os.kill(pid, 0)
                    time.sleep(0.1)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self._stepds():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
