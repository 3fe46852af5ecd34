"""The GPU part of a report: the rank table's GPU cell and the GPU section (text and Markdown),
from ``Snapshot.gpu`` joined to the ranks (``analyze/gpujoin.py``).  JSON needs nothing here:
``Snapshot.gpu`` is written by the model.  Shown only when GPU state is known, so every other
report is unchanged.  A rank whose GPU is not known shows "?": unknown, never idle.
"""

from __future__ import annotations

from typing import Dict, List

from hanganalyze.analyze.gpujoin import BY_LOCAL_RANK, RankGpu, gpu_name, gpus_of, xid_gpu_name, xid_info
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.gpustate import Gpu

#: Xid lines listed in the section (the rest counted).
MAX_XIDS = 12


def _util(g: Gpu) -> str:
    if g.lost:
        return "LOST (%s)" % g.lost
    if g.util_gpu is None:
        return "idle clocks" if "Idle" in g.throttle else "util ?"
    if len(g.util_samples) > 1:  # a range, not every reading: the rank table's cell stays one short column
        lo, hi = min(g.util_samples), max(g.util_samples)
        spread = "%d%%" % lo if lo == hi else "%d-%d%%" % (lo, hi)
        return "%d%% (%s over %d samples)" % (g.util_gpu, spread, len(g.util_samples))
    return "%d%%" % g.util_gpu


def _mem(g: Gpu) -> str:
    if g.mem_used_mib is None:
        return ""
    return "%d/%d MiB" % (g.mem_used_mib, g.mem_total_mib) if g.mem_total_mib else "%d MiB" % g.mem_used_mib


def gpu_cell(joined: List[RankGpu]) -> str:
    """A rank's GPU cell: "7 100% python3" -- its device (a "?" after a LOCAL_RANK guess), the
    utilization and what runs there; "?" when not known."""
    if not joined:
        return "?"
    rg = joined[0]
    g = rg.gpu
    dev = str(g.index) if g.index is not None else (g.bus_id or "?")
    if rg.how == BY_LOCAL_RANK:
        dev += "?"
    runs = ", ".join(sorted({p.name.rsplit("/", 1)[-1] for p in g.processes if p.name}))[:40]
    extra = " +%d" % (len(joined) - 1) if len(joined) > 1 else ""
    return " ".join(x for x in ("%s%s" % (dev, extra), _util(g), runs) if x)


def _kernel_text(p) -> str:
    """The kernels cuda-gdb saw in every listing of a rank (``--gpu-kernels``): what its GPU runs."""
    ck = p.cuda_kernels
    if ck is None or not ck.listed():
        return ""
    names = sorted({k.short for k in ck.persistent()})
    return "kernel " + ", ".join(names)[:48] if names else "no kernel"


def gpu_cells(snapshot: Snapshot) -> Dict[str, str]:
    """pid (as the rank table writes it) -> the GPU cell; {} without GPU state or kernel listings."""
    has_gpu = snapshot.gpu is not None and bool(snapshot.gpu.gpus)
    if not has_gpu and not any(p.cuda_kernels is not None for p in snapshot.processes):
        return {}
    joined = gpus_of(snapshot) if has_gpu else [[] for _p in snapshot.processes]
    cells = {}
    for i, p in enumerate(snapshot.processes):
        if p.pid is not None:
            cell = gpu_cell(joined[i]) if has_gpu else ""
            kernel = _kernel_text(p)
            cells[str(p.pid)] = " ".join(x for x in (cell, kernel) if x) or "?"
    return cells


def _owners(snapshot: Snapshot) -> Dict[int, List[str]]:
    """id(gpu) -> the ranks / pids of the input on it (proven joins only)."""
    out: Dict[int, List[str]] = {}
    for i, js in enumerate(gpus_of(snapshot)):
        p = snapshot.processes[i]
        for rg in js[:1]:
            if rg.proven:
                out.setdefault(id(rg.gpu), []).append("rank %d" % p.rank if p.rank is not None else "pid %s" % p.pid)
    return out


def gpu_lines(snapshot: Snapshot) -> List[str]:
    """The GPU section as plain lines (the text report indents and escapes them)."""
    st = snapshot.gpu
    if st is None:
        return kernel_lines(snapshot)
    out = ["from %s%s" % (", ".join(st.sources) or "?", "; %d nvidia-smi samples" % st.samples
                          if st.samples > 1 else "; one nvidia-smi sample (one instant)" if st.samples == 1 else "")]
    owners = _owners(snapshot)
    for g in st.gpus:
        facts = [x for x in (g.product, _util(g), _mem(g)) if x]
        if g.throttle:
            facts.append("clock reasons: %s" % ", ".join(g.throttle))
        if g.ecc_uncorrected_volatile:
            facts.append("uncorrectable ECC (volatile) %d" % g.ecc_uncorrected_volatile)
        if g.remap_failure:
            facts.append("row remapping FAILED")
        elif g.remap_pending or g.retired_pending:
            facts.append("memory repair pending a reset")
        if g.err_fields:
            facts.append("ERR! in the %s reading" % " and ".join(g.err_fields))
        if g.pcie_replays:
            facts.append("PCIe replays %d" % g.pcie_replays)
        out.append("%s: %s" % (gpu_name(g), "; ".join(facts)))
        procs = ", ".join("%s%s%s" % (p.pid, " " + p.name if p.name else "",
                                      " %d MiB" % p.used_mib if p.used_mib is not None else "") for p in g.processes)
        if procs:
            out.append("  processes: %s" % procs)
        if id(g) in owners:
            out.append("  ranks here: %s" % ", ".join(owners[id(g)]))
    for ev in st.xids[:MAX_XIDS]:
        info = xid_info(ev.xid)
        out.append("Xid %d on %s%s%s: %s" % (ev.xid, xid_gpu_name(ev, st), " at " + ev.time if ev.time else "",
                                             " pid %d" % ev.pid if ev.pid is not None else "",
                                             info.meaning if info else ev.text[:100]))
    if len(st.xids) > MAX_XIDS:
        out.append("... %d more Xid lines in the JSON report" % (len(st.xids) - MAX_XIDS))
    out.extend(st.notes)
    return out + kernel_lines(snapshot)


#: Kernels listed per process and listing (the rest in the JSON report).
MAX_KERNELS = 6


def kernel_lines(snapshot: Snapshot) -> List[str]:
    """Each process's cuda-gdb listings: the kernels of the last one, and whether each was in all of them."""
    out: List[str] = []
    for p in snapshot.processes:
        ck = p.cuda_kernels
        if ck is None:
            continue
        name = "rank %d" % p.rank if p.rank is not None else "pid %s" % p.pid
        got = ck.listed()
        failed = [s.error for s in ck.samples if s.error]
        if not got:
            out.append("%s: kernels not listed (%s)" % (name, failed[0] if failed else "no listing"))
            continue
        last = got[-1]
        stay = {k.key for k in ck.persistent()}
        span = (" over %.1f s" % ck.span()) if len(got) > 1 and ck.source != "text" else ""
        head = "%s: %d cuda-gdb listing%s%s" % (name, len(got), "s" if len(got) > 1 else "", span)
        if not last.kernels:
            out.append(head + ": no active kernel")
        else:
            out.append(head + ":")
        for k in last.kernels[:MAX_KERNELS]:
            seen = ("in all %d listings" % len(got)) if len(got) > 1 and k.key in stay else \
                "new in the last listing" if len(got) > 1 else "one instant"
            out.append("%s runs: device %s grid %s %s %s%s (%s)" % (name, k.device, k.grid, k.status, k.short,
                                                                 " [NCCL]" if k.nccl else "", seen))
        if len(last.kernels) > MAX_KERNELS:
            out.append("%s: %d more kernels in the JSON report" % (name, len(last.kernels) - MAX_KERNELS))
        if failed:
            out.append("%s: %d listing(s) failed: %s" % (name, len(failed), failed[0]))
    return out

