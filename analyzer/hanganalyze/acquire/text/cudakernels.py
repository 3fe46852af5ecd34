"""cuda-gdb's ``info cuda kernels`` (and ``info cuda devices``) pasted as text -> ``Process.cuda_kernels``.

The tables are read by ``acquire/cudakernels.py``'s parser, the one the live ``--gpu-kernels``
read uses.  Each kernels table of the text is one sample (a session that listed twice, or two
pastes, says whether the same grid stayed); a pasted table has no time, so the samples carry
none and no claim over time is made from them.  The lines that are no table are messages (a
cuda-gdb session's ``bt`` is read by the gdb format, which leaves these tables to this one); the
table's lines stay messages as well, as the log reader knows them (an NCCL kernel's row).
"""

from __future__ import annotations

from typing import List

from hanganalyze.acquire.cudakernels import KERNELS_HEADER, NO_KERNELS, parse_devices, parse_kernels
from hanganalyze_gdbext.model import Process
from hanganalyze_gdbext.model.cudakernels import CudaKernels, KernelSample

from .common import cap_messages

NAME = "cuda-kernels"


def score(lines: List[str]) -> float:
    """A kernels header is distinctive (ten fixed column names); its rows add a little."""
    heads = sum(1 for ln in lines if KERNELS_HEADER.match(ln))
    if not heads:
        return 0.0
    rows, _ = parse_kernels(lines)
    return 5.0 * heads + 0.5 * len(rows)


def _tables(lines: List[str]) -> List[List[str]]:
    """The lines cut before each kernels header (or "No CUDA kernels."): one listing each."""
    chunks: List[List[str]] = [[]]
    for ln in lines:
        if (KERNELS_HEADER.match(ln) or NO_KERNELS.match(ln)) and any(
                KERNELS_HEADER.match(x) or NO_KERNELS.match(x) for x in chunks[-1]):
            chunks.append([])
        chunks[-1].append(ln)
    return chunks


def parse(lines: List[str], proc: Process) -> None:
    samples: List[KernelSample] = []
    for chunk in _tables(lines):
        kernels, seen = parse_kernels(chunk)
        if seen:
            samples.append(KernelSample(kernels=kernels))
    if samples:
        proc.cuda_kernels = CudaKernels(samples=samples, devices=parse_devices(lines), source="text")
    # every line stays a message too: a row of an NCCL kernel is also a known log line (loglines.py)
    proc.messages = cap_messages([ln.strip() for ln in lines if ln.strip()], proc.notes)
