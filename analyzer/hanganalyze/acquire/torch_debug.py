"""PyTorch's distributed debug server's dumps: one file, every rank's stacks.

``torch.distributed.debug.start_debug_server(dump_dir=DIR)`` (periodic dumps since pytorch#174808,
Feb 2026; verified on 2.13, README.md says more) starts a worker HTTP server on every rank and, on
rank 0, a frontend that every ``dump_interval`` seconds asks each rank's worker for a handler's
answer and writes them all in one
file, ``DIR/<handler>_<YYYYmmdd_HHMMSS>.txt``::

    PARTIAL DATA: 1/2 workers responded          (only when a rank did not answer)
      Rank 1: Timeout: ...

    === Rank 0: http://host:port/handler/dump_traceback? ===
    <rank 0's faulthandler dump of every thread>
    === Rank 1: http://host:port/handler/dump_traceback? ===
    Error: 408

It is recognised by its content: the first line (after the optional ``PARTIAL DATA`` block) is a
``=== Rank N: http://…/handler/<name>? ===`` header.  Sections of ``dump_traceback`` (the
``stacks_*`` files, faulthandler text) and ``pyspy_dump`` (``pyspy_dump_*``, py-spy text) are
parsed by the text parsers, one process per rank, the rank from its header; a rank that did not
answer becomes a process with ``error`` set.  Sections of handlers without stacks
(``wait_counter_values``, ``torchcomms_health_check``) are not read, and said so.  The
``fr_trace_*`` file is the flight-recorder analyser's tables (not the records): named in one line,
with what to give instead (each rank's ``fr_trace_json`` answer or its flight-recorder dump, which
``flight_recorder.py`` reads).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze.loglines import CURRENT_NOTE
from hanganalyze_gdbext.model import DistIdentity, Process, Snapshot

#: What ``Process.source`` says for a rank read from a debug-server dump (``rankjoin.source_kind``).
SOURCE = "torch-debug-server"

_HEADER = re.compile(r"^=== Rank (\d{1,7}): (\S*/handler/([A-Za-z0-9_]{1,64})\?\S*) ===$", re.M)
_PARTIAL = re.compile(r"^PARTIAL DATA: (\d+)/(\d+) workers responded$")
_FAILED = re.compile(r"^  Rank (\d{1,7}): (.*)$")
_FR_TABLES = "=== FR Trace ==="
#: Handlers whose answer is a stack dump the text parsers read.
_STACKS = {"dump_traceback": "faulthandler", "pyspy_dump": "pyspy"}


def _first_lines(text: str) -> List[str]:
    """The lines up to the first section header or table title, blank ones dropped (a few only)."""
    out: List[str] = []
    for line in text.lstrip("\ufeff").splitlines()[:4200]:
        if line.strip():
            out.append(line.rstrip("\r"))
            if line.startswith("=== "):
                break
    return out


def looks_like_debug_dump(head: str) -> bool:
    """A debug-server dump: its first line is a rank header or the FR tables' title, or the
    ``PARTIAL DATA`` block that comes before them."""
    lines = _first_lines(head)
    if not lines:
        return False
    first = lines[0]
    if _PARTIAL.match(first):
        rest = [x for x in lines[1:] if not _FAILED.match(x)]
        return bool(rest) and (bool(_HEADER.match(rest[0])) or rest[0] == _FR_TABLES)
    return bool(_HEADER.match(first)) or first == _FR_TABLES


_NO_PY_CURRENT = re.compile(r"\ACurrent thread 0x[0-9a-f]+ \(most recent call first\):\n"
                            r"  <no Python frame>\n\s*\nThread 0x")


def looks_like_rank_traceback(head: str) -> bool:
    """One rank's ``dump_traceback`` answer (saved from ``/handler/dump_traceback``): a faulthandler
    dump whose current thread, the first, has no Python frame and other threads follow.  It was
    written from a thread outside Python (the worker server's), so that thread is not the rank's."""
    return bool(_NO_PY_CURRENT.match(head.lstrip("\ufeff").replace("\r\n", "\n")))


def read_rank_traceback(text: str) -> Snapshot:
    """One rank's ``dump_traceback`` answer: its threads, the server's thread last; the rank comes
    from the file's name (``ranks.identify``)."""
    snap = parse_text(text, "faulthandler")
    for proc in snap.processes:
        proc.source = SOURCE
        _order_threads(proc)
    return snap


def read_debug_dump(text: str, name: str = "") -> Snapshot:
    """Every rank of a debug-server dump, as processes of one Snapshot."""
    where = name or "the debug-server dump"
    text = text.lstrip("\ufeff")
    failed: Dict[int, str] = {}
    for line in text.splitlines()[:4200]:
        m = _FAILED.match(line)
        if m:
            failed[int(m.group(1))] = " ".join(m.group(2).split())[:300]
        elif line.startswith("=== "):
            break
    heads = list(_HEADER.finditer(text))
    if not heads:
        if _FR_TABLES in text[:100000]:
            raise InputError("%s: PyTorch's debug server's fr_trace tables (the flight-recorder analyser's output, "
                             "not its records): give each rank's flight-recorder dump or /handler/fr_trace_json answer"
                             % where)
        raise InputError("%s: a PyTorch debug-server dump with no rank section" % where)
    snap = Snapshot()
    skipped: List[str] = []
    for i, m in enumerate(heads):
        rank, addr, handler = int(m.group(1)), m.group(2), m.group(3)
        body = text[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)].strip("\r\n")
        if handler not in _STACKS:
            if handler not in skipped:
                skipped.append(handler)
            continue
        proc = _rank_process(rank, addr, handler, body, failed.get(rank), parse_text)
        snap.processes.append(proc)
    if skipped:
        msg = "PyTorch debug-server %s answers hold no stacks: not read" % ", ".join(skipped)
        if not snap.processes:
            msg += " (hanganalyze reads its stacks_* and pyspy_dump_* files)"
        snap.warnings.append(msg)  # no process: in a folder, the other files are the job
    return snap


def _rank_process(rank: int, addr: str, handler: str, body: str, failure: Optional[str], parse_text) -> Process:
    dist = DistIdentity(from_="debug-server dump header", rank=rank, debug_server_url=addr)
    error: Optional[str] = None
    procs: List[Process] = []
    if body.startswith("Error: ") and "\n" not in body.strip():
        error = "PyTorch's debug server got no %s from this rank (%s%s)" % (
            handler, body.strip(), ": " + failure if failure else "")
    else:
        try:
            procs = parse_text(body, _STACKS[handler]).processes
        except InputError as e:
            error = "its %s section: %s" % (handler, e)
    if error is not None or not procs:
        proc = Process(source=SOURCE, error=error or "its %s section holds no process" % handler)
    else:
        proc = procs[0]
        if len(procs) > 1:  # py-spy --subprocesses: the rank's children too
            proc.notes.append("the %s section holds %d processes: the first is this rank's" % (handler, len(procs)))
        proc.source = SOURCE
        if handler == "dump_traceback":
            _order_threads(proc)
    proc.rank, proc.dist, proc.label = rank, dist, "rank %d" % rank
    proc.notes.append("rank %d's %s from PyTorch's debug server dump" % (rank, handler))
    return proc


def _order_threads(proc: Process) -> None:
    """faulthandler's "Current thread" in a ``dump_traceback`` answer is the worker server's
    handler thread (C++, ``<no Python frame>``), not the program's: it goes last, not current.  The
    other threads come newest first (CPython's thread list), so the main thread is the last of
    them: it goes first, where ``stacks.main_thread`` looks when a text names no main thread."""
    server = [t for t in proc.threads if t.current and not t.frames]
    for t in server:
        t.current = False
        t.name = t.name or "debug server handler"
    rest = [t for t in proc.threads if not any(t is s for s in server)]
    if server and CURRENT_NOTE in proc.notes:
        proc.notes.remove(CURRENT_NOTE)
    proc.threads = rest[-1:] + rest[:-1] + server
