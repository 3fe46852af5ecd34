"""cuda-gdb's ``info cuda threads``: where the device threads of a kernel stand, as text.

What cuda-gdb prints (its source, ``cuda-commands.c``): a table grouped per kernel (a ``Kernel N``
line before each kernel's rows), the current thread marked ``*``; with coalescing on (the default)
each row is a range of threads at one PC::

      BlockIdx ThreadIdx To BlockIdx ThreadIdx Count         Virtual PC      Filename  Line
    Kernel 0
    *  (0,0,0)   (0,0,0)     (0,0,0)  (31,0,0)    32 0x00007f735e581630  prims_ll.h    48

and with ``set cuda coalescing off`` one row per thread, with its device, SM, warp and lane::

       BlockIdx ThreadIdx         Virtual PC Dev SM Wp Ln   Filename  Line
    Kernel 0
    *   (0,0,0)   (0,0,0) 0x000000000088f88c   0  0  0  0    acos.cu   376

A file cuda-gdb has no line table for is ``n/a`` (line 0).  Every distinct place (kernel, PC, file,
line) is one thread of the snapshot, named by its first range of device threads, with one frame:
the file and line (no function: the table prints none), the PC its address.  A device thread is
the GPU's own work, so the triage reads such a thread that no frame name places elsewhere as the
GPU work that does not finish (``DEVICE_NOTE``); "No CUDA threads." is a message.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from hanganalyze.loglines import DEVICE_NOTE
from hanganalyze_gdbext.model import Frame, Process, Thread

from .common import cap_messages, to_int

NAME = "cuda-threads"

#: The two headers (coalesced, uncoalesced); columns are right-aligned, so spacing varies.
_HEADER = re.compile(r"^\s*BlockIdx\s+ThreadIdx\s+(?:To BlockIdx\s+ThreadIdx\s+Count\s+Virtual PC|"
                     r"Virtual PC\s+Dev\s+SM\s+Wp\s+Ln)\s+Filename\s+Line\s*$")
_KERNEL = re.compile(r"^\s*Kernel (\d{1,9})\s*$")
_DIM = r"\(\d{1,6},\d{1,6},\d{1,6}\)"
_ROW = re.compile(r"^(?P<cur>\*)?\s*(?P<block>" + _DIM + r")\s+(?P<thread>" + _DIM + r")\s+"
                  r"(?:(?P<to_block>" + _DIM + r")\s+(?P<to_thread>" + _DIM + r")\s+(?P<count>\d{1,9})\s+)?"
                  r"(?P<pc>0x[0-9a-fA-F]{1,16})\s+"
                  r"(?:(?P<dev>\d{1,4})\s+(?P<sm>\d{1,4})\s+(?P<wp>\d{1,4})\s+(?P<ln>\d{1,4})\s+)?"
                  r"(?P<file>\S.{0,500}?)\s+(?P<line>\d{1,9})\s*$")


def _row(s: str) -> Optional[re.Match]:
    if "(" not in s or "0x" not in s:
        return None
    m = _ROW.match(s)
    # one shape or the other: a range with its count, or a thread with its device coordinates
    if m is None or (m.group("count") is None) == (m.group("dev") is None):
        return None
    return m


def score(lines: List[str]) -> float:
    """A header is distinctive (its fixed column names); rows without one count when there are
    several of them (a paste that starts below the header)."""
    heads = rows = 0
    for ln in lines:
        if "BlockIdx" in ln and _HEADER.match(ln):
            heads += 1
        elif _row(ln) is not None:
            rows += 1
    if heads:
        return 6.0 * heads + 1.0 * rows
    return 1.0 * rows if rows >= 2 else 0.0


def parse(lines: List[str], proc: Process) -> None:
    messages: List[str] = []
    kernel: Optional[str] = None
    places: Dict[Tuple[Optional[str], int, str, int], Thread] = {}
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if "BlockIdx" in s and _HEADER.match(line):
            kernel = None
            continue
        m = _KERNEL.match(s)
        if m is not None:
            kernel = m.group(1)
            continue
        r = _row(s)
        if r is None:
            messages.append(s)
            continue
        pc = to_int(r.group("pc"), 16) or 0
        file = r.group("file")
        lineno = to_int(r.group("line")) or 0
        key = (kernel, pc, file, lineno)
        t = places.get(key)
        count = int(r.group("count")) if r.group("count") else 1
        if t is None:
            rng = r.group("thread") if r.group("count") is None else "%s-%s" % (r.group("thread"), r.group("to_thread"))
            block = r.group("block") if r.group("count") is None or r.group("block") == r.group("to_block") else (
                "%s-%s" % (r.group("block"), r.group("to_block")))
            t = Thread(name="CUDA %sblock %s, thread %s" % ("kernel %s, " % kernel if kernel else "", block, rng))
            t.notes.append("%s threads (info cuda threads)" % DEVICE_NOTE)
            t.frames.append(Frame(kind="native", function=None, address=pc,
                                  file=None if file == "n/a" else file, line=lineno or None))
            t.current = r.group("cur") is not None
            places[key] = t
            t.notes.append("device threads: %d" % count)
        else:
            t.current = t.current or r.group("cur") is not None
            n = int(t.notes[-1].rsplit(" ", 1)[1]) + count
            t.notes[-1] = "device threads: %d" % n
    proc.threads.extend(places.values())
    proc.messages.extend(cap_messages(messages, proc.notes))
