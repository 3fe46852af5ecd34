"""PyTorch's NCCL (and gloo) watchdog lines in a log, as a rank's collective facts.

When a collective times out, ProcessGroupNCCL's watchdog prints the timed-out work (sequence
number, op, timeout) and the group's last enqueued and completed sequence numbers; every other
rank prints the same progress when the dump signal reaches it.  A pasted torchrun log (or a
job's stderr) thus gives what a flight-recorder dump gives, without the call sites: the job view
(``analyze/rankstate.py``) reads both the same way, as ``Process.collectives``.

Every text input's messages go through ``collectives_from_messages`` (``acquire/many.py``):
the lines sit among any dump format's (``log``'s plain lines, a traceback's preamble).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from hanganalyze.acquire.ranks import MAX_RANK
from hanganalyze_gdbext.model.collectives import WATCHDOG_LOG, CollectiveEntry, CollectiveGroup, Collectives

#: Lines of a log looked at, and their length (a megabyte-long line must not be slow).
MAX_MESSAGES = 200_000
MAX_LINE = 20_000

#: torchrun's ``[rank3]:`` (``[default3]:`` with --tee) anywhere in the line (Ray adds its own prefix).
_TORCHRUN = re.compile(r"\[(?:rank|default)(\d{1,8})\]:")
#: ProcessGroupNCCL's logPrefix, every form since 2.2: ``[Rank 0]``, ``[PG 0 Rank 2]``,
#: ``[PG 0 (default_pg) Rank 1]``, ``[PG ID 2 PG GUID 3 Rank 3]``, ``[PG ID 0 PG GUID 0(default_pg) Rank 0]``.
_PG_PREFIX = re.compile(r"\[(?:PG (?:ID )?(\d{1,10})(?: PG GUID ([^\s()\[\]]{1,128}))?"
                        r"(?: ?\(([^()\[\]\n]{0,256})\))? )?Rank (\d{1,8})\]")
_CAUGHT = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d{1,20}), "
                     r"OpType=(\w{1,64})(?:, NumelIn=(-?\d{1,20}), NumelOut=(-?\d{1,20}))?"
                     r"(?:, TensorShape=\[[^\]\n]{0,512}\])?, Timeout\(ms\)=(\d{1,20})\)"
                     r"(?: ran for (\d{1,20}) milliseconds before timing out)?")
#: 2.5+: ``failure detected by watchdog at work sequence id: 3 PG status: last enqueued work: 3, ...``
_FAILURE = re.compile(r"failure detected by watchdog at work sequence id: (\d{1,20}) PG status: "
                      r"last enqueued work: (-?\d{1,20}), last completed work: (-?\d{1,20})")
#: 2.2-2.4: ``Timeout at NCCL work: 7, last enqueued NCCL work: 8, last completed NCCL work: 6.``
#: and ``Exception (either an error or timeout) detected by watchdog at work: ...``.
_OLD_FAILURE = re.compile(r"(?:Timeout at NCCL work|Exception \(either an error or timeout\) detected by "
                          r"watchdog at work): (-?\d{1,20}), last enqueued NCCL work: (-?\d{1,20}), "
                          r"last completed NCCL work: (-?\d{1,20})")
#: The dump signal (this rank's timeout, or a peer's): ``Last enqueued NCCL work: 2, last completed NCCL work: 2.``
_DUMP = re.compile(r"Last enqueued NCCL work: (-?\d{1,20}), last completed NCCL work: (-?\d{1,20})")
#: gloo (compiled into libtorch_cpu): ``Timed out waiting 1800000ms for recv operation to complete``.
_GLOO = re.compile(r"Timed out waiting (\d{1,20})ms for (\w{1,32}) operation to complete")

#: WorkNCCL's OpType (opTypeToString) -> the op name the flight recorder and torch.distributed use.
_OPTYPES = {
    "ALLREDUCE": "all_reduce", "ALLREDUCE_COALESCED": "allreduce_coalesced", "BROADCAST": "broadcast",
    "REDUCE": "reduce", "ALLGATHER": "all_gather", "_ALLGATHER_BASE": "_all_gather_base",
    "ALLGATHER_COALESCED": "all_gather_coalesced", "GATHER": "gather", "SCATTER": "scatter",
    "REDUCE_SCATTER": "reduce_scatter", "_REDUCE_SCATTER_BASE": "_reduce_scatter_base",
    "ALLTOALL_BASE": "all_to_all", "ALLTOALL": "all_to_all", "SEND": "send", "RECV": "recv",
    "RECVANYSOURCE": "recv", "BARRIER": "barrier", "COALESCED": "coalesced",
}


def _group(groups: Dict[str, CollectiveGroup], pg: str, guid: Optional[str], desc: Optional[str]) -> CollectiveGroup:
    g = groups.setdefault(pg, CollectiveGroup())
    if guid:
        g.name = guid
    if desc:
        g.desc = desc
    return g


def collectives_from_messages(messages: List[str], rank: Optional[int] = None) -> Optional[Collectives]:
    """Collective progress from PyTorch's watchdog lines in a log (torchrun's, a job's stderr).

    The same record as a dump's (``source`` "watchdog-log", no ``file``), from the lines
    ProcessGroupNCCL prints when a collective times out: the timed-out work (an entry with
    ``state`` "timed_out", its ``seq``, ``op`` and ``timeout_ms``) and the group's last enqueued
    and completed sequence numbers (the last line wins: logs are in time order).  gloo's
    ``Timed out waiting ...`` gives an entry without ``seq``.

    A log may hold several ranks' lines (``[rank1]:`` prefixes, ``Rank 1`` in the PG prefix):
    only ``rank``'s are read, or when ``rank`` is None those of the first rank named; the rank
    read is returned as ``.rank`` (None when no line names one).  None when no watchdog line is
    found.  Regular expressions are bounded and anchored on literals, so a megabyte of hostile
    text takes linear time.
    """
    groups: Dict[str, CollectiveGroup] = {}
    entries: List[CollectiveEntry] = []
    by_seq: Dict[Tuple[Optional[str], Optional[int]], CollectiveEntry] = {}
    others: set = set()
    found = False
    for raw in messages[:MAX_MESSAGES]:
        if type(raw) is not str:
            continue
        line = raw[:MAX_LINE]
        if not ("NCCL work" in line or "Watchdog caught" in line or "watchdog at work" in line
                or "Timed out waiting" in line):
            continue
        m_caught = _CAUGHT.search(line) if "Watchdog caught" in line else None
        m_fail = _FAILURE.search(line) if "watchdog at work sequence" in line else None
        m_old = _OLD_FAILURE.search(line) if "NCCL work" in line and m_fail is None else None
        m_dump = _DUMP.search(line) if "Last enqueued NCCL work" in line else None
        m_gloo = _GLOO.search(line) if "Timed out waiting" in line else None
        if not (m_caught or m_fail or m_old or m_dump or m_gloo):
            continue
        pre = _PG_PREFIX.search(line)
        tr = _TORCHRUN.search(line)
        line_rank = int(pre.group(4)) if pre else (int(tr.group(1)) if tr else None)
        if line_rank is not None and line_rank >= MAX_RANK:
            line_rank = None
        if line_rank is not None:
            if rank is None:
                rank = line_rank
            elif line_rank != rank:
                others.add(line_rank)
                continue
        found = True
        pg = pre.group(1) if pre and pre.group(1) is not None else None
        guid = pre.group(2) if pre else None
        desc = pre.group(3) if pre else None
        if m_caught:
            seq = int(m_caught.group(1))
            optype = m_caught.group(2)
            e = by_seq.get((pg, seq))
            if e is None:
                e = by_seq[(pg, seq)] = CollectiveEntry(seq=seq, pg=pg, state="timed_out")
                entries.append(e)
            e.op = _OPTYPES.get(optype, optype.lower())
            e.optype = optype
            e.timeout_ms = int(m_caught.group(5))
            if m_caught.group(3) is not None:
                e.numel_in, e.numel_out = int(m_caught.group(3)), int(m_caught.group(4))
            if m_caught.group(6) is not None:
                e.ran_ms = int(m_caught.group(6))
        for m in (m_fail, m_old):
            if m is None:
                continue
            seq = int(m.group(1))
            key = pg if pg is not None else "0"
            g = _group(groups, key, guid, desc)
            g.last_enqueued, g.last_completed = int(m.group(2)), int(m.group(3))
            e = by_seq.get((pg, seq)) or by_seq.get((None, seq))
            if e is None:
                e = by_seq[(pg, seq)] = CollectiveEntry(seq=seq, pg=key, state="timed_out")
                entries.append(e)
            e.pg = key
        if m_dump and not (m_fail or m_old):
            g = _group(groups, pg if pg is not None else "0", guid, desc)
            g.last_enqueued, g.last_completed = int(m_dump.group(1)), int(m_dump.group(2))
        if m_gloo:
            entries.append(CollectiveEntry(pg=pg, op=m_gloo.group(2).lower(), state="timed_out",
                                           timeout_ms=int(m_gloo.group(1))))
    if not found:
        return None
    # ``[Rank 0] Watchdog caught ...`` names no group: it is the one whose failure line has its seq,
    # else the only group there is.
    for e in entries:
        if e.pg is None and e.seq is not None and len(groups) == 1:
            e.pg = next(iter(groups))
    return Collectives(source=WATCHDOG_LOG, groups=groups, entries=entries, rank=rank,
                       other_ranks=sorted(others)[:64])
