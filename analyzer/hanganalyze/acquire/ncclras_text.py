"""The text form of NCCL RAS's ``VERBOSE STATUS`` (``ncclras`` without ``-f json``) into ``RasQuery``.

The text is written for people (NCCL's ``src/ras/client_support.cc``): a header with the
versions, a job summary, a table of communicator groups, then "Errors" and "Warnings" sections.
Per-rank counts appear only where the ranks of a communicator disagree ("#0-0 (5e413f75dea32c06)
MISMATCH" and its "Rank 1 has launched up to operation 3 -- GPU 1 managed by process 674 on node
192.0.2.2" lines), so a healthy job's text carries no count at all: only the JSON form measures
progress everywhere.  Lines this reader does not know are skipped (later NCCL versions add some);
every number is checked against its range.  NCCL 2.24's wording ("different collective operation
counts", "UNKNOWN" status) reads too: its counts are the "collective" op.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from hanganalyze.errors import InputError
from hanganalyze_gdbext.model.ncclras import TEXT, RasCommunicator, RasGroup, RasMissingRank, RasQuery, RasRank

#: Largest values: a count is NCCL's uint64_t, everything else an int.
U64_MAX = (1 << 64) - 1
I32_MAX = (1 << 31) - 1

#: The first line of a text answer; queries concatenated in one file are split on it.
HEADER = re.compile(r"^NCCL version (\S+) compiled with CUDA \S+[ \t]*$", re.M)
_CUDA = re.compile(r"^CUDA runtime version (\d+), driver version (\d+)\s*$")
_COMMS = re.compile(r"^Communicators\.\.\..*\((\d+(?:\.\d+)?)s\)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:-\d+)?)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$")
_SECTION = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]{1,16})\) ([A-Z]+)\s*$")
_JOB_PROBLEM = re.compile(r"^(INCOMPLETE|DEAD|TIMEOUT)\s*$")
#: "-- GPU 1 (NVML 3) managed by process 674 on node 192.0.2.2"
_WHO = re.compile(r"-- GPU (\d+)(?: \(NVML (\d+)\))? managed by process (\d+) on node (\S*)\s*$")
_RANK = re.compile(r"^  Rank (\d+)(?: (.*?))? --")
_HAS_COUNT = re.compile(r"^has launched up to operation (\d+)$")
_HAS_STATUS = re.compile(r"^has status ([A-Z]+)$")
_REPORTED = re.compile(r"^reported (.+)$")
_N_COUNT = re.compile(r"^  (\d+) ranks have launched up to operation (\d+)\s*$")
_N_NONE = re.compile(r"^  (\d+) ranks have not launched any operations\s*$")
_N_STATUS = re.compile(r"^  (\d+) ranks have status ([A-Z]+)\s*$")
_N_REPORTED = re.compile(r"^  (\d+) ranks reported (.+?)\s*$")
_DIFF_OP = re.compile(r"^  Communicator ranks have different (\w+) operation counts\s*$")
_INIT_ERR = re.compile(r"^  Initialization errors? on \d+ ranks?\s*$")
_ASYNC_ERR = re.compile(r"^  Asynchronous errors? on \d+ ranks?\s*$")


def number(text: str, what: str, hi: int = I32_MAX) -> int:
    """A decimal from the answer, or one line saying which value is out of range."""
    if len(text) > 20 or int(text) > hi:
        raise InputError("%s: %s out of range (%s)" % (what, text[:24], "at most %d" % hi))
    return int(text)


def split_text_queries(text: str) -> List[str]:
    """The queries of a text answer, one per "NCCL version ... compiled with CUDA" header."""
    starts = [m.start() for m in HEADER.finditer(text)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


class _Section:
    """What the lines of a "#g-i (hash) KIND" section apply to: the op or field being listed and
    the value a "N ranks have ..." line announced for the rank lines under it."""

    def __init__(self, comm: RasCommunicator, kind: str) -> None:
        self.comm = comm
        self.kind = kind
        self.op: Optional[str] = None  # MISMATCH: the op whose counts follow; None: the status
        self.field = "status"  # ERROR: "init_error" | "async_error_text"
        self.value: Optional[object] = None  # the announced count, status or error


def _rank_of(comm: RasCommunicator, rank: int) -> RasRank:
    for r in comm.ranks:
        if r.rank == rank:
            return r
    r = RasRank(rank=rank)
    comm.ranks.append(r)
    return r


def _identity(line: str, where: str) -> Tuple[Optional[int], Optional[int], Optional[int], Optional[str]]:
    m = _WHO.search(line)
    if not m:
        return None, None, None, None
    cuda = number(m.group(1), where + ": GPU")
    nvml = number(m.group(2), where + ": NVML device") if m.group(2) else cuda
    return cuda, nvml, number(m.group(3), where + ": pid"), m.group(4) or None


def _rank_line(sec: _Section, line: str, where: str) -> None:
    """A "Rank k ..." line of a section: the rank's identity and the value it reports."""
    m = _RANK.match(line)
    if not m:
        return
    rank = number(m.group(1), where + ": rank")
    cuda, nvml, pid, host = _identity(line, where)
    if sec.kind == "INCOMPLETE":
        sec.comm.missing_ranks.append(RasMissingRank(rank=rank, host=host, pid=pid, cuda_dev=cuda, nvml_dev=nvml))
        return
    r = _rank_of(sec.comm, rank)
    if pid is not None:
        r.host, r.pid, r.cuda_dev, r.nvml_dev = host, pid, cuda, nvml
    said = m.group(2)
    value = sec.value
    if said:
        c, s, e = _HAS_COUNT.match(said), _HAS_STATUS.match(said), _REPORTED.match(said)
        if c:
            value = number(c.group(1), where + ": count", U64_MAX)
        elif said == "has not launched any operations":
            value = 0
        elif s:
            value = s.group(1)
        elif e:
            value = e.group(1)
    if value is None:
        return
    if sec.kind == "MISMATCH" and sec.op is not None and isinstance(value, int):
        r.counts[sec.op] = value
    elif sec.kind == "MISMATCH" and isinstance(value, str):
        r.status = value
    elif sec.kind == "ERROR" and isinstance(value, str):
        setattr(r, sec.field, value)


def _section_line(sec: _Section, line: str, where: str) -> None:
    """One indented line under a "#g-i (hash) KIND" header."""
    m = _DIFF_OP.match(line)
    if m:
        sec.op, sec.value = m.group(1), None
        return
    if line.startswith("  Communicator ranks have different status"):
        sec.op, sec.value = None, None
        return
    if _INIT_ERR.match(line) or _ASYNC_ERR.match(line):
        sec.field, sec.value = ("init_error" if _INIT_ERR.match(line) else "async_error_text"), None
        return
    m = _N_COUNT.match(line)
    if m:
        sec.value = number(m.group(2), where + ": count", U64_MAX)
        return
    if _N_NONE.match(line):
        sec.value = 0
        return
    m = _N_STATUS.match(line) or _N_REPORTED.match(line)
    if m:
        sec.value = m.group(2)
        return
    if line.startswith("  Rank "):
        _rank_line(sec, line, where)


def parse_text_query(text: str, source: str) -> RasQuery:
    """One text answer (from its "NCCL version" header to the next) as a ``RasQuery``."""
    q = RasQuery(format=TEXT, source=source)
    comms: Dict[str, RasCommunicator] = {}
    lines = text.splitlines()
    m = HEADER.match(lines[0]) if lines else None
    if not m:
        raise InputError("%s: not NCCL RAS text (no 'NCCL version ... compiled with CUDA' line first)" % source)
    q.nccl_version = m.group(1)
    sec: Optional[_Section] = None
    problem: Optional[List[str]] = None  # the job-level problem being read (its lines)
    in_table = False

    def close_problem() -> None:
        nonlocal problem
        if problem:
            q.errors.append(": ".join([problem[0], "; ".join(problem[1:])]) if len(problem) > 1 else problem[0])
        problem = None

    for i, line in enumerate(lines[1:], 2):
        where = "%s line %d" % (source, i)
        handled = _header_line(q, line, where)
        if handled:
            continue
        if line.startswith("Group     Comms"):
            in_table = True
            continue
        row = _ROW.match(line) if in_table else None
        if row:
            q.groups.append(_group(row, where))
            continue
        if line.strip() and not line.startswith(" "):
            in_table = False
        s = _SECTION.match(line)
        if s:
            close_problem()
            key = "0x%x" % int(s.group(3), 16)
            comm = comms.get(key)
            if comm is None:
                comm = comms[key] = RasCommunicator(hash=key)
                group = int(s.group(1)[:9])  # the row of the summary table: the communicator's size
                comm.size = next((g.ranks_per_comm for g in q.groups if g.group == group), None)
                q.communicators.append(comm)
            if s.group(4) not in comm.problems:
                comm.problems.append(s.group(4))
            sec = _Section(comm, s.group(4))
            continue
        p = _JOB_PROBLEM.match(line)
        if p:
            close_problem()
            sec, problem = None, [p.group(1)]
            continue
        if line.startswith("  ") and problem is not None:
            problem.append(line.strip())
        elif line.startswith("  ") and sec is not None:
            _section_line(sec, line, where)
        elif not line.strip():
            close_problem()
            sec = None
    close_problem()
    for comm in q.communicators:
        comm.ranks.sort(key=lambda r: r.rank if r.rank is not None else -1)
        if comm.missing_ranks:
            comm.missing_ranks_count = len(comm.missing_ranks)
    q.communicators_count = sum(g.comms or 0 for g in q.groups) if q.groups else None
    return q


def _header_line(q: RasQuery, line: str, where: str) -> bool:
    m = _CUDA.match(line)
    if m:
        q.cuda_runtime_version = number(m.group(1), where + ": CUDA runtime version")
        q.cuda_driver_version = number(m.group(2), where + ": CUDA driver version")
        return True
    m = _COMMS.match(line)
    if m:
        q.collection_time_s = float(m.group(1)[:16])
        return True
    return False


def _group(row: re.Match[str], where: str) -> RasGroup:
    def num(i: int, what: str) -> int:
        return number(row.group(i), "%s: %s" % (where, what))

    return RasGroup(group=num(1, "group"), comms=num(2, "comms"), nodes_per_comm=num(3, "nodes"),
                    ranks_per_node=row.group(4), ranks_per_comm=num(5, "ranks per comm"),
                    ranks_in_group=num(6, "ranks in group"), status=row.group(7), errors=row.group(8))
