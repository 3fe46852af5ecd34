"""cuda-gdb's kernel listings (``--gpu-kernels``): the parser, the pasted-text format, the
``gpu-kernel-never-ends`` rule and the live reader's notes when cuda-gdb is missing or fails.

The first listings here are CONSTRUCTED: built from cuda-gdb's own source for the table
(``cuda-commands.c``: the headers, right-aligned columns each followed by one space, Kernel/Dev/Grid
columns only as wide as their headers, "Active (preempted)", "No CUDA kernels.") with the kernel
names the fixtures launch (``torch.cuda._sleep``'s ``at::cuda::spin_kernel``, NCCL 2.28's
``ncclDevKernel_*``).  The tests after ``KERNELS`` read real captures (tests/data/gpu_kernels/: one H200 and
2x H200, a refused attach among them); tests/unit/test_gpu_kernels_2gpu.py re-checks whole ``--job
--gpu-kernels`` reports of 2x H200.
The host side is real: the ranks' stacks of tests/data/gpu_job/straggler.job.json (H100, NCCL).
"""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path
from typing import List, Optional, Tuple

from hanganalyze.acquire import cudakernels
from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze import gpurules
from hanganalyze.render.gpuview import gpu_lines
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.cudakernels import CudaKernels, KernelSample

DATA = Path(__file__).resolve().parent.parent / "data" / "gpu_job"

DEVICES = ("  Dev PCI Bus/Dev ID        Name Description SM Type SMs Warps/SM Lanes/Warp Max Regs/Lane"
           "                    Active SMs Mask \n"
           "*   0        19:00.0 NVIDIA H200       GH100   sm_90 132       64         32           255"
           " 0x000000000000000000000000000000001 \n")
HEADER = ("  Kernel Parent Dev Grid Status                           SMs Mask GridDim BlockDim Invocation"
          "                                        \n")
SPIN = ("*      0      -   0  {grid} Active 0x000000000000000000000000000000001 (1,1,1)  (1,1,1) "
        "at::cuda::(anonymous namespace)::spin_kernel(cycles=4611686018427387904) \n")
NCCL = ("*      0      -   0 {grid} Active 0x000000000000000000000000000000003 (2,1,1) (640,1,1) "
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(args=...) \n")


def _session(pid: int, body: str) -> str:
    """A constructed ``cuda-gdb -batch -p PID -ex 'info cuda devices' -ex 'info cuda kernels'`` output."""
    return ("[Thread debugging using libthread_db enabled]\n0x00007f3c in __futex_abstimed_wait_common () "
            "from /lib/x86_64-linux-gnu/libc.so.6\n" + DEVICES + body + "[Inferior 1 (process %d) detached]\n" % pid)


def test_rows_are_read_by_shape():
    lines = (HEADER + SPIN.format(grid=517) + "       1      -   0 123456 Active (preempted) 0x0000000000000002 "
             "(64,2,1) (128,1,1) void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
             "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)() \n"
             ).splitlines()
    kernels, seen = cudakernels.parse_kernels(lines)
    assert seen and [k.grid for k in kernels] == [517, 123456]  # a 6-digit grid id overflows its column
    spin, fill = kernels
    assert spin.name == "at::cuda::(anonymous namespace)::spin_kernel" and spin.short == "spin_kernel"
    assert spin.parent is None and spin.device == 0 and spin.status == "Active" and not spin.nccl
    assert fill.status == "Active (preempted)" and fill.grid_dim == "(64,2,1)" and fill.block_dim == "(128,1,1)"
    assert fill.short == "vectorized_elementwise_kernel" and fill.name.startswith("at::native::vectorized")
    nccl, _ = cudakernels.parse_kernels((HEADER + NCCL.format(grid=88)).splitlines())
    assert nccl[0].nccl and nccl[0].short == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def test_no_kernels_and_no_table():
    assert cudakernels.parse_kernels(["No CUDA kernels."]) == ([], True)
    assert cudakernels.parse_kernels(["ptrace: Operation not permitted."]) == ([], False)
    # a row shape outside a table is not a kernel
    assert cudakernels.parse_kernels(SPIN.format(grid=5).splitlines()) == ([], False)


def test_devices_table():
    (d,) = cudakernels.parse_devices(DEVICES.splitlines())
    assert (d.device, d.pci_bus, d.name, d.description, d.sm_type, d.sms) == (0, "19:00.0", "NVIDIA H200", "GH100",
                                                                            "sm_90", 132)


def test_a_failed_attach_is_a_sample_with_its_reason():
    sample, devices = cudakernels.sample_of("ptrace: Operation not permitted.\n", 0.4, None)
    assert sample.error == "not allowed to attach (ptrace)" and not devices and sample.attach_s == 0.4
    sample, _ = cudakernels.sample_of(_session(7, "No CUDA kernels.\n"), 9.5, None)
    assert sample.error is None and sample.kernels == []


def test_pasted_listings_are_an_input():
    text = "(cuda-gdb) info cuda kernels\n" + HEADER + SPIN.format(grid=517) + "(cuda-gdb) info cuda kernels\n" + \
        HEADER + SPIN.format(grid=517)
    (p,) = parse_text(text).processes
    ck = p.cuda_kernels
    assert ck is not None and ck.source == "text" and len(ck.samples) == 2
    assert [k.short for k in ck.persistent()] == ["spin_kernel"]
    assert "parsed as cuda-gdb info cuda kernels" in p.notes
    back = CudaKernels.from_dict(json.loads(json.dumps(ck.to_dict())))
    assert back == ck


def test_a_cuda_gdb_session_gives_stacks_and_kernels():
    text = ("(cuda-gdb) bt\n#0  0x00007f3c in __futex_abstimed_wait_common () from /lib/x86_64-linux-gnu/libc.so.6\n"
            "#1  0x00007f3d in cudaStreamSynchronize () from /usr/lib/libcudart.so.12\n"
            "#2  0x00007f3e in at::native::_local_scalar_dense_cuda () from /usr/lib/libtorch_cuda.so\n"
            "(cuda-gdb) info cuda kernels\n" + HEADER + SPIN.format(grid=9))
    (p,) = parse_text(text).processes
    assert p.threads and p.cuda_kernels is not None and p.cuda_kernels.samples[0].kernels[0].grid == 9


def _job() -> Snapshot:
    """The real straggler job's two ranks; rank 0 waits in the device sync after all_reduce."""
    snap = Snapshot.from_dict(json.loads((DATA / "straggler.job.json").read_text(encoding="utf-8")))
    snap.job = None
    snap.findings = []
    return snap


def _listings(*grids_names: List[Tuple[int, str]], dt: float = 11.0) -> CudaKernels:
    """One listing per argument, each a list of (grid, kernel row template)."""
    ck = CudaKernels()
    for n, rows in enumerate(grids_names):
        text = _session(1, HEADER + "".join(tpl.format(grid=g) for g, tpl in rows) if rows else "No CUDA kernels.\n")
        sample, devices = cudakernels.sample_of(text, 10.0, None)
        sample.t = n * dt
        ck.samples.append(sample)
        ck.devices = devices
    return ck


def _spin_job(spin: CudaKernels, peer: Optional[CudaKernels]) -> Snapshot:
    """The spin scenario's shape: both hosts wait in the device sync (rank 0's stack, twice); rank 1's
    GPU runs ``spin``'s listings, rank 0's ``peer``'s."""
    snap = _job()
    r0 = snap.processes[0]
    r1 = copy.deepcopy(r0)
    r1.rank, r1.pid = 1, 607
    r0.cuda_kernels, r1.cuda_kernels = peer, spin
    snap.processes = [r0, r1]
    return snap


def test_the_spinning_rank_is_named_not_the_nccl_peer():
    spin = _listings([(517, SPIN)], [(517, SPIN)])
    peer = _listings([(88, NCCL)], [(88, NCCL)])
    snap = _spin_job(spin, peer)
    (f,) = gpurules.gpu_kernel_never_ends(snap)
    assert f.ranks == [1] and f.severity == "hang" and f.confidence == 0.85
    assert "spin_kernel (device 0, grid 517)" in f.summary and "over 11.0 s" in f.summary
    assert "does not finish" in f.summary and "rank 0 runs an NCCL kernel" in f.summary
    assert f.evidence[0].rank == 1 and f.evidence[0].rule == "cuda-gdb"
    lines = gpu_lines(snap)
    assert any("rank 1: 2 cuda-gdb listings over 11.0 s" in ln for ln in lines)
    assert any("spin_kernel (in all 2 listings)" in ln for ln in lines)
    assert any("[NCCL]" in ln for ln in lines)
    # the JSON keeps the listings per process
    back = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert back.processes[1].cuda_kernels == spin


def test_near_misses_accuse_nobody():
    # every rank in an NCCL kernel: they wait for a peer, none is the culprit
    assert gpurules.gpu_kernel_never_ends(_spin_job(_listings([(88, NCCL)], [(88, NCCL)]),
                                                    _listings([(90, NCCL)], [(90, NCCL)]))) == []
    # a healthy loop: a new launch in each listing
    assert gpurules.gpu_kernel_never_ends(_spin_job(_listings([(517, SPIN)], [(530, SPIN)]),
                                                    _listings([(88, NCCL)], [(99, NCCL)]))) == []
    # the spinning kernel on a rank whose host does not wait for it (straggler's rank 1 sleeps)
    snap = _job()
    snap.processes[1].cuda_kernels = _listings([(517, SPIN)], [(517, SPIN)])
    assert gpurules.gpu_kernel_never_ends(snap) == []
    # no listing at all, or only failed ones
    assert gpurules.gpu_kernel_never_ends(_job()) == []
    failed = CudaKernels(samples=[KernelSample(error="cuda-gdb timed out after 90 s")])
    assert gpurules.gpu_kernel_never_ends(_spin_job(failed, None)) == []


def test_one_listing_makes_no_claim_over_time():
    snap = _spin_job(_listings([(517, SPIN)]), _listings([(88, NCCL)]))
    (f,) = gpurules.gpu_kernel_never_ends(snap)
    assert f.ranks == [1] and f.confidence == 0.5
    assert "one listing is one instant" in f.summary and "does not finish" not in f.summary
    # two listings too close together are no claim over time either
    (f,) = gpurules.gpu_kernel_never_ends(_spin_job(_listings([(517, SPIN)], [(517, SPIN)], dt=0.2), None))
    assert f.confidence == 0.5 and "over" not in f.summary.split(":")[0]


def test_read_kernels_joins_listings_to_ranks_by_pid():
    snap = _spin_job(None, None)  # type: ignore[arg-type]
    texts = {606: _session(606, HEADER + NCCL.format(grid=88)), 607: _session(607, HEADER + SPIN.format(grid=517))}
    calls: List[int] = []

    def attach(path: str, pid: int) -> Tuple[str, float, Optional[str]]:
        calls.append(pid)
        return texts[pid], 0.01, None

    notes = cudakernels.read_kernels(snap, cuda_gdb="sh", samples=2, interval=0.0, attach=attach)
    assert sorted(calls) == [606, 606, 607, 607]
    assert [len(p.cuda_kernels.samples) for p in snap.processes] == [2, 2]
    assert snap.processes[1].cuda_kernels.persistent()[0].short == "spin_kernel"
    assert snap.processes[1].cuda_kernels.devices[0].pci_bus == "19:00.0"
    (note,) = notes
    assert note.startswith("GPU kernels: cuda-gdb attached 4 time(s) to 2 process(es), 0.0-0.0 s per attach")


def test_cuda_gdb_missing_or_failing_is_one_line(tmp_path, monkeypatch):
    snap = _spin_job(None, None)  # type: ignore[arg-type]
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cudakernels.read_kernels(snap, cuda_gdb="cuda-gdb") == [
        "GPU kernels: not read (cuda-gdb not found on PATH; --gdb PATH names another)"]
    assert all(p.cuda_kernels is None for p in snap.processes)
    # a cuda-gdb that runs and cannot attach (a real process, as a container without ptrace leaves it)
    fake = tmp_path / "cuda-gdb"
    fake.write_text("#!/bin/sh\necho 'ptrace: Operation not permitted.'\nexit 1\n", encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s%s%s" % (tmp_path, os.pathsep, "/usr/bin:/bin"))
    snap.processes[0].pid, snap.processes[1].pid = os.getpid(), os.getppid()  # live pids (the SIGCONT guard)
    (note,) = cudakernels.read_kernels(snap, samples=1)
    assert "attached 2 time(s)" in note and note.endswith("failed: not allowed to attach (ptrace)")
    assert gpurules.gpu_kernel_never_ends(snap) == []
    assert any(ln.endswith("kernels not listed (not allowed to attach (ptrace))") for ln in gpu_lines(snap))


def test_a_real_pasted_listing():
    """A REAL capture (tests/data/realworld/k2, an older cuda-gdb: 8-bit SMs mask, an 8-digit grid id
    past its column): the NCCL kernel is read, and its row stays the known log line it was."""
    text = (DATA.parent / "realworld" / "k2" / "snowfall-pr71-1.txt").read_text(encoding="utf-8")
    (p,) = parse_text(text).processes
    (k,) = p.cuda_kernels.samples[0].kernels
    assert (k.kernel, k.device, k.grid, k.status, k.sms_mask) == (0, 0, 52162520, "Active", "0x00000001")
    assert k.nccl and k.short == "ncclReduceRingLLKernel_sum_f64" and k.block_dim == "(64,1,1)"
    assert any("ncclReduceRingLLKernel_sum_f64()" in m for m in p.messages)
    # the same list with the team's own kernel: an input now (it used to be refused as an unknown log)
    (q,) = parse_text(text.replace("ncclReduceRingLLKernel_sum_f64", "my_reduce_kernel")).processes
    assert not q.cuda_kernels.samples[0].kernels[0].nccl and not q.threads


KERNELS = DATA.parent / "gpu_kernels"


def _real(*names: str) -> CudaKernels:
    """REAL cuda-gdb outputs (tests/data/gpu_kernels/README.md), one listing each, 13 s apart."""
    ck = CudaKernels()
    for n, name in enumerate(names):
        sample, devices = cudakernels.sample_of((KERNELS / name).read_text(encoding="utf-8"), 12.0, None)
        sample.t = 13.0 * n
        ck.samples.append(sample)
        ck.devices = ck.devices or devices
    return ck


def test_real_listings_of_the_spin_job():
    rank0 = _real("spin.rank0.a.txt", "spin.rank0.b.txt")
    rank1 = _real("spin.rank1.a.txt", "spin.rank1.b.txt")
    (d,) = rank0.devices
    assert (d.pci_bus, d.name, d.description, d.sm_type, d.sms) == ("00:06.0", "NVIDIA H200", "GH100GL-A", "sm_90", 132)
    (k0,) = rank0.persistent()
    assert k0.nccl and k0.name == "ncclDevKernel_AllReduce_Sum_f32_RING_LL" and k0.block_dim == "(256,1,1)"
    (k1,) = rank1.persistent()
    assert k1.name == "at::cuda::(anonymous namespace)::spin_kernel" and k1.short == "spin_kernel" and not k1.nccl
    (f,) = gpurules.gpu_kernel_never_ends(_spin_job(rank1, rank0))
    assert f.ranks == [1] and f.confidence == 0.85 and "spin_kernel (device 0, grid 9)" in f.summary
    assert "the GPU of rank 0 runs an NCCL kernel" in f.summary


def test_real_listings_of_the_healthy_job():
    lists = [_real("healthy.rank0.a.txt", "healthy.rank0.b.txt"), _real("healthy.rank1.a.txt", "healthy.rank1.b.txt")]
    assert all(ck.listed() and not ck.persistent() for ck in lists)
    snap = _spin_job(lists[1], lists[0])
    assert gpurules.gpu_kernel_never_ends(snap) == []
    assert any(ln.endswith("2 cuda-gdb listings over 13.0 s: no active kernel") for ln in gpu_lines(snap))


def test_whole_real_sessions_read_as_listings():
    """Whole cuda-gdb sessions (LWP lines, blocks, threads, the focus line, bt): the kernels table is found."""
    got = {}
    for name in ("session.spin.rank0.s1.txt", "session.spin.rank0.s2.txt", "session.spin.rank1.s1.txt",
                 "session.healthy.rank0.s1.txt"):
        sample, devices = cudakernels.sample_of((KERNELS / name).read_text(encoding="utf-8"), 12.0, None)
        assert devices and devices[0].name == "NVIDIA H200", name
        got[name] = [k.short for k in sample.kernels]
    assert got["session.spin.rank1.s1.txt"] == ["spin_kernel"]
    assert got["session.spin.rank0.s1.txt"] == got["session.spin.rank0.s2.txt"] == \
        ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert got["session.healthy.rank0.s1.txt"] == []


def test_the_kernel_finding_supersedes_busy_host_waits_for_its_rank_only():
    """Both ranks' hosts wait on busy GPUs: the spinning rank's one-reading 'busy' finding gives way to the
    kernel named over time (gpu_busy_host_waits leaves it out), the NCCL peer keeps its own."""
    from hanganalyze.analyze.registry import run_report_rules
    from hanganalyze_gdbext.model.gpustate import Gpu, GpuProcess, GpuState

    snap = _spin_job(_listings([(517, SPIN)], [(517, SPIN)]), _listings([(88, NCCL)], [(88, NCCL)]))
    gpus = [Gpu(index=i, bus_id="00000000:0%d:00.0" % i, util_gpu=100, util_samples=[100, 100, 100],
                processes=[GpuProcess(pid=p.pid)]) for i, p in enumerate(snap.processes)]
    snap.gpu = GpuState(gpus=gpus, samples=3)
    busy = gpurules.gpu_busy_host_waits(snap)
    assert sorted(r for f in busy for r in f.ranks) == [0, 1]  # the near miss without the kernel rule
    run_report_rules(snap)
    got = [(f.signature, f.ranks) for f in snap.findings if f.signature.startswith("gpu-")]
    assert ("gpu-kernel-never-ends", [1]) in got
    assert [r for s, ranks in got if s == "gpu-busy-host-waits" for r in ranks] == [0], got


def test_the_rank_table_gpu_column_names_the_kernel():
    from hanganalyze.render.gpuview import gpu_cells

    snap = _spin_job(_listings([(517, SPIN)], [(517, SPIN)]), _listings([(88, NCCL)], [(88, NCCL)]))
    cells = gpu_cells(snap)
    assert cells[str(snap.processes[1].pid)] == "kernel spin_kernel"
    assert cells[str(snap.processes[0].pid)].startswith("kernel ncclDevKernel")
    snap.processes[0].cuda_kernels = None
    assert str(snap.processes[0].pid) not in gpu_cells(snap) or gpu_cells(snap)[str(snap.processes[0].pid)] == "?"


def test_two_gpu_listings_and_a_refused_attach():
    """2x H200 (scripts/gpu_kernels.sh): each rank's GPU is its own device; rank 1's runs spin_kernel on device 1,
    rank 0's the NCCL all-reduce on device 0.  With inferior calls refused cuda-gdb printed "No CUDA devices."
    then "No CUDA kernels." for the same spinning rank: that attach read nothing, it is no empty GPU."""
    rank1 = _real("twogpu.spin.rank1.standalone.txt", "twogpu.spin.rank1.standalone.txt")
    rank0 = _real("twogpu.spin.rank0.standalone.txt", "twogpu.spin.rank0.standalone.txt")
    assert [(k.device, k.short) for k in rank1.persistent()] == [(1, "spin_kernel")]
    assert [(k.device, k.nccl) for k in rank0.persistent()] == [(0, True)]
    (f,) = gpurules.gpu_kernel_never_ends(_spin_job(rank1, rank0))
    assert f.ranks == [1] and "spin_kernel (device 1, grid 9)" in f.summary
    sample, devices = cudakernels.sample_of((KERNELS / "nocall.spin.rank1.txt").read_text(encoding="utf-8"), 9.0, None)
    assert not sample.kernels and not devices
    assert sample.error.startswith("cuda-gdb could not reach the GPU side")
    refused = CudaKernels(samples=[sample, sample])
    assert not refused.listed() and not refused.persistent()
    assert gpurules.gpu_kernel_never_ends(_spin_job(refused, rank0)) == []


def test_no_inferior_call_is_refused_for_cuda_gdb_alone():
    """Every gdb session refuses inferior calls; cuda-gdb under --gpu-kernels must not (its attach calls the
    driver's routine), and it sends nothing but the two listings and detach."""
    argv = cudakernels.command("cuda-gdb", 42)
    assert "set may-call-functions off" not in argv and "set auto-load off" in argv and "-nx" in argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-ex"] == ["info cuda devices", "info cuda kernels",
                                                                        "detach"]
