"""A live process we may not attach to (issue 35): why, in one line with the fix for where the user
is, and what /proc shows without ptrace.

Containers and Kubernetes pods drop ``CAP_SYS_PTRACE`` by default, Ubuntu's Yama lets a process
attach only to its own children (``kernel.yama.ptrace_scope=1``), a seccomp filter can refuse the
``ptrace`` call, and a process can be traced by one tracer at a time (a py-spy or gdb left
attached).  The kernel says only EPERM; ``diagnose`` reads what decides it -- the target's
``TracerPid`` and ``Uid``, ``/proc/sys/kernel/yama/ptrace_scope``, our ``CapEff`` and ``Seccomp``
-- and names the cause and the fix (``docker run --cap-add=SYS_PTRACE``, ``kubectl debug
--profile=sysadmin --target=...``, ``sysctl kernel.yama.ptrace_scope=...``, the other tracer's pid).

``snapshot_without_ptrace`` then reports what needs no ptrace: each thread's name, state, kernel
wait channel and CPU time from ``/proc/PID/task`` (``procfs.thread_stats``), the command line and
rank identity where /proc shows them.  No stack: the report says so, and repeated samples
(``sampling.py`` reads this snapshot again) still tell stuck threads from spinning ones.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, Optional, Set

from hanganalyze.acquire.procfacts import complete_from_live, live_argv
from hanganalyze.acquire.procfs import thread_stats
from hanganalyze.acquire.ranks import read_proc_environ
from hanganalyze_gdbext.model import Process, Snapshot, Thread

#: CAP_SYS_PTRACE's bit in ``CapEff`` (linux/capability.h).
CAP_SYS_PTRACE = 19
#: What the degraded report says about every thread.
NO_STACK_NOTE = "no stack: ptrace not permitted (kernel state, wait channel and CPU from /proc only)"

#: pids whose reason was already written to stderr in this run (repeated samples read them again).
_SAID: Set[int] = set()


def _status(proc: Path, pid: str) -> Dict[str, str]:
    """``/proc/PID/status`` as a dict; {} when unreadable."""
    try:
        text = (proc / pid / "status").read_text(errors="replace")
    except OSError:
        return {}
    out: Dict[str, str] = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def where_we_run(proc: Path = Path("/proc"), root: Path = Path("/"), environ: Optional[Dict[str, str]] = None) -> str:
    """``kubernetes``, ``container`` or ``host``: which fix to give."""
    env = os.environ if environ is None else environ
    if env.get("KUBERNETES_SERVICE_HOST") or (root / "var/run/secrets/kubernetes.io").exists():
        return "kubernetes"
    cgroup = _read(proc / "1" / "cgroup") or ""
    if (root / ".dockerenv").exists() or (root / "run/.containerenv").exists() or env.get("container") \
            or any(w in cgroup for w in ("docker", "containerd", "kubepods", "libpod", "lxc")):
        return "container"
    return "host"


def _cap_fix(where: str, pid: int) -> str:
    if where == "kubernetes":
        return ("run it from a debug container that may trace: kubectl debug -it POD --profile=sysadmin "
                "--target=CONTAINER --image=IMAGE -- hanganalyze --pid %d (or add SYS_PTRACE to the pod's "
                "securityContext.capabilities)" % pid)
    if where == "container":
        return "start the container with docker run --cap-add=SYS_PTRACE (podman: the same), or run hanganalyze " \
               "on the host as root"
    return "run it as root (sudo hanganalyze --pid %d)" % pid


def diagnose(pid: int, proc: Path = Path("/proc"), root: Path = Path("/"),
             environ: Optional[Dict[str, str]] = None) -> str:
    """One line: why attaching to ``pid`` was refused, and the fix for where this runs."""
    target = _status(proc, str(pid))
    me = _status(proc, "self")
    where = where_we_run(proc, root, environ)
    tracer = target.get("TracerPid", "0")
    if tracer not in ("", "0"):
        name = _read(proc / tracer / "comm") or "?"
        return ("pid %d is already traced by pid %s (%s): one tracer at a time; detach it (quit that debugger or "
                "py-spy, or kill %s if it is stuck) and run hanganalyze again" % (pid, tracer, name, tracer))
    try:
        has_cap = bool(int(me.get("CapEff", "0"), 16) >> CAP_SYS_PTRACE & 1)
    except ValueError:
        has_cap = False
    scope_text = _read(proc / "sys" / "kernel" / "yama" / "ptrace_scope")
    scope = int(scope_text) if scope_text and scope_text.isdigit() else None
    uids = set(target.get("Uid", "").split())
    same_user = bool(uids) and uids == {str(os.geteuid())}
    if scope == 3:
        return ("kernel.yama.ptrace_scope=3: no process may attach to another until a reboot; set "
                "kernel.yama.ptrace_scope=1 (or 0) at boot (sysctl.d), or analyze a core (gcore cannot run either: "
                "kill -ABRT %d with core dumps on)" % pid)
    if not has_cap:
        if not same_user and uids:
            return ("pid %d belongs to uid %s and this process lacks CAP_SYS_PTRACE: %s, or as that user"
                    % (pid, sorted(uids)[0], _cap_fix(where, pid)))
        if scope == 2:
            return ("kernel.yama.ptrace_scope=2 lets only CAP_SYS_PTRACE attach, and this process lacks it: %s, "
                    "or sysctl kernel.yama.ptrace_scope=1" % _cap_fix(where, pid))
        if scope == 1:
            fix = _cap_fix(where, pid)
            if where == "host":
                fix += ", or allow it for now: sudo sysctl kernel.yama.ptrace_scope=0"
            return ("kernel.yama.ptrace_scope=1 lets a process attach only to its own children, and this "
                    "process lacks CAP_SYS_PTRACE: %s" % fix)
        if where != "host":
            return "this container lacks CAP_SYS_PTRACE: %s" % _cap_fix(where, pid)
    if me.get("Seccomp", "0") not in ("", "0"):
        fix = ("docker run --security-opt seccomp=unconfined (plus --cap-add=SYS_PTRACE)" if where == "container"
               else "a pod securityContext.seccompProfile of type Unconfined, or kubectl debug --profile=sysadmin"
               if where == "kubernetes" else "run it outside the sandbox")
        return "a seccomp filter on this process refuses ptrace (Seccomp: %s): %s" % (me.get("Seccomp"), fix)
    return ("the kernel refused ptrace (EPERM) with CAP_SYS_PTRACE=%s, Yama scope %s: a security module "
            "(AppArmor, SELinux) or a non-dumpable target (setuid, PR_SET_DUMPABLE 0) denies it; run as root on "
            "the host" % ("yes" if has_cap else "no", "absent" if scope is None else scope))


def snapshot_without_ptrace(pid: int) -> Snapshot:
    """What /proc shows of ``pid`` without ptrace: its threads (name, state, wait channel, CPU), no
    stacks; the reason and the fix (``diagnose``) head the report and go to stderr once."""
    reason = "cannot attach to pid %d: %s" % (pid, diagnose(pid))
    if pid not in _SAID:
        _SAID.add(pid)
        sys.stderr.write("hanganalyze: warning: %s; reporting /proc only (no stacks)\n" % reason)
        sys.stderr.flush()
    try:
        exe: Optional[str] = os.readlink("/proc/%d/exe" % pid)
    except OSError:
        exe = None
    proc = Process(source="live", pid=pid)
    for tid, st in sorted(thread_stats(pid).items()):
        comm = _read(Path("/proc/%d/task/%d/comm" % (pid, tid)))
        kernel = "kernel: state %s%s, %.2f s CPU so far" % (st.state, ", in %s" % st.wchan if st.wchan else "",
                                                             st.cpu_s)
        proc.threads.append(Thread(tid=tid, name=comm, os_name=comm, notes=[NO_STACK_NOTE, kernel]))
    complete_from_live(proc, pid, exe, live_argv(pid), read_proc_environ(pid))
    proc.no_stacks = reason
    snap = Snapshot(processes=[proc])
    snap.warnings.append(reason + "; what /proc shows is reported, without stacks (low confidence)")
    return snap
