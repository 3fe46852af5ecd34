"""Linux kernel stacks of tasks that hang inside the kernel (tests/data/kstack/: real pastes of the
hung-task report and its variants): a task in D state waits where its kernel frames say, a GPU
driver's ioctl, page I/O, a kernel mutex.  Near misses: a Windows ``module!func+0x1a`` stack and
a gdb backtrace are no kernel stacks; ``? name`` rows (stale addresses) are no frames; libgomp's
own ``do_wait`` is no child wait."""

from __future__ import annotations

import pytest
from helpers import REPO, text_verdict

from hanganalyze.acquire.text import parse_text

DATA = REPO / "tests" / "data" / "kstack"


def _read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("name, wait, tid", [
    ("returnn-1480.txt", "gpu", 15277),  # dmesg -H: a rank inside NVIDIA's UVM ioctl
    ("k8s-device-plugin-77.txt", "gpu", 5403),  # kernel 4.4: nvidia_uvm under a mutex
    ("infiniswap-25.txt", "io", 5604),  # quoted and numbered by the poster: page I/O
    ("aiyprojects-raspbian-369.txt", "lock", 10),  # ARM's "(func) from [<addr>]" rows: a kernel mutex
])
def test_a_hung_tasks_kernel_stack_says_its_wait(db, name, wait, tid):
    snap, got = text_verdict(_read(name), db)
    assert got == wait
    finding = next(f for f in snap.findings if f.signature == "triage")
    assert tid in finding.triage.about


def test_stale_addresses_are_no_frames_and_modules_are_libraries():
    t = next(t for t in parse_text(_read("returnn-1480.txt")).processes[0].threads if t.tid == 15277)
    names = [f.function for f in t.frames]
    assert "__kmalloc" not in names and names[:2] == ["__schedule", "schedule"]
    assert {f.library for f in t.frames if f.function.startswith("uvm_")} == {"nvidia_uvm"}


def test_proc_pid_stack_alone():
    text = ("[<0>] futex_wait_queue_me+0xc4/0x120\n[<0>] futex_wait+0xe2/0x220\n[<0>] do_futex+0x1a9/0x9e0\n"
            "[<0>] __x64_sys_futex+0x13f/0x170\n[<0>] do_syscall_64+0x57/0x190\n")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames][:2] == ["futex_wait_queue_me", "futex_wait"]


def test_other_formats_with_offsets_are_no_kernel_stacks():
    windbg = ("00 0000004e`0fbff1b8 00007ffb`2d3e1c3e ntdll!NtWaitForSingleObject+0x14\n"
              "01 0000004e`0fbff1c0 00007ffb`0c2f8c7b KERNELBASE!WaitForSingleObjectEx+0x8e\n"
              "02 0000004e`0fbff260 00007ffb`0c2f8b6a python39!PyThread_acquire_lock_timed+0x6b\n")
    assert not any("kernel stack" in n for p in parse_text(windbg).processes for t in p.threads for n in t.notes)


def test_libgomps_do_wait_is_no_child_wait(db):
    text = ("Thread 15 (Thread 0x7f0c0904e700 (LWP 811)):\n"
            "#0  futex_wait (val=462856, addr=0x559b40b6b344) at config/linux/x86/futex.h:44\n"
            "#1  do_wait (addr=addr@entry=0x559b40b6b344, val=val@entry=462856) at config/linux/wait.h:67\n"
            "#2  0x00007f0cb754a6cc in gomp_team_barrier_wait_end (bar=0x559b40b6b340, state=462856) at bar.c:112\n"
            "#3  0x00007f0cb75486e1 in gomp_thread_start (xdata=<optimized out>) at team.c:124\n")
    assert text_verdict(text, db)[1] != "child"
