"""GPU state, as typed records: what ``nvidia-smi -q``, the plain ``nvidia-smi`` table and the
kernel log's Xid lines say about each GPU of a host.

Half of a GPU hang is on the device: the host stacks say a rank waits in a device sync or a
collective, and only the GPU's side says whether its GPU is busy (a kernel that does not end),
idle (the rank never launched its part), lost (Xid 79, "GPU is lost") or broken (uncorrectable
ECC errors).  These records carry what the saved outputs say, as they say it; the readers
(``analyzer/hanganalyze/acquire/gpustate.py``) check the values once, the analysis
(``analyzer/hanganalyze/analyze/gpujoin.py``) joins GPUs to ranks by pid or device.

A field the output did not carry stays None / empty and is not written (``record.Record``), so
every report without GPU state stays byte-identical.

Runs inside gdb: standard library only, Python 3.8.
"""

from __future__ import annotations

from dataclasses import field
from typing import List, Optional

from .record import Record, recordclass


@recordclass
class GpuProcess(Record):
    """One process on a GPU (the process table of ``nvidia-smi`` / ``nvidia-smi -q``)."""

    pid: Optional[int] = None
    name: Optional[str] = None
    used_mib: Optional[int] = None
    type: Optional[str] = None  # "C" (compute), "G" (graphics), "C+G"

    CONTRACT = ("pid",)


@recordclass
class XidEvent(Record):
    """One Xid line of the kernel log (``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ...``)."""

    xid: int = 0
    #: The GPU's PCI address as the line wrote it ("0000:3b:00"); ``key`` is the form joins compare.
    bus_id: Optional[str] = None
    pid: Optional[int] = None
    name: Optional[str] = None  # the process name the driver wrote
    text: str = ""  # the rest of the line, for people
    time: Optional[str] = None  # the line's timestamp as written (dmesg seconds, -T date, journal date)

    CONTRACT = ("xid", "bus_id", "pid", "text")


@recordclass
class Gpu(Record):
    """One GPU as the saved outputs show it."""

    index: Optional[int] = None  # nvidia-smi's index (the table's GPU column; -q: the order of the blocks)
    bus_id: Optional[str] = None  # as written ("00000000:3B:00.0")
    product: Optional[str] = None
    util_gpu: Optional[int] = None  # percent, the last sample
    util_mem: Optional[int] = None  # percent
    mem_used_mib: Optional[int] = None
    mem_total_mib: Optional[int] = None
    processes: List[GpuProcess] = field(default_factory=list)
    #: Clock throttle / event reasons that are "Active" ("Idle", "SW Power Cap", "HW Slowdown" ...).
    throttle: List[str] = field(default_factory=list)
    ecc_uncorrected_volatile: Optional[int] = None
    ecc_uncorrected_aggregate: Optional[int] = None
    retired_pending: Optional[bool] = None  # a retired page waits for a reset
    remap_pending: Optional[bool] = None  # a remapped row waits for a reset
    remap_failure: Optional[bool] = None  # row remapping failed: the memory's repair is exhausted
    pcie_replays: Optional[int] = None
    #: Why the GPU cannot be read, as nvidia-smi said it ("GPU is lost", "Unknown Error", "ERR!").
    lost: Optional[str] = None
    #: Readings nvidia-smi showed as ERR! while the GPU still answered ("fan", "power"): often
    #: transient, not a lost GPU.
    err_fields: List[str] = field(default_factory=list)
    #: GPU utilization in each nvidia-smi sample of this GPU, oldest first (written when several).
    util_samples: List[int] = field(default_factory=list)

    CONTRACT = ("index", "bus_id")


@recordclass
class GpuState(Record):
    """The GPU state of a job's host(s): the GPUs, the kernel log's Xid events, where they came from."""

    gpus: List[Gpu] = field(default_factory=list)
    xids: List[XidEvent] = field(default_factory=list)
    #: The outputs read: "nvidia-smi -q", "nvidia-smi", "kernel log", "NVML".
    sources: List[str] = field(default_factory=list)
    #: How many nvidia-smi samples were read (one instant unless several agree).
    samples: int = 0
    notes: List[str] = field(default_factory=list)

    CONTRACT = ("gpus", "xids")


def bus_key(bus_id: Optional[str]) -> Optional[str]:
    """The form PCI addresses are compared in: the last four digits of the domain, bus and device,
    lower case ("00000000:3B:00.0" and the Xid's "0000:3b:00" are both "0000:3b:00")."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) < 3:
        return None
    dom, bus, dev = parts[-3], parts[-2], parts[-1].split(".")[0]
    return "%s:%s:%s" % (dom[-4:].rjust(4, "0"), bus.rjust(2, "0"), dev.rjust(2, "0"))
