"""GPU state joined to the ranks: which GPU each process runs on, and how that is known.

The joins, strongest first:

* **pid**: the process table of ``nvidia-smi`` / ``nvidia-smi -q`` (or NVML) lists the process on
  a GPU (a process may be on several: its own and the peers' it maps);
* **NCCL RAS**: a RAS answer's rank with this pid names its ``nvml_dev``, the index nvidia-smi shows;
* **LOCAL_RANK**: the launcher's local rank taken as the device index.  That is the usual
  ``torch.cuda.set_device(local_rank)``, but nothing proves it (``CUDA_VISIBLE_DEVICES`` may
  reorder the devices), so it is shown with a "?" and never used to blame a rank.

The Xid table (``signatures/gpu/xids.yaml``) gives each Xid its meaning and action; it is read
like the other data files (``signatures.read_data_file``: checked once, cached).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, NamedTuple, Optional, Sequence

from hanganalyze.analyze.signatures import builtin_dir, display_path, read_data_file
from hanganalyze.errors import SignatureError
from hanganalyze_gdbext.model import Process, Snapshot
from hanganalyze_gdbext.model.gpustate import Gpu, GpuState, XidEvent, bus_key

GPU_FOLDER = "gpu"
#: Utilization (percent) from which a GPU is busy, and up to which it is idle.
BUSY_PCT = 80
IDLE_PCT = 5
#: How a process was joined to a GPU (``RankGpu.how``); the last one is an assumption.
BY_PID, BY_RAS, BY_LOCAL_RANK = "pid", "NCCL RAS nvml_dev", "LOCAL_RANK"


class XidInfo(NamedTuple):
    """One row of ``signatures/gpu/xids.yaml``."""

    xid: int
    klass: str  # "lost" | "ecc" | "app" | "driver" | "nvlink"
    severity: str
    meaning: str
    action: str


@lru_cache(maxsize=None)
def xid_table() -> Dict[int, XidInfo]:
    """Xid number -> its row."""
    path = builtin_dir() / GPU_FOLDER / "xids.yaml"
    data, _extra = read_data_file(path)
    rows = data.get("xids") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise SignatureError("%s: expected a list under 'xids'" % display_path(path))
    out: Dict[int, XidInfo] = {}
    for row in rows:
        if not (isinstance(row, dict) and isinstance(row.get("xid"), int)):
            raise SignatureError("%s: each row needs an integer 'xid': %r" % (display_path(path), row))
        out[row["xid"]] = XidInfo(row["xid"], str(row.get("class", "other")), str(row.get("severity", "error")),
                                  str(row.get("meaning", "")), str(row.get("action", "")))
    return out


def xid_info(xid: int) -> Optional[XidInfo]:
    return xid_table().get(xid)


@dataclass
class RankGpu:
    """One GPU of one process: the GPU and how the join was made."""

    gpu: Gpu
    how: str

    @property
    def proven(self) -> bool:
        """A join that may name a rank in a finding (not the LOCAL_RANK assumption)."""
        return self.how != BY_LOCAL_RANK


def _ras_devices(snapshot: Snapshot) -> Dict[int, int]:
    """pid -> nvml_dev, from the last RAS query that names the pid."""
    out: Dict[int, int] = {}
    if snapshot.nccl_ras is None:
        return out
    for q in snapshot.nccl_ras.queries:
        for c in q.communicators:
            for r in c.ranks:
                if r.pid is not None and r.nvml_dev is not None:
                    out[r.pid] = r.nvml_dev
    return out


def gpus_of(snapshot: Snapshot) -> List[List[RankGpu]]:
    """Per process of the snapshot (by index): its GPUs, strongest join first; [] when unknown.
    A process the process table lists is on that GPU; among several, the one where it holds the
    most memory comes first (its own device: peers map a little of each other's)."""
    state = snapshot.gpu
    procs = snapshot.processes
    out: List[List[RankGpu]] = [[] for _ in procs]
    if state is None or not state.gpus:
        return out
    ras = _ras_devices(snapshot)
    for i, p in enumerate(procs):
        if p.pid is not None:
            on = [(gp.used_mib or 0, g) for g in state.gpus for gp in g.processes if gp.pid == p.pid]
            on.sort(key=lambda t: -t[0])
            out[i] = [RankGpu(g, BY_PID) for _mib, g in on]
            if not out[i] and p.pid in ras:
                out[i] = [RankGpu(g, BY_RAS) for g in state.gpus if g.index == ras[p.pid]]
        if not out[i] and p.dist is not None and p.dist.local_rank is not None:
            out[i] = [RankGpu(g, BY_LOCAL_RANK) for g in state.gpus if g.index == p.dist.local_rank]
    return out


def own_gpu(joined: Sequence[RankGpu]) -> Optional[RankGpu]:
    """The process's own GPU: the first join (most memory), when proven."""
    return joined[0] if joined and joined[0].proven else None


def busy(g: Gpu) -> Optional[bool]:
    """True: busy (utilization >= BUSY_PCT); False: idle (<= IDLE_PCT, or the "Idle" clock reason
    active with no utilization read); None: unknown or in between."""
    if g.lost:
        return None
    if g.util_gpu is not None:
        if g.util_gpu >= BUSY_PCT:
            return True
        if g.util_gpu <= IDLE_PCT:
            return False
        return None
    return False if "Idle" in g.throttle else None


def samples_agree(g: Gpu, state: GpuState) -> bool:
    """Several nvidia-smi samples of this GPU, every one on the same side (all busy or all idle)."""
    if len(g.util_samples) < 2:
        return False
    return all(u >= BUSY_PCT for u in g.util_samples) or all(u <= IDLE_PCT for u in g.util_samples)


def gpu_name(g: Gpu) -> str:
    """"GPU 3 (0000:3b:00.0)" -- the index and bus id that are known."""
    parts = ["GPU %d" % g.index if g.index is not None else "GPU"]
    if g.bus_id:
        parts.append("(%s)" % g.bus_id)
    return " ".join(parts)


def xid_gpu_name(ev: XidEvent, state: Optional[GpuState]) -> str:
    """The GPU of an Xid event, by its index when nvidia-smi output names the same bus."""
    g = gpu_for_bus(state, ev.bus_id)
    if g is not None and g.index is not None:
        return "GPU %d (PCI %s)" % (g.index, ev.bus_id)
    return "the GPU at PCI %s" % ev.bus_id if ev.bus_id else "a GPU"


def gpu_for_bus(state: Optional[GpuState], bus_id: Optional[str]) -> Optional[Gpu]:
    key = bus_key(bus_id)
    if state is None or key is None:
        return None
    return next((g for g in state.gpus if bus_key(g.bus_id) == key), None)


def processes_on(snapshot: Snapshot, joined: List[List[RankGpu]], g: Optional[Gpu],
                 pid: Optional[int] = None) -> List[int]:
    """Process indices on GPU ``g`` (a proven join) or with pid ``pid``."""
    out = []
    for i, p in enumerate(snapshot.processes):
        if (pid is not None and p.pid == pid) or (g is not None and any(rg.gpu is g and rg.proven
                                                                        for rg in joined[i][:1])):
            out.append(i)
    return out


def who(snapshot: Snapshot, idx: Sequence[int]) -> str:
    """"rank 3", "ranks 0, 1", "pid 4242" -- how the report names processes."""
    procs: List[Process] = [snapshot.processes[i] for i in idx]
    ranks = [p.rank for p in procs if p.rank is not None]
    if ranks and len(ranks) == len(procs):
        return ("rank %d" % ranks[0]) if len(ranks) == 1 else "ranks %s" % ", ".join(str(r) for r in sorted(ranks))
    pids = [str(p.pid) for p in procs if p.pid is not None]
    if pids and len(pids) == len(procs):
        return ("pid %s" % pids[0]) if len(pids) == 1 else "pids %s" % ", ".join(pids)
    return "processes %s" % ", ".join(str(i) for i in idx)
