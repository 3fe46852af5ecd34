"""Why attaching was refused, in one line with the fix for where hanganalyze runs (issue 35):
``noptrace.diagnose`` over a made-up /proc (the live cases -- no CAP_SYS_PTRACE, a second tracer --
are tests/integration/test_noptrace_live.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest

from hanganalyze.acquire import noptrace
from hanganalyze.render.view import headline
from hanganalyze_gdbext.model import Process, Snapshot, Thread

ALL_CAPS = "000001ffffffffff"
NO_PTRACE = "%016x" % (int(ALL_CAPS, 16) & ~(1 << noptrace.CAP_SYS_PTRACE))


def _proc(tmp_path: Path, scope: Optional[int], cap: str = ALL_CAPS, uid: Optional[int] = None, tracer: int = 0,
          seccomp: int = 0, cgroup: str = "0::/init.scope\n") -> Path:
    proc = tmp_path / "proc"
    uid = os.geteuid() if uid is None else uid
    (proc / "42").mkdir(parents=True)
    status = "Name:\tpython3\nTracerPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n" % ((tracer,) + (uid,) * 4)
    (proc / "42" / "status").write_text(status)
    (proc / "self").mkdir()
    (proc / "self" / "status").write_text("Name:\thanganalyze\nCapEff:\t%s\nSeccomp:\t%d\n" % (cap, seccomp))
    (proc / "1").mkdir()
    (proc / "1" / "cgroup").write_text(cgroup)
    if tracer:
        (proc / str(tracer)).mkdir()
        (proc / str(tracer) / "comm").write_text("py-spy\n")
    if scope is not None:
        (proc / "sys" / "kernel" / "yama").mkdir(parents=True)
        (proc / "sys" / "kernel" / "yama" / "ptrace_scope").write_text("%d\n" % scope)
    (tmp_path / "root").mkdir()
    return proc


def _say(tmp_path: Path, proc: Path, **env: str) -> str:
    line = noptrace.diagnose(42, proc=proc, root=tmp_path / "root", environ=env)
    assert "\n" not in line
    return line


def test_another_tracer_is_named_with_its_pid(tmp_path):
    line = _say(tmp_path, _proc(tmp_path, 1, tracer=777))
    assert "already traced by pid 777 (py-spy)" in line and "kill 777" in line


@pytest.mark.parametrize("where, env, cgroup, fix", [
    ("host", {}, "0::/user.slice\n", "sudo sysctl kernel.yama.ptrace_scope=0"),
    ("container", {}, "0::/docker/0123abcd\n", "docker run --cap-add=SYS_PTRACE"),
    ("kubernetes", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "0::/\n", "kubectl debug -it POD --profile=sysadmin "
                                                                      "--target=CONTAINER"),
])
def test_yama_scope_1_without_the_capability_gives_the_fix_for_where_it_runs(tmp_path, where, env, cgroup, fix):
    proc = _proc(tmp_path, 1, cap=NO_PTRACE, cgroup=cgroup)
    assert noptrace.where_we_run(proc, tmp_path / "root", env) == where
    line = _say(tmp_path, proc, **env)
    assert "kernel.yama.ptrace_scope=1" in line and "lacks CAP_SYS_PTRACE" in line and fix in line
    if where != "host":
        assert "sysctl" not in line  # a container cannot change the host's sysctl


def test_other_user_without_the_capability(tmp_path):
    line = _say(tmp_path, _proc(tmp_path, 0, cap=NO_PTRACE, uid=os.geteuid() + 1))
    assert "belongs to uid %d" % (os.geteuid() + 1) in line and "sudo hanganalyze --pid 42" in line


def test_container_without_yama_or_capability(tmp_path):
    line = _say(tmp_path, _proc(tmp_path, None, cap=NO_PTRACE, cgroup="0::/kubepods/burstable/pod1\n"))
    assert line.startswith("this container lacks CAP_SYS_PTRACE") and "--cap-add=SYS_PTRACE" in line


@pytest.mark.parametrize("scope, words", [
    (2, ["ptrace_scope=2 lets only CAP_SYS_PTRACE attach", "sysctl kernel.yama.ptrace_scope=1"]),
    (3, ["ptrace_scope=3", "until a reboot"]),
])
def test_admin_only_and_disabled_scopes(tmp_path, scope, words):
    line = _say(tmp_path, _proc(tmp_path, scope, cap=NO_PTRACE if scope == 2 else ALL_CAPS))
    assert all(w in line for w in words), line


def test_seccomp_when_nothing_else_explains_it(tmp_path):
    line = _say(tmp_path, _proc(tmp_path, 1, seccomp=2, cgroup="0::/docker/ab\n"))
    assert "seccomp filter" in line and "--security-opt seccomp=unconfined" in line


def test_nothing_found_names_the_remaining_suspects(tmp_path):
    line = _say(tmp_path, _proc(tmp_path, 0))
    assert "AppArmor" in line and "CAP_SYS_PTRACE=yes" in line and "Yama scope 0" in line


def test_a_report_without_stacks_says_so_in_its_headline():
    read = Snapshot(processes=[Process(source="live", pid=42, threads=[Thread(tid=42)])])
    assert headline(read) == "No known bug matched"
    read.processes[0].no_stacks = "cannot attach to pid 42: ..."
    assert headline(read).startswith("No stack read (ptrace not permitted)")
