"""GPU state of this host, live, through NVML (the ``nvidia-ml-py`` binding, import name ``pynvml``):
the same records the saved nvidia-smi outputs give (``model/gpustate.py``), for ``--job``.

NVML is optional: without the binding, without the driver's library or on a machine with no GPU,
the answer is no state and one note for the report, never an error.  Each value is read on its
own: a GPU that does not support a query (ECC on a consumer card) leaves that field unknown, and
a GPU NVML cannot reach ("GPU is lost") is a lost GPU, which is the finding.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from hanganalyze_gdbext.model.gpustate import Gpu, GpuProcess, GpuState

SOURCE = "NVML"
#: nvmlClocksThrottleReason* / nvmlClocksEventReason* bits (nvml.h), as nvidia-smi -q names them.
THROTTLE_BITS = ((0x1, "Idle"), (0x2, "Applications Clocks Setting"), (0x4, "SW Power Cap"),
                 (0x8, "HW Slowdown"), (0x10, "Sync Boost"), (0x20, "SW Thermal Slowdown"),
                 (0x40, "HW Thermal Slowdown"), (0x80, "HW Power Brake Slowdown"),
                 (0x100, "Display Clock Setting"))
MIB = 1024 * 1024


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _try(fn: Any, *args: Any) -> Any:
    """One NVML query; None when the GPU does not support it or it fails."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends: the field stays unknown
        return None


def _gpu(nv: Any, index: int) -> Gpu:
    try:
        h = nv.nvmlDeviceGetHandleByIndex(index)
    except Exception as e:  # noqa: BLE001 - NVMLError_GpuIsLost, Unknown Error: the GPU is lost
        return Gpu(index=index, lost=_text(e) or "Unknown Error")
    g = Gpu(index=index)
    pci = _try(nv.nvmlDeviceGetPciInfo, h)
    g.bus_id = _text(pci.busId) if pci is not None else None
    name = _try(nv.nvmlDeviceGetName, h)
    g.product = _text(name) if name is not None else None
    util = _try(nv.nvmlDeviceGetUtilizationRates, h)
    if util is not None:
        g.util_gpu, g.util_mem = int(util.gpu), int(util.memory)
    g.util_samples = _recent_util(nv, h)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
    if mem is not None:
        g.mem_used_mib, g.mem_total_mib = int(mem.used) // MIB, int(mem.total) // MIB
    procs = _try(nv.nvmlDeviceGetComputeRunningProcesses, h) or []
    g.processes = [GpuProcess(pid=int(p.pid), type="C",
                              used_mib=int(p.usedGpuMemory) // MIB if isinstance(p.usedGpuMemory, int) else None)
                   for p in procs]
    bits = _try(nv.nvmlDeviceGetCurrentClocksThrottleReasons, h)
    if isinstance(bits, int):
        g.throttle = [n for b, n in THROTTLE_BITS if bits & b]
    ecc = _try(nv.nvmlDeviceGetTotalEccErrors, h, getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
               getattr(nv, "NVML_VOLATILE_ECC", 0))
    g.ecc_uncorrected_volatile = int(ecc) if isinstance(ecc, int) else None
    replays = _try(nv.nvmlDeviceGetPcieReplayCounter, h)
    g.pcie_replays = int(replays) if isinstance(replays, int) else None
    return g


#: The span of NVML's utilization history kept as samples: one reading is one instant (a healthy
#: training loop's GPU reads idle now and then between kernels, 1 of 5 runs on 2x H200).
HISTORY_US = 2_000_000


def _recent_util(nv: Any, h: Any) -> List[int]:
    """GPU utilization over the last HISTORY_US from the driver's own sample buffer
    (``nvmlDeviceGetSamples``, about six a second): evidence over time without waiting for it."""
    kind = getattr(nv, "NVML_GPU_UTILIZATION_SAMPLES", None)
    got = _try(nv.nvmlDeviceGetSamples, h, kind, 0) if kind is not None else None
    if not got or len(got) != 2:
        return []
    samples = [x for x in got[1] if hasattr(x, "timeStamp")]
    if not samples:
        return []
    newest = max(int(x.timeStamp) for x in samples)
    out = []
    for x in sorted(samples, key=lambda x: int(x.timeStamp)):
        if newest - int(x.timeStamp) <= HISTORY_US:
            v = getattr(x.sampleValue, "uiVal", None)
            if isinstance(v, int):
                out.append(v)
    return out


def read_nvml() -> Tuple[Optional[GpuState], Optional[str]]:
    """(this host's GPU state, None) or (None, the one-line note saying why there is none)."""
    try:
        import pynvml as nv  # here: optional (nvidia-ml-py), and only a live --job asks
    except ImportError:
        return None, "GPU state: not read (NVML's Python binding nvidia-ml-py is not installed)"
    try:
        nv.nvmlInit()
    except Exception as e:  # noqa: BLE001 - no driver library, no GPU: a note, never an error
        return None, "GPU state: not read (NVML: %s)" % (_text(e) or type(e).__name__)
    try:
        count = int(nv.nvmlDeviceGetCount())
        gpus: List[Gpu] = [_gpu(nv, i) for i in range(count)]
    except Exception as e:  # noqa: BLE001
        return None, "GPU state: not read (NVML: %s)" % (_text(e) or type(e).__name__)
    finally:
        _try(nv.nvmlShutdown)
    return GpuState(gpus=gpus, sources=[SOURCE], samples=1), None
