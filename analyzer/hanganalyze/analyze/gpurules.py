"""The GPU rules: what the device side says, joined to the ranks (``gpujoin.py``).

Each rule is one function of the whole snapshot (report stage: it runs with or without a job,
and with GPU state alone), declared by ``@rule`` above it, its texts in ``rules.yaml``:

* ``gpu-fallen-off-bus``: a GPU is lost (Xid 79, "GPU is lost", "Unable to determine the device
  handle", ERR!): the GPU and the ranks on it.
* ``gpu-ecc-errors``: uncorrectable ECC errors, row-remap failure (Xid 48/63/64/92/94/95/140,
  the -q counters): the GPU.
* ``gpu-xid``: the other Xids, with their meaning and action from ``signatures/gpu/xids.yaml``.
* ``gpu-kernel-never-ends``: a rank's GPU runs its own kernel, the same launch in every cuda-gdb
  listing (``--gpu-kernels``), while its host waits for it; NCCL kernels are the peers' wait.
* ``gpu-busy-host-waits``: a rank's host waits in a device sync or a collective while its GPU is
  busy: the wait is on the device.  One nvidia-smi sample is one instant, and the finding says so.
* ``gpu-idle-peers-busy``: a rank's GPU is idle while its peers' GPUs are busy and their hosts
  wait: it never launched the collective.  Only with a proven GPU and a utilization for every
  rank; a GPU that is not known is unknown, never idle.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.findings import from_rule
from hanganalyze.analyze.gpujoin import (
    RankGpu,
    busy,
    gpu_for_bus,
    gpu_name,
    gpus_of,
    own_gpu,
    processes_on,
    samples_agree,
    who,
    xid_gpu_name,
    xid_info,
)
from hanganalyze.analyze.rankstate import RankState, rank_state
from hanganalyze.analyze.ruledecl import rule
from hanganalyze.analyze.rules import load_rules
from hanganalyze_gdbext.model import Evidence, Finding, Snapshot
from hanganalyze_gdbext.model.cudakernels import CudaKernel
from hanganalyze_gdbext.model.gpustate import Gpu, GpuState, XidEvent, bus_key

#: Host states that wait for the device (a collective's wait, the device sync after one).
HOST_WAITS = ("collective", "device-sync")
LOST_XIDS = ("lost",)
ECC_XIDS = ("ecc",)


def _states(snapshot: Snapshot) -> List[RankState]:
    """Each process's rank state: the job's, else computed (a single process has no job view)."""
    job = snapshot.job
    if job is not None and len(job.states) == len(snapshot.processes):
        return list(job.states)
    memo: Dict[tuple, tuple] = {}
    return [rank_state(i, p, memo) for i, p in enumerate(snapshot.processes)]


def _finding(sig: str, procs: Sequence[int], snapshot: Snapshot, summary: str, evidence: List[Evidence],
             confidence: float, fix: Optional[List[str]] = None, title: Optional[str] = None) -> Finding:
    ranks = sorted(r for r in (snapshot.processes[i].rank for i in procs) if r is not None)
    return from_rule(load_rules().by_id(sig), procs[0] if procs else 0, summary, evidence, confidence,
                     ranks=ranks, processes=list(procs), fix=fix, title=title)


def _xid_text(ev: XidEvent) -> str:
    where = (" at %s" % ev.time) if ev.time else ""
    who_ = (" (pid %d%s)" % (ev.pid, ", " + ev.name if ev.name else "")) if ev.pid is not None else ""
    return "Xid %d%s%s: %s" % (ev.xid, where, who_, ev.text[:160])


def _by_gpu(snapshot: Snapshot, joined: List[List[RankGpu]], events: Sequence[XidEvent]
            ) -> List[Tuple[Optional[str], List[XidEvent], Optional[Gpu], List[int], str]]:
    """Events grouped by GPU (PCI key), in first-seen order: (key, events, the GPU, the processes on
    it, its name) -- what each Xid rule starts from."""
    out: Dict[Optional[str], List[XidEvent]] = {}
    for ev in events:
        out.setdefault(bus_key(ev.bus_id), []).append(ev)
    state = snapshot.gpu
    groups = []
    for key, evs in out.items():
        g = gpu_for_bus(state, evs[0].bus_id) if state is not None else None
        groups.append((key, evs, g, _procs_of_events(snapshot, joined, g, evs), xid_gpu_name(evs[0], state)))
    return groups


def _on_gpu_evidence(snapshot: Snapshot, procs: Sequence[int], name: str, events: Sequence[XidEvent]
                     ) -> List[Evidence]:
    """Each process on the GPU, then the kernel log's Xid lines (8 at most)."""
    return [Evidence(process=i, rank=snapshot.processes[i].rank, rule="gpu-state", text="on %s" % name)
            for i in procs] + [Evidence(rule="kernel log", text=_xid_text(e)) for e in events[:8]]


def _procs_of_events(snapshot: Snapshot, joined: List[List[RankGpu]], gpu: Optional[Gpu],
                     events: Sequence[XidEvent]) -> List[int]:
    idx = set(processes_on(snapshot, joined, gpu))
    for ev in events:
        if ev.pid is not None:
            idx.update(processes_on(snapshot, joined, None, ev.pid))
    return sorted(idx)


def _klass(ev: XidEvent) -> str:
    info = xid_info(ev.xid)
    return info.klass if info else "other"


def _on_text(snapshot: Snapshot, procs: Sequence[int]) -> str:
    return ("; %s ran on it" % who(snapshot, procs)) if procs else "; no process of the input is known to run on it"


@rule("gpu-fallen-off-bus", stage="report", reads="Snapshot.gpu: Xid 79, lost GPUs; GPUs joined to ranks by pid")
def gpu_fallen_off_bus(snapshot: Snapshot) -> List[Finding]:
    """``gpu-fallen-off-bus``: each lost GPU, with the ranks on it."""
    state = snapshot.gpu
    if state is None:
        return []
    joined = gpus_of(snapshot)
    found: List[Finding] = []
    seen: List[Optional[str]] = []
    lost_events = [ev for ev in state.xids if _klass(ev) in LOST_XIDS]
    for key, events, g, procs, name in _by_gpu(snapshot, joined, lost_events):
        said = ["Xid %d (%s)" % (events[0].xid, events[0].text[:80])]
        if g is not None and g.lost:
            said.append("nvidia-smi: %s" % g.lost)
        summary = "%s fell off the bus: %s%s" % (name, "; ".join(said), _on_text(snapshot, procs))
        found.append(_finding("gpu-fallen-off-bus", procs, snapshot, summary,
                              _on_gpu_evidence(snapshot, procs, name, events), 0.95))
        seen.append(key)
    for g in state.gpus:
        if not g.lost or (bus_key(g.bus_id) in seen and bus_key(g.bus_id) is not None):
            continue
        procs = processes_on(snapshot, joined, g)
        summary = "%s cannot be read: nvidia-smi says %r%s" % (gpu_name(g), g.lost, _on_text(snapshot, procs))
        ev = [Evidence(process=i, rank=snapshot.processes[i].rank, rule="gpu-state", text="on %s" % gpu_name(g))
              for i in procs] + [Evidence(rule="nvidia-smi", text="%s: %s" % (gpu_name(g), g.lost))]
        found.append(_finding("gpu-fallen-off-bus", procs, snapshot, summary, ev, 0.8 if g.lost == "ERR!" else 0.9))
    return found


@rule("gpu-ecc-errors", stage="report", reads="Snapshot.gpu: ECC Xids and counters, row remapping")
def gpu_ecc_errors(snapshot: Snapshot) -> List[Finding]:
    """``gpu-ecc-errors``: uncorrectable ECC errors and row-remap failures, per GPU."""
    state = snapshot.gpu
    if state is None:
        return []
    joined = gpus_of(snapshot)
    found: List[Finding] = []
    done: List[Optional[str]] = []
    for key, events, _g, procs, name in _by_gpu(snapshot, joined, [ev for ev in state.xids if _klass(ev) in ECC_XIDS]):
        kinds = sorted({e.xid for e in events})
        means = ["Xid %d: %s" % (x, xid_info(x).meaning) for x in kinds if xid_info(x)]  # type: ignore[union-attr]
        summary = "%s reported %s%s" % (name, "; ".join(means), _on_text(snapshot, procs))
        fix = [xid_info(x).action for x in kinds if xid_info(x)]  # type: ignore[union-attr]
        ev = [Evidence(rule="kernel log", text=_xid_text(e)) for e in events[:8]]
        found.append(_finding("gpu-ecc-errors", procs, snapshot, summary, ev, 0.9, fix=fix or None))
        done.append(key)
    for g in state.gpus:
        if bus_key(g.bus_id) in done and bus_key(g.bus_id) is not None:
            continue
        said = []
        if g.ecc_uncorrected_volatile:
            said.append("%d uncorrectable ECC error(s) since the driver loaded" % g.ecc_uncorrected_volatile)
        if g.remap_failure:
            said.append("row remapping failed")
        if not said:
            continue
        procs = processes_on(snapshot, joined, g)
        summary = "%s: %s%s" % (gpu_name(g), ", ".join(said), _on_text(snapshot, procs))
        found.append(_finding("gpu-ecc-errors", procs, snapshot, summary,
                              [Evidence(rule="nvidia-smi -q", text="%s: %s" % (gpu_name(g), ", ".join(said)))], 0.85))
    return found


@rule("gpu-xid", stage="report", reads="Snapshot.gpu: the other Xids (signatures/gpu/xids.yaml)")
def gpu_xid(snapshot: Snapshot) -> List[Finding]:
    """``gpu-xid``: the other Xids, one finding per GPU, meaning and action from the Xid table."""
    state = snapshot.gpu
    if state is None:
        return []
    joined = gpus_of(snapshot)
    found: List[Finding] = []
    other = [ev for ev in state.xids if _klass(ev) not in LOST_XIDS + ECC_XIDS]
    for _key, events, _g, procs, name in _by_gpu(snapshot, joined, other):
        counts: Dict[int, int] = {}
        for e in events:
            counts[e.xid] = counts.get(e.xid, 0) + 1
        parts, fix = [], []
        for x, n in counts.items():
            info = xid_info(x)
            meaning = info.meaning if info else "not in the Xid table (see NVIDIA's Xid catalog)"
            parts.append("Xid %d%s: %s" % (x, (" x%d" % n) if n > 1 else "", meaning))
            if info and info.action not in fix:
                fix.append(info.action)
        title = "Xid %s on %s" % (", ".join(str(x) for x in counts), name)
        summary = "%s: %s%s" % (name, "; ".join(parts), _on_text(snapshot, procs))
        found.append(_finding("gpu-xid", procs, snapshot, summary, _on_gpu_evidence(snapshot, procs, name, events),
                              0.8, fix=fix or None, title=title))
    return found


def _util_text(g: Gpu, state: GpuState) -> str:
    if g.util_gpu is None:
        return "idle (the 'Idle' clock reason is active)"
    if samples_agree(g, state):
        return "%d%% in each of %d nvidia-smi samples" % (g.util_gpu, len(g.util_samples))
    return "%d%%" % g.util_gpu


@rule("gpu-busy-host-waits", stage="report", reads="rank states (host waits) and each rank's GPU utilization")
def gpu_busy_host_waits(snapshot: Snapshot) -> List[Finding]:
    """``gpu-busy-host-waits``: ranks whose host waits for the device while their GPU is busy.  A rank
    ``gpu-kernel-never-ends`` (run before) already named is left out: its kernel, named over time,
    says more than one busy reading, and the two would tell one story twice."""
    state = snapshot.gpu
    if state is None or not snapshot.processes or _ras_moving(snapshot):
        return []
    named = {i for f in snapshot.findings if f.signature == "gpu-kernel-never-ends"
             for i in (f.processes or [f.process])}
    joined = gpus_of(snapshot)
    states = _states(snapshot)
    hits: List[Tuple[int, RankState, Gpu]] = []
    for i, s in enumerate(states):
        if i in named:
            continue
        rg = own_gpu(joined[i])
        if s.state in HOST_WAITS and s.evidence != "unknown" and rg is not None and busy(rg.gpu):
            hits.append((i, s, rg.gpu))
    if not hits:
        return []
    parts = []
    for i, s, g in hits[:8]:
        wait = "the device sync after a collective" if s.state == "device-sync" else (s.op or "a collective")
        parts.append("%s waits in %s while %s is busy, %s" % (who(snapshot, [i]), wait, gpu_name(g),
                                                             _util_text(g, state)))
    agree = all(samples_agree(g, state) for _i, _s, g in hits)
    summary = "; ".join(parts) + (": the host waits for work still running on the device (a kernel that has "
                                  "not finished, or a collective's kernel waiting for a peer)")
    if not agree:
        summary += "; one nvidia-smi sample is one instant: take several (nvidia-smi -l 1) to tell a kernel " \
                   "that never ends from one that was running then"
    ev = [Evidence(process=i, rank=s.rank, thread=s.thread, frame=s.frame, rule="gpu-state",
                   text="%s: utilization %s%% (%s)" % (gpu_name(g), g.util_gpu, joined[i][0].how))
          for i, s, g in hits[:64]]
    return [_finding("gpu-busy-host-waits", [i for i, _s, _g in hits], snapshot, summary, ev,
                     0.8 if agree else 0.5)]


#: NCCL RAS findings that say the communicators move (counts over time): a GPU reading of one moment
#: that says a rank is idle or its host stuck behind its GPU is then the moment between two steps
RAS_MOVING = ("nccl-ras-progressing", "nccl-ras-slow-rank")


def _ras_moving(snapshot: Snapshot) -> bool:
    return any(f.signature in RAS_MOVING for f in snapshot.findings)


@rule("gpu-idle-peers-busy", stage="report", reads="every rank's GPU utilization and rank state")
def gpu_idle_peers_busy(snapshot: Snapshot) -> List[Finding]:
    """``gpu-idle-peers-busy``: a rank's GPU idle while its peers' GPUs are busy and their hosts wait."""
    state = snapshot.gpu
    procs = snapshot.processes
    if state is None or len(procs) < 2 or _ras_moving(snapshot):
        return []
    joined = gpus_of(snapshot)
    states = _states(snapshot)
    side: List[Optional[bool]] = []
    for i in range(len(procs)):
        rg = own_gpu(joined[i])
        side.append(busy(rg.gpu) if rg is not None else None)
    if any(b is None for b in side):
        return []  # a rank without a proven GPU and a reading: nothing can be said of the job
    idle = [i for i, b in enumerate(side) if b is False]
    busy_ = [i for i, b in enumerate(side) if b is True]
    if not idle or not busy_ or not any(states[i].state in HOST_WAITS for i in busy_):
        return []
    # "never launched the collective": the idle rank's host is not in it (nor in a device sync), and the
    # readings hold over time -- one instant of an idle GPU is what a healthy loop shows between kernels
    if any(states[i].state in HOST_WAITS for i in idle):
        return []
    if not all(samples_agree(own_gpu(joined[i]).gpu, state) for i in idle + busy_):  # type: ignore[union-attr]
        return []
    gi = [own_gpu(joined[i]).gpu for i in idle]  # type: ignore[union-attr]
    summary = "%s: %s idle (%s) while the GPUs of %s are busy and their hosts wait in a collective: %s never " \
              "launched the collective its peers run" % (
                  who(snapshot, idle), ", ".join(gpu_name(g) for g in gi),
                  ", ".join(_util_text(g, state) for g in gi), who(snapshot, busy_),
                  "it" if len(idle) == 1 else "they")
    ev = [Evidence(process=i, rank=procs[i].rank, rule="gpu-state",
                   text="%s idle" % gpu_name(own_gpu(joined[i]).gpu)) for i in idle] + [  # type: ignore[union-attr]
        Evidence(process=i, rank=procs[i].rank, rule="gpu-state",
                 text="%s busy" % gpu_name(own_gpu(joined[i]).gpu)) for i in busy_[:16]]  # type: ignore[union-attr]
    return [_finding("gpu-idle-peers-busy", idle, snapshot, summary, ev, 0.8)]


#: Listings this many seconds apart (at least two) make a claim over time.
KERNEL_MIN_SPAN_S = 1.0


def _kernel_text(k: CudaKernel) -> str:
    return "%s (device %s, grid %s%s)" % (k.short, k.device, k.grid, ", %s" % k.status if k.status != "Active" else "")


def _peer_text(snapshot: Snapshot, states: List[RankState], peers: Sequence[int]) -> str:
    """What the other ranks do: in an NCCL kernel, waiting in the collective, or not known."""
    nccl, waiting = [], []
    for j in peers:
        ck = snapshot.processes[j].cuda_kernels
        if ck is not None and any(k.nccl for s in ck.listed() for k in s.kernels):
            nccl.append(j)
        elif states[j].state in HOST_WAITS:
            waiting.append(j)
    parts = []
    if nccl:
        parts.append("the GPU of %s runs an NCCL kernel (waiting for a peer)" % who(snapshot, nccl))
    if waiting:
        parts.append("%s wait%s in the collective" % (who(snapshot, waiting), "s" if len(waiting) == 1 else ""))
    return ("; " + "; ".join(parts)) if parts else ""


@rule("gpu-kernel-never-ends", stage="report", reads="cuda-gdb's kernel listings and rank states")
def gpu_kernel_never_ends(snapshot: Snapshot) -> List[Finding]:
    """``gpu-kernel-never-ends``: a rank whose GPU runs its own (non-NCCL) kernel, the same launch in
    every cuda-gdb listing, while its host waits for the device.  NCCL kernels are the peers' wait,
    never the culprit.  One listing is one instant: then the finding says so, with less confidence."""
    procs = snapshot.processes
    read = [i for i, p in enumerate(procs) if p.cuda_kernels is not None and p.cuda_kernels.listed()]
    if not read:
        return []
    states = _states(snapshot)
    hits: List[Tuple[int, List[CudaKernel]]] = []
    for i in read:
        s = states[i]
        own = [k for k in procs[i].cuda_kernels.persistent() if not k.nccl]  # type: ignore[union-attr]
        if own and s.state in HOST_WAITS and s.evidence != "unknown":
            hits.append((i, own))
    if not hits:
        return []
    over_time = all(len(procs[i].cuda_kernels.listed()) > 1  # type: ignore[union-attr]
                    and procs[i].cuda_kernels.span() >= KERNEL_MIN_SPAN_S for i, _k in hits)  # type: ignore[union-attr]
    parts = []
    for i, own in hits[:8]:
        ck = procs[i].cuda_kernels
        n = len(ck.listed())  # type: ignore[union-attr]
        s = states[i]
        wait = "a device sync" if s.state == "device-sync" else (s.op or "a collective")
        when = ("in each of %d cuda-gdb listings over %.1f s" % (n, ck.span())  # type: ignore[union-attr]
                if over_time else "in the one cuda-gdb listing" if n == 1 else "in each of %d listings" % n)
        parts.append("%s: its GPU runs its own kernel %s %s while its host waits in %s" % (
            who(snapshot, [i]), ", ".join(_kernel_text(k) for k in own[:3]), when, wait))
    summary = "; ".join(parts)
    if over_time:
        summary += ": the kernel does not finish and the host waits for it (a GPU-side hang)"
    else:
        summary += ": one listing is one instant, so this says the kernel was running then, not that it never " \
                   "ends (take two, seconds apart: --gpu-kernels does)"
    summary += _peer_text(snapshot, states, [j for j in range(len(procs)) if j not in {i for i, _k in hits}])
    ev = [Evidence(process=i, rank=states[i].rank, thread=states[i].thread, frame=states[i].frame, rule="cuda-gdb",
                   text="%s: %s" % (k.status or "?", k.invocation[:200]))
          for i, own in hits[:64] for k in own[:3]]
    return [_finding("gpu-kernel-never-ends", [i for i, _k in hits], snapshot, summary, ev,
                     0.85 if over_time else 0.5)]
