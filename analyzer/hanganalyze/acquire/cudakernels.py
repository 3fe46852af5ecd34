"""The kernels each rank's GPUs run, read live with cuda-gdb (``--gpu-kernels``), and the parser of
cuda-gdb's ``info cuda devices`` / ``info cuda kernels`` tables (live output and pasted text alike).

Why cuda-gdb: the host stack of a rank that waits in ``.item()`` cannot say whether its GPU runs
the rank's own kernel that never ends or an NCCL kernel waiting for a peer; cuda-gdb lists the
grids active on the device.  Its cost is what gdb's is (it reads the symbols of every library of
a PyTorch process: seconds per attach), so it is opt-in, runs after the stacks are read (two
tracers cannot share a process), and each attach is timed; the report's notes give the cost.

How it runs (the same care as ``gdbsession.py``): ``cuda-gdb -nx -batch`` with auto-load off (no
script found beside a binary runs), debuginfod off, no pagination, ``-p PID`` and the two
``info`` commands, then detach; a hard timeout per attach kills its process group, and a target
left stopped gets SIGCONT.  Nothing is dumped; cuda-gdb's attach itself calls the CUDA driver's debugger-attach
routine in the target (the one code run in a target, only under ``--gpu-kernels``), which starts its
helper in the target (a thread and a short-lived child, as its output shows).  Ranks on
a host are read in parallel (bounded), ranks of one GPU included.  ``SAMPLES`` rounds
``INTERVAL_S`` apart: the same grid in every round is a kernel that did not end in that time.
A listing is the moment the attach completes (11-13 s on an H200, the host stopped meanwhile): the
work a healthy rank queued drains in that time and it shows no kernel; a kernel that never ends stays.

What cuda-gdb prints (its source, ``cuda-commands.c``): a table whose right-aligned columns are
``Kernel Parent Dev Grid Status SMs Mask GridDim BlockDim Invocation`` after a current-focus
column ("*"), each field followed by one space; the Kernel, Dev and Grid columns are as wide as
their headers, so a long grid id shifts its row: rows are read by their shapes, not by position.
"No CUDA kernels." when none is active.  Devices: ``Dev PCI Bus/Dev ID Name Description SM Type
SMs Warps/SM Lanes/Warp Max Regs/Lane Active SMs Mask``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from hanganalyze.acquire.procfacts import resume_if_left_stopped, state_letter
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.cudakernels import CudaDevice, CudaKernel, CudaKernels, KernelSample

#: Listings per process, and seconds from the end of one round to the start of the next.
SAMPLES = 2
INTERVAL_S = 1.0
#: Seconds one attach may take in all (gdb reads the symbols of ~1 GB of libraries first).
ATTACH_TIMEOUT_S = 90.0
#: With this environment variable naming a folder, each attach's raw output is kept there
#: (pid<PID>-<round>.txt): real captures for the tests, from the device script.
RAW_DIR_ENV = "HANGANALYZE_CUDA_GDB_RAW"

KERNELS_HEADER = re.compile(r"^\s*Kernel\s+Parent\s+Dev\s+Grid\s+Status\s+SMs Mask\s+GridDim\s+BlockDim\s+Invocation\b")
DEVICES_HEADER = re.compile(r"^\s*Dev\s+PCI Bus/Dev ID\s+Name\s+Description\s+SM Type\s+SMs\b")
NO_KERNELS = re.compile(r"^\s*No CUDA kernels\.")
NO_DEVICES = re.compile(r"^\s*No CUDA devices\.", re.M)
_STATUS = r"Invalid|Pending|Active \(preempted\)|Active|Sleeping|Terminated|Undetermined"
_ROW = re.compile(r"^(?P<cur>\*)?\s*(?P<kernel>\d+)\s+(?P<parent>\d+|-)\s+(?P<dev>\d+)\s+(?P<grid>-?\d+)\s+"
                  r"(?P<status>" + _STATUS + r")\s+(?P<sms>0x[0-9a-fA-F]+|\S+)\s+(?P<gdim>\(\d+,\d+,\d+\))\s+"
                  r"(?P<bdim>\(\d+,\d+,\d+\))\s+(?P<inv>\S.*?)\s*$")
_DEV_ROW = re.compile(r"^(?P<cur>\*)?\s*(?P<dev>\d+)\s+(?P<pci>[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)\s+(?P<rest>.*?)\s*$")
#: What a failed attach says, first match wins (the note's words).
_FAILURES = (
    (re.compile(r"Cannot call functions in the program"),
     "cuda-gdb could not reach the GPU side: its attach must call the CUDA driver's routine in the process"),
    (re.compile(r"^\s*No CUDA devices\.", re.M), "cuda-gdb sees no CUDA device in this process"),
    (re.compile(r"ptrace: Operation not permitted|not permitted", re.I), "not allowed to attach (ptrace)"),
    (re.compile(r"No such process|process \d+ .*does not exist", re.I), "the process is gone"),
    (re.compile(r"cuda-gdb .*(?:not supported|cannot be used)|Error: .*CUDA", re.I), None),
)


def function_name(invocation: str) -> str:
    """The function of an invocation: "void ns::k<int>(long)(cycles=5)" -> "ns::k<int>" (no return
    type, no parameter list, no arguments)."""
    anon = "(anonymous namespace)"
    s = invocation.strip().replace(anon, "\x00")  # its parentheses are no parameter list
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            cut = i
            break
    name = s[:cut].strip()
    depth = 0
    for i, ch in enumerate(name):  # a return type before the name ("void k<int, 1>"): the first word
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == " " and depth == 0:
            if name[:i].isidentifier() and name[i + 1:].strip():
                name = name[i + 1:].strip()
            break
    return (name or s).replace("\x00", anon)


def parse_kernels(lines: Sequence[str]) -> Tuple[List[CudaKernel], bool]:
    """(the rows of every ``info cuda kernels`` table in ``lines``, whether a table or "No CUDA
    kernels." was there at all)."""
    out: List[CudaKernel] = []
    seen = False
    in_table = False
    for raw in lines:
        line = raw.rstrip("\n")
        if KERNELS_HEADER.match(line):
            seen = in_table = True
            continue
        if NO_KERNELS.match(line):
            seen = True
            in_table = False
            continue
        if not in_table:
            continue
        m = _ROW.match(line)
        if m is None:
            in_table = False  # the table ends at the first line that is not a row
            continue
        inv = m.group("inv")
        out.append(CudaKernel(kernel=int(m.group("kernel")),
                              parent=None if m.group("parent") == "-" else int(m.group("parent")),
                              device=int(m.group("dev")), grid=int(m.group("grid")), status=m.group("status"),
                              sms_mask=m.group("sms"), grid_dim=m.group("gdim"), block_dim=m.group("bdim"),
                              invocation=inv, name=function_name(inv)))
    return out, seen


def parse_devices(lines: Sequence[str]) -> List[CudaDevice]:
    """The rows of an ``info cuda devices`` table: read from the right (the name may hold spaces)."""
    out: List[CudaDevice] = []
    in_table = False
    for line in lines:
        if DEVICES_HEADER.match(line):
            in_table = True
            continue
        m = _DEV_ROW.match(line) if in_table else None
        if m is None:
            in_table = False
            continue
        words = m.group("rest").split()
        if len(words) < 7 or not all(w.isdigit() for w in words[-5:-1]):
            continue
        out.append(CudaDevice(device=int(m.group("dev")), pci_bus=m.group("pci").lower(),
                              name=" ".join(words[:-7]) or words[-7], description=words[-7] if len(words) > 7 else "",
                              sm_type=words[-6], sms=int(words[-5])))
    return out


def looks_like(lines: Sequence[str]) -> bool:
    """Whether the lines hold an ``info cuda kernels`` table (its header)."""
    return any(KERNELS_HEADER.match(ln) for ln in lines)


# ---- live -----------------------------------------------------------------------------------

def command(cuda_gdb: str, pid: int) -> List[str]:
    """The cuda-gdb command line of one attach."""
    settings = ("set auto-load off", "set debuginfod enabled off", "set pagination off", "set width 0",
                "set confirm off", "set print thread-events off")
    # No "set may-call-functions off" here, unlike every other gdb session: cuda-gdb reaches a live
    # process's GPU side by calling the CUDA driver's debugger-attach routine in it, and refused that
    # call it prints "No CUDA devices." for a process that runs kernels (2x H200, cuda-gdb 13:
    # tests/data/gpu_kernels/nocall.*).  That call is the one code run in a target, and only under
    # --gpu-kernels, which says so; the commands sent are these two listings and detach.
    argv = [cuda_gdb, "-nx", "-batch"]  # (no --cuda-use-lockfile: off by default since 12.0, refused by 13.x)
    for s in settings:
        argv += ["-iex", s]
    argv += ["-p", str(pid), "-ex", "info cuda devices", "-ex", "info cuda kernels", "-ex", "detach"]
    return argv


def _failure(text: str) -> str:
    for rx, words in _FAILURES:
        m = rx.search(text)
        if m:
            return words or m.group(0).strip()
    last = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return ("cuda-gdb listed no kernels table: %s" % last[-1][:160]) if last else "cuda-gdb printed nothing"


def attach_once(cuda_gdb: str, pid: int, timeout: float = ATTACH_TIMEOUT_S) -> Tuple[str, float, Optional[str]]:
    """(cuda-gdb's output, seconds it ran, why it failed or None) for one attach-list-detach."""
    before = state_letter(pid)
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(command(cuda_gdb, pid), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return "", 0.0, "cuda-gdb could not start: %s" % e
    try:
        out, _ = p.communicate(timeout=timeout)
        error = None
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, _ = p.communicate()
        error = "cuda-gdb timed out after %.0f s" % timeout
    finally:
        resume_if_left_stopped(pid, before)
    text = out.decode("utf-8", "replace") if out else ""
    return text, time.monotonic() - t0, error


def sample_of(text: str, seconds: float, error: Optional[str]) -> Tuple[KernelSample, List[CudaDevice]]:
    """One attach's output as a sample (its error when it has no kernels table)."""
    lines = text.splitlines()
    kernels, seen = parse_kernels(lines)
    if error is None and (not seen or NO_DEVICES.search(text)):  # "No CUDA kernels." after no device: unread
        error = _failure(text)
    return KernelSample(kernels=kernels, attach_s=round(seconds, 3), error=error), parse_devices(lines)


#: cuda-gdb processes at once at most (each holds the symbols of the rank's libraries: ~1 GB).
MAX_PARALLEL = 8


def _groups(pids: Sequence[int]) -> List[List[int]]:
    """The pids dealt into at most ``MAX_PARALLEL`` (and CPU count) groups, read at the same time.  Two
    ranks on one GPU may be attached at once: on one H200 with cuda-gdb 13 both listings came back
    (tests/data/gpu_kernels)."""
    n = max(1, min(len(pids), os.cpu_count() or 1, MAX_PARALLEL))
    return [list(pids[i::n]) for i in range(n)]


Attach = Callable[[str, int], Tuple[str, float, Optional[str]]]


def read_kernels(snapshot: Snapshot, cuda_gdb: str = "cuda-gdb", samples: int = SAMPLES,
                 interval: float = INTERVAL_S, attach: Attach = attach_once) -> List[str]:
    """Attach cuda-gdb to every live rank of ``snapshot`` ``samples`` times and keep the listings on
    ``Process.cuda_kernels``; the notes for the report (the cost; one line when cuda-gdb is missing)."""
    procs = {p.pid: p for p in snapshot.processes if p.pid is not None and p.error is None}
    if not procs:
        return []
    path = shutil.which(cuda_gdb)
    if path is None:
        return ["GPU kernels: not read (%s not found on PATH; --gdb PATH names another)" % cuda_gdb]
    raw_dir = os.environ.get(RAW_DIR_ENV)
    got: Dict[int, CudaKernels] = {pid: CudaKernels() for pid in procs}
    first: List[float] = []
    lock = threading.Lock()

    def read_group(group: List[int], rnd: int) -> None:
        for pid in group:
            text, secs, err = attach(path, pid)
            done = time.monotonic()
            sample, devices = sample_of(text, secs, err)
            with lock:
                if not first:
                    first.append(done)
                sample.t = round(done - first[0], 3)
                got[pid].samples.append(sample)
                if devices and not got[pid].devices:
                    got[pid].devices = devices
            if raw_dir:
                _keep_raw(raw_dir, pid, rnd, text)

    t0 = time.monotonic()
    groups = _groups(list(procs))
    for rnd in range(max(1, samples)):
        if rnd:
            time.sleep(interval)
        threads = [threading.Thread(target=read_group, args=(g, rnd), daemon=True) for g in groups]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.monotonic() - t0
    for pid, ck in got.items():
        procs[pid].cuda_kernels = ck
    return [cost_note(list(got.values()), wall)]


def _keep_raw(folder: str, pid: int, rnd: int, text: str) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "pid%d-%d.txt" % (pid, rnd)), "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        pass  # a capture aid only


def cost_note(reads: Sequence[CudaKernels], wall: float) -> str:
    """The cost line: attaches, seconds per attach, the wall time, and the failures in one line."""
    secs = [s.attach_s for ck in reads for s in ck.samples if s.attach_s is not None]
    errors = sorted({s.error for ck in reads for s in ck.samples if s.error})
    per = ("%.1f-%.1f s per attach" % (min(secs), max(secs))) if secs else "no attach timed"
    line = "GPU kernels: cuda-gdb attached %d time(s) to %d process(es), %s, %.1f s in all" % (
        len(secs), len(reads), per, wall)
    if errors:
        line += "; failed: %s" % "; ".join(errors[:3])
    return line
