"""The kernels a process's GPUs run, as cuda-gdb's ``info cuda kernels`` shows them, sampled.

A host stack that waits in a device sync says only that the GPU has not finished.  Whether the GPU
runs the rank's own kernel that never ends (a custom kernel in an infinite loop) or an NCCL kernel
that waits for a peer, only the device says: cuda-gdb lists the grids that are active on the
device when it attaches.  One listing is one instant; the same grid (device, grid id and kernel
name: the grid id is the driver's, unique per launch on a device, where cuda-gdb's own "Kernel"
number restarts with each session) in every sample over several seconds is a kernel that did not
end in that time.

Read live by ``analyzer/hanganalyze/acquire/cudakernels.py`` (cuda-gdb attached per rank, then
detached) or from a pasted ``info cuda kernels`` output (``acquire/text/cudakernels.py``); kept on
``Process.cuda_kernels``.  Runs inside gdb too: standard library only, Python 3.8.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import List, Optional, Tuple

from .record import Record, recordclass

#: NCCL's device kernels (ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_..., older
#: ncclAllReduceRingLLKernel_...): a rank in one of them waits for its peers; never the culprit.
NCCL_KERNEL = re.compile(r"^nccl\w*", re.I)
#: Statuses of a grid that is on the device (cuda-gdb lists only those; "Active (preempted)" with
#: software preemption).
PRESENT = ("Active", "Active (preempted)", "Sleeping")


@recordclass
class CudaKernel(Record):
    """One row of ``info cuda kernels``."""

    kernel: Optional[int] = None  # cuda-gdb's number, per session
    parent: Optional[int] = None  # the parent kernel's number (dynamic parallelism); None: "-"
    device: Optional[int] = None
    grid: Optional[int] = None  # the driver's grid id: one per launch on the device
    status: str = ""
    sms_mask: Optional[str] = None
    grid_dim: Optional[str] = None  # "(132,1,1)"
    block_dim: Optional[str] = None
    #: The kernel's name as cuda-gdb wrote it, arguments included ("spin_kernel(cycles=...)").
    invocation: str = ""
    #: The function's name: no return type, no parameters ("at::cuda::spin_kernel").
    name: str = ""

    CONTRACT = ("device", "grid", "status", "name")

    @property
    def short(self) -> str:
        """The name without namespaces and template arguments, for a line of a report."""
        base = re.sub(r"<.*>", "", self.name)
        return base.rsplit("::", 1)[-1] or self.name

    @property
    def nccl(self) -> bool:
        return bool(NCCL_KERNEL.match(self.short))

    @property
    def key(self) -> Tuple[Optional[int], Optional[int], str]:
        """What makes two listings the same launch: device, grid id, name."""
        return (self.device, self.grid, self.name)


@recordclass
class CudaDevice(Record):
    """One row of ``info cuda devices``."""

    device: Optional[int] = None
    pci_bus: Optional[str] = None  # "3b:00.0" (bus:device.function, no domain)
    name: str = ""
    description: str = ""
    sm_type: str = ""
    sms: Optional[int] = None

    CONTRACT = ("device", "pci_bus")


@recordclass
class KernelSample(Record):
    """One listing: cuda-gdb attached, listed, detached (live), or one pasted table."""

    #: Seconds since the first sample's listing (0 for the first).
    t: float = 0.0
    kernels: List[CudaKernel] = field(default_factory=list)
    #: Seconds cuda-gdb ran for this sample (attach, list, detach): the cost of a sample.
    attach_s: Optional[float] = None
    #: Why this sample has no listing (cuda-gdb failed, timed out, the process was gone).
    error: Optional[str] = None

    CONTRACT = ("t", "kernels")


@recordclass
class CudaKernels(Record):
    """The kernel listings of one process."""

    samples: List[KernelSample] = field(default_factory=list)
    devices: List[CudaDevice] = field(default_factory=list)
    source: str = "cuda-gdb"  # "cuda-gdb" (live) or "text"

    CONTRACT = ("samples", "source")

    def listed(self) -> List[KernelSample]:
        """The samples that have a listing."""
        return [s for s in self.samples if s.error is None]

    def span(self) -> float:
        """Seconds between the first and the last listing."""
        got = self.listed()
        return (got[-1].t - got[0].t) if len(got) > 1 else 0.0

    def persistent(self) -> List[CudaKernel]:
        """The launches present in every listing (at least one listing), as the last one shows them."""
        got = self.listed()
        if not got:
            return []
        keys = None
        for s in got:
            mine = {k.key for k in s.kernels if k.status in PRESENT}
            keys = mine if keys is None else keys & mine
        return [k for k in got[-1].kernels if k.key in (keys or set())]
