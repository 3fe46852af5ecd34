"""Saved GPU state as an input of its own: ``nvidia-smi -q``, the plain ``nvidia-smi`` table and
kernel-log Xid lines (``dmesg``, ``dmesg -T``, ``journalctl -k``), read into ``model/gpustate.py``.

A host stack says a rank waits in a device sync; only the GPU's side says whether its GPU is busy,
idle, lost or broken.  These outputs are what people paste and what a node's health check keeps,
so each is an input like a stack dump: given alone, or beside a job's other inputs (``--job``,
several files), it becomes ``Snapshot.gpu`` and the analysis joins it to the ranks by pid or
device (``analyze/gpujoin.py``).

A text is taken for GPU state only when nearly all of its lines are such output (``looks_like``):
a stack dump that quotes an nvidia-smi table stays the stack dump's.  Nothing here raises on odd
input: a line that is not understood is skipped.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Tuple

from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.gpustate import Gpu, GpuProcess, GpuState, XidEvent, bus_key

FORMAT_NAME = "gpu-state"
SMI_Q = "nvidia-smi -q"
SMI_TABLE = "nvidia-smi"
KERNEL_LOG = "kernel log"
#: The share of non-blank lines that must be GPU-state output for a text to be taken as such.
MIN_SHARE = 0.8
#: How much of a text ``looks_like`` reads (its head): bounded work for any input.
HEAD_LINES = 400
HEAD_BYTES = 256 * 1024

# ---- the kernel log ---------------------------------------------------------------------------

#: dmesg "[  123.456789] ", dmesg -T "[Tue Aug 30 11:43:09 2024] ", dmesg -H "[  +0.000316] ".
_DMESG = re.compile(r"^\[\s*(?P<t>[+\d.]+|\w{3} \w{3} +\d+ [\d:]+ \d{4})\]\s?")
#: journalctl -k / syslog "Feb 14 05:03:41 host kernel: " (and ISO "2024-08-30T11:43:09+0000 host kernel: ").
_JOURNAL = re.compile(r"^(?P<t>\w{3} +\d+ [\d:]+|\d{4}-\d\d-\d\dT[\d:.]+\S*) \S+ kernel: ")
#: A bare "kernel: " prefix, or a time of day ("19:14:43  ") some pastes keep.
_BARE = re.compile(r"^(?:(?P<t>\d\d:\d\d:\d\d)\s+)?(?:kernel: )?")
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), (?P<rest>.*)")
_PID = re.compile(r"\bpid=(?:'?(?P<pid>\d+)'?|'<unknown>')")
_NAME = re.compile(r"\bname=(?P<name>[^,\s]+)")
_PID_NAME = re.compile(r"^(?:pid=[^,]*,\s*)?(?:name=[^,]*,\s*)?")
#: The driver's multi-line message without an Xid line: "NVRM: The NVIDIA GPU 0000:b3:00.0" ...
#: "NVRM: fallen off the bus and is not responding to commands."
_FALLEN_GPU = re.compile(r"NVRM: The NVIDIA GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)")
_NVRM = re.compile(r"\bNVRM: ")
#: A pasted shell prompt that ran one of these tools ("$ nvidia-smi", "user@host ~ % dmesg -T").
_PROMPT = re.compile(r"^.{0,60}?[$%#>]\s*(?:sudo\s+)?(?:nvidia-smi|dmesg|journalctl)\b")

# ---- nvidia-smi -----------------------------------------------------------------------------

_NO_HANDLE = re.compile(r"Unable to determine the device handle for GPU\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                        r"[0-9A-Fa-f]{2}\.\d)\s*:\s*(?P<why>.*?)\s*$")
#: The wrapped end of "...: GPU is lost.  Reboot" as a terminal leaves it.
_NO_HANDLE_TAIL = re.compile(r"^\s*the system to recover this GPU\s*$")
_Q_GPU = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
#: "    Key     : value" (padded before the colon, no parentheses in the key) and "    Section".
_Q_KV = re.compile(r"^(?P<ind> +)(?P<key>[A-Za-z][^:()]*?)\s+:\s?(?P<val>.*?)\s*$")
_Q_SECTION = re.compile(r"^(?P<ind> +)(?P<key>[A-Z][A-Za-z0-9 /\-]*?)\s*$")
_Q_HEAD = re.compile(r"^(?:=+NVSMI LOG=+|Timestamp\s*:|Driver Version\s*:|CUDA Version\s*:|Attached GPUs\s*:)")
_Q_MARKERS = ("Product Name", "FB Memory Usage", "BAR1 Memory Usage", "Clocks Throttle Reasons",
              "Clocks Event Reasons", "Used GPU Memory", "Bus Id", "Remapped Rows", "Retired Pages", "GPU UUID",
              "Minor Number", "VBIOS Version", "Performance State")
_Q_ATTACHED = re.compile(r"^Attached GPUs\s*:\s*(\d+)")
_NUM = re.compile(r"^(\d+)")
_MIB = re.compile(r"^(\d+)\s*MiB")

_T_HEAD = re.compile(r"^\|\s*NVIDIA-SMI \d")
_T_GPU = re.compile(r"^\|\s+(?P<idx>\d+)\s+(?P<name>.+?)\s+(?:On|Off|WDDM|TCC)\s+\|\s+(?P<bus>[0-9A-Fa-f]{4,8}:"
                    r"[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s+\S+\s+\|")
_T_MEM = re.compile(r"(?P<used>\d+)\s*Mi?B\s*/\s*(?P<total>\d+)\s*Mi?B")
_T_UTIL = re.compile(r"\|\s*(?P<util>\d+%|N/A|ERR!)\s+\S+\s*\|\s*$")
_T_PROC = re.compile(r"^\|\s+(?P<gpu>\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(?P<pid>\d+)\s+(?P<type>C\+G|M\+C|C|G|M)"
                     r"\s+(?P<name>.*?)\s+(?P<mib>\d+|N/A)(?:MiB)?\s*\|\s*$")
_T_LINE = re.compile(r"^(?:[|+][-=+| ]|\|.*\|\s*$|\+-+\+\s*$|\w{3} \w{3} +\d+ [\d:]+ \d{4}\s*$)")
_T_ERR = re.compile(r"\bERR!")


def _kernel_prefix(line: str) -> Tuple[Optional[str], str]:
    """(the line's timestamp, the line without its kernel-log prefix)."""
    for rx in (_DMESG, _JOURNAL):
        m = rx.match(line)
        if m:
            return m.group("t"), line[m.end():]
    m = _BARE.match(line)
    return (m.group("t") if m else None), line[m.end():] if m else line


def _is_kernel_line(line: str) -> bool:
    return bool(_DMESG.match(line) or _JOURNAL.match(line) or _NVRM.search(line))


def _kind(line: str) -> Optional[str]:
    """Which GPU-state output a line belongs to (None: not one of them)."""
    s = line.rstrip()
    if not s.strip():
        return None
    if _is_kernel_line(s):
        return KERNEL_LOG
    if _PROMPT.match(s):
        return SMI_TABLE
    if _NO_HANDLE.search(s) or _NO_HANDLE_TAIL.match(s):
        return SMI_TABLE
    if _T_LINE.match(s):
        return SMI_TABLE
    if _Q_HEAD.match(s) or _Q_GPU.match(s) or _Q_KV.match(s) or _Q_SECTION.match(s):
        return SMI_Q
    return None


def looks_like(text: str) -> bool:
    """Whether a text is saved GPU state: a strong marker (an Xid line, an nvidia-smi header or
    -q key, "Unable to determine the device handle") and at least ``MIN_SHARE`` of the first
    ``HEAD_LINES`` non-blank lines being such output."""
    lines = [ln for ln in text[:HEAD_BYTES].splitlines()[:HEAD_LINES * 2] if ln.strip()][:HEAD_LINES]
    if not lines:
        return False
    strong = any(_XID.search(ln) or _FALLEN_GPU.search(ln) or _NO_HANDLE.search(ln) or _T_HEAD.match(ln)
                 or _T_GPU.match(ln) or _T_PROC.match(ln) or "NVSMI LOG" in ln for ln in lines)
    if not strong:  # a -q excerpt: two of its distinctive keys
        keys = {k for ln in lines for k in _Q_MARKERS if ln.strip().startswith(k)}
        strong = len(keys) >= 2
    if not strong:
        return False
    ours = sum(1 for ln in lines if _kind(ln) is not None)
    return ours >= MIN_SHARE * len(lines)


# ---- the parsers ----------------------------------------------------------------------------


def parse_xids(lines: Iterable[str]) -> List[XidEvent]:
    """The Xid events of kernel-log lines, in order; the driver's "fallen off the bus" message
    without an Xid line is Xid 79 too (its meaning)."""
    out: List[XidEvent] = []
    pending: Optional[XidEvent] = None  # "The NVIDIA GPU ..." seen, "fallen off the bus" not yet
    for raw in lines:
        t, line = _kernel_prefix(raw.rstrip())
        m = _XID.search(line)
        if m:
            rest = m.group("rest").strip()
            pm = _PID.search(rest)
            nm = _NAME.search(rest)
            rest = _PID_NAME.sub("", rest)
            pid = int(pm.group("pid")) if pm and pm.group("pid") else None
            out.append(XidEvent(xid=int(m.group("xid")), bus_id=m.group("bus"), pid=pid,
                                name=nm.group("name") if nm and nm.group("name") != "<unknown>" else None,
                                text=rest[:300], time=t))
            continue
        m = _FALLEN_GPU.search(line)
        if m:
            pending = XidEvent(xid=79, bus_id=m.group("bus"), text="fallen off the bus (the driver's message)", time=t)
            continue
        if pending is not None and "fallen off the bus" in line:
            if not any(e.xid == 79 and bus_key(e.bus_id) == bus_key(pending.bus_id) for e in out):
                out.append(pending)
            pending = None
    return out


def _int(val: str) -> Optional[int]:
    m = _NUM.match(val.strip())
    return int(m.group(1)) if m else None


def _mib(val: str) -> Optional[int]:
    m = _MIB.match(val.strip())
    return int(m.group(1)) if m else None


def _bad(val: str) -> Optional[str]:
    v = val.strip()
    for word in ("GPU is lost", "Unknown Error", "ERR!"):
        if word.lower() in v.lower():
            return word
    return None


def parse_smi_q(lines: List[str]) -> List[Gpu]:
    """The GPUs of ``nvidia-smi -q`` output (one block per "GPU 00000000:3B:00.0" line; a pasted
    excerpt without that line is one GPU).  Sections are told by indentation."""
    gpus: List[Gpu] = []
    cur: Optional[Gpu] = None
    path: List[Tuple[int, str]] = []  # (indent, section) from the GPU block down
    proc: Optional[GpuProcess] = None

    def gpu() -> Gpu:
        nonlocal cur
        if cur is None:
            cur = Gpu()
            gpus.append(cur)
        return cur

    attached: Optional[int] = None
    blocks = 0
    for raw in lines:
        line = raw.rstrip()
        m = _Q_ATTACHED.match(line)
        if m:
            attached = int(m.group(1))
            continue
        m = _Q_GPU.match(line)
        if m:
            blocks += 1
            cur = Gpu(index=len(gpus), bus_id=m.group("bus"))
            gpus.append(cur)
            path, proc = [], None
            continue
        m = _NO_HANDLE.search(line)
        if m:
            gpus.append(Gpu(bus_id=m.group("bus"), lost=m.group("why").split(".")[0] or "Unknown Error"))
            continue
        m = _Q_KV.match(line)
        sec = None if m else _Q_SECTION.match(line)
        if not m and not sec:
            continue
        ind = len((m or sec).group("ind"))
        while path and path[-1][0] >= ind:
            path.pop()
        if sec:
            path.append((ind, sec.group("key").strip()))
            continue
        key, val = m.group("key").strip(), m.group("val")
        names = [p[1] for p in path]
        where = names[0] if names else ""
        g = gpu()
        bad = _bad(val)
        if bad and key in ("Product Name", "Bus Id", "Gpu", "Used", "Total") and g.lost is None:
            g.lost = bad
        if not names:
            if key == "Product Name":
                g.product = val
        elif where == "PCI":
            if key == "Bus Id" and not g.bus_id:
                g.bus_id = val
            elif key in ("Replays Since Reset", "Replay Number"):
                g.pcie_replays = _int(val)
        elif where == "FB Memory Usage":
            if key == "Used":
                g.mem_used_mib = _mib(val)
            elif key == "Total":
                g.mem_total_mib = _mib(val)
        elif where == "Utilization":
            if key == "Gpu":
                g.util_gpu = _int(val)
            elif key == "Memory":
                g.util_mem = _int(val)
        elif where in ("Clocks Throttle Reasons", "Clocks Event Reasons"):
            if val.strip() == "Active" and key not in g.throttle:
                g.throttle.append(key)
        elif where == "ECC Errors" and len(names) >= 2:
            _ecc(g, names, key, val)
        elif where == "Retired Pages" and key.startswith("Pending"):
            g.retired_pending = val.strip().lower() == "yes"
        elif where == "Remapped Rows":
            if key == "Pending":
                g.remap_pending = val.strip().lower() == "yes"
            elif key.startswith("Remapping Failure"):
                g.remap_failure = val.strip().lower() == "yes"
        elif where == "Processes":
            if key == "Process ID":
                proc = GpuProcess(pid=_int(val))
                g.processes.append(proc)
            elif proc is not None and key in ("Name", "Process Name"):
                proc.name = val
            elif proc is not None and key == "Type":
                proc.type = val
            elif proc is not None and key == "Used GPU Memory":
                proc.used_mib = _mib(val)
    if attached is None or attached != blocks:  # "-q -i 3", or an excerpt: the order is not the index
        for g in gpus:
            g.index = None
    return gpus


def _ecc(g: Gpu, names: List[str], key: str, val: str) -> None:
    """Uncorrected ECC counts: "Double Bit" > "Total" (older GPUs) or every "... Uncorrectable ..."
    key (A100 and later), per volatile / aggregate."""
    n = _int(val)
    if n is None:
        return
    scope = names[1]
    double = any(p == "Double Bit" for p in names)
    if not ((double and key == "Total") or (not double and "Uncorrectable" in key)):
        return
    if scope == "Volatile":
        g.ecc_uncorrected_volatile = (g.ecc_uncorrected_volatile or 0) + n
    elif scope == "Aggregate":
        g.ecc_uncorrected_aggregate = (g.ecc_uncorrected_aggregate or 0) + n


def _reading_row(g: Gpu, line: str) -> None:
    """A GPU's second row: "| fan temp perf power | used / total | util compute |".  ERR! in the
    memory or utilization reading: the GPU cannot be read (lost); in the fan or power reading: that
    reading only (nvidia-smi shows it while the GPU works: often transient)."""
    cells = line.strip().strip("|").split("|")
    mm = _T_MEM.search(line)
    if mm:
        g.mem_used_mib, g.mem_total_mib = int(mm.group("used")), int(mm.group("total"))
    um = _T_UTIL.search(line)
    if um and um.group("util").endswith("%"):
        g.util_gpu = int(um.group("util")[:-1])
    if len(cells) >= 3 and (_T_ERR.search(cells[1]) or _T_ERR.search(cells[2])):
        g.lost = "ERR!"
    elif cells and _T_ERR.search(cells[0]):
        words = cells[0].split()
        at = [i for i, w in enumerate(words) if w.startswith("ERR!")]
        g.err_fields.extend("fan" if i == 0 else "power" for i in at)


def parse_smi_table(lines: List[str]) -> Tuple[List[List[Gpu]], List[Gpu]]:
    """(the GPU rows of each table sample, GPUs nvidia-smi could not read).  A sample starts at
    its "NVIDIA-SMI <version>" header; a table pasted without one is one sample.  The process
    table's rows go to their GPU of the same sample."""
    samples: List[List[Gpu]] = []
    lost: List[Gpu] = []
    last: Optional[Gpu] = None
    for raw in lines:
        line = raw.rstrip()
        m = _NO_HANDLE.search(line)
        if m:
            lost.append(Gpu(bus_id=m.group("bus"), lost=m.group("why").split(".")[0] or "Unknown Error"))
            continue
        if _T_HEAD.match(line):
            samples.append([])
            last = None
            continue
        m = _T_GPU.match(line)
        if m:
            if not samples:
                samples.append([])
            last = Gpu(index=int(m.group("idx")), product=m.group("name").strip(), bus_id=m.group("bus"))
            samples[-1].append(last)
            continue
        if last is not None and line.startswith("|") and (_T_MEM.search(line) or _T_ERR.search(line)):
            _reading_row(last, line)
            last = None
            continue
        m = _T_PROC.match(line)
        if m:
            if not samples:
                samples.append([])
            idx = int(m.group("gpu"))
            g = next((x for x in samples[-1] if x.index == idx), None)
            if g is None:
                g = Gpu(index=idx)
                samples[-1].append(g)
            mib = m.group("mib")
            g.processes.append(GpuProcess(pid=int(m.group("pid")), name=m.group("name").strip() or None,
                                          used_mib=int(mib) if mib.isdigit() else None, type=m.group("type")))
    return [s for s in samples if s], lost


# ---- one text, several texts ----------------------------------------------------------------


def _same(a: Gpu, b: Gpu) -> bool:
    ka, kb = bus_key(a.bus_id), bus_key(b.bus_id)
    if ka and kb:
        return ka == kb
    return a.index is not None and a.index == b.index


def _absorb(into: Gpu, new: Gpu) -> None:
    """``new`` (a later reading of the same GPU) over ``into``: what it carries wins."""
    for name in ("index", "bus_id", "product", "util_gpu", "util_mem", "mem_used_mib", "mem_total_mib",
                 "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "retired_pending", "remap_pending",
                 "remap_failure", "pcie_replays", "lost"):
        v = getattr(new, name)
        if v is not None and (name != "index" or into.index is None):
            setattr(into, name, v)
    if new.processes:
        into.processes = new.processes
    if new.throttle:
        into.throttle = new.throttle
    into.util_samples.extend(new.util_samples or ([new.util_gpu] if new.util_gpu is not None else []))


def merge(parts: Iterable[Optional[GpuState]]) -> Optional[GpuState]:
    """One state from several inputs' (several files, several samples): GPUs matched by bus id
    (else index), their utilization kept per sample; Xid events in input order."""
    out: Optional[GpuState] = None
    for part in parts:
        if part is None:
            continue
        if out is None:
            out = GpuState()
        for g in part.gpus:
            have = next((x for x in out.gpus if _same(x, g)), None)
            if have is None:
                if not g.util_samples and g.util_gpu is not None:
                    g.util_samples = [g.util_gpu]
                out.gpus.append(g)
            else:
                _absorb(have, g)
        out.xids.extend(part.xids)
        out.sources.extend(s for s in part.sources if s not in out.sources)
        out.samples += part.samples
        out.notes.extend(part.notes)
    if out is not None:
        for g in out.gpus:
            if len(g.util_samples) < 2:
                g.util_samples = []
    return out


def read_text(text: str) -> GpuState:
    """The GPU state of one text (any mix of the three outputs)."""
    lines = text.splitlines()
    state = GpuState()
    xids = parse_xids(ln for ln in lines if _is_kernel_line(ln) or "fallen off the bus" in ln)
    if xids or any(_is_kernel_line(ln) for ln in lines):
        state.xids = xids
        state.sources.append(KERNEL_LOG)
    table_lines = [ln for ln in lines if ln.startswith(("|", "+")) or _NO_HANDLE.search(ln) or _T_HEAD.match(ln)]
    samples, lost = parse_smi_table(table_lines)
    q_samples: List[List[Gpu]] = []
    q_lines = [ln for ln in lines if not ln.startswith(("|", "+")) and not _is_kernel_line(ln)]
    if any(_Q_KV.match(ln) or _Q_GPU.match(ln) for ln in q_lines):
        for chunk in _q_chunks(q_lines):  # "nvidia-smi -q -l 1": one "NVSMI LOG" header per sample
            got = [g for g in parse_smi_q(chunk) if g.bus_id or g.product or g.util_gpu is not None
                   or g.processes or g.mem_total_mib is not None or g.lost]
            if got:
                q_samples.append(got)
    parts: List[GpuState] = []
    for s in samples:
        parts.append(GpuState(gpus=s, sources=[SMI_TABLE], samples=1))
    for q in q_samples:
        parts.append(GpuState(gpus=q, sources=[SMI_Q], samples=1))
    if lost and not q_samples:
        parts.append(GpuState(gpus=lost, sources=[SMI_TABLE]))
    merged = merge([state] + parts) or state
    for g in merged.gpus:  # a GPU seen readable and then lost: the loss is the news
        for x in lost:
            if _same(g, x) and g.lost is None:
                g.lost = x.lost
    return merged


def _q_chunks(lines: List[str]) -> List[List[str]]:
    """-q output cut at each "==NVSMI LOG==" header (one sample each); an excerpt is one chunk."""
    chunks: List[List[str]] = [[]]
    for ln in lines:
        if "NVSMI LOG" in ln and chunks[-1]:
            chunks.append([])
        chunks[-1].append(ln)
    return [c for c in chunks if c]


def xids_beside(text: str) -> Optional[GpuState]:
    """The Xid events of NVRM lines in a text that is something else (stacks and a dmesg excerpt
    pasted together); None when it has none (the usual case: one substring test)."""
    if "NVRM: " not in text:
        return None
    xids = parse_xids(ln for ln in text.splitlines() if "NVRM: " in ln)
    return GpuState(xids=xids, sources=[KERNEL_LOG]) if xids else None


def read_gpustate(text: str, label: Optional[str] = None) -> Snapshot:
    """A Snapshot holding only GPU state (no process): ``many.acquire_all`` merges it into the job's."""
    state = read_text(text)
    if label:
        state.notes.append("GPU state read from %s (%s)" % (label, ", ".join(state.sources) or "nothing recognised"))
    return Snapshot(gpu=state)


def gpus_by_key(state: GpuState) -> Dict[str, Gpu]:
    """Each GPU under its PCI key (those with a bus id)."""
    return {k: g for g in state.gpus for k in [bus_key(g.bus_id)] if k}
