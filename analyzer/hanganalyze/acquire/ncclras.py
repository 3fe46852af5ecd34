"""NCCL RAS status: saved answers (JSON or text) and a live query, as ``model/ncclras.py`` records.

Every NCCL >= 2.24 process runs a RAS thread (``rasThreadMain``) that answers on
``localhost:28028`` (``NCCL_RAS_ADDR`` moves it) in the protocol of NCCL's ``ncclras`` tool:
``CLIENT PROTOCOL 2`` -> ``SERVER PROTOCOL 2``, ``TIMEOUT n`` -> ``OK``, ``SET FORMAT json`` ->
``OK`` (NCCL >= 2.28.7; older ones answer "ERROR: Unknown command" and keep to text), then
``VERBOSE STATUS``, answered until the server closes.  Any rank's thread answers for the whole job
(they form one RAS network), so one query of one host is enough.

Saved answers (what ``ncclras -f json > q1.json`` or ``nc localhost 28028`` leaves): a file holds
one form, one query or several concatenated (JSON documents one after the other; text answers
each from its "NCCL version ... compiled with CUDA" line); several files are several queries, in
the order given, then sorted by their JSON timestamps where every query has one (the order of
the evidence is time, not the command line).  A protocol transcript's "SERVER PROTOCOL" and "OK"
lines before an answer are skipped.  Given both forms of the same queries (``*.json`` and
``*.txt``), the JSON is kept: it carries every count.

Anything that is not RAS output -- garbage, truncated JSON, a wrong type, a number out of range,
nesting a parser would recurse into -- is one ``InputError`` line naming the file and the value,
never a traceback.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from hanganalyze.acquire.ncclras_text import HEADER, I32_MAX, U64_MAX, parse_text_query, split_text_queries
from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.ncclras import (
    JSON,
    TEXT,
    RasCommunicator,
    RasMissingRank,
    RasQuery,
    RasRank,
    RasSeries,
)
from hanganalyze_gdbext.model.termsafe import safe

DEFAULT_ADDR = "localhost:28028"
#: A saved file or a live answer larger than this is refused (a 10,000-rank job's JSON is ~15 MiB).
MAX_BYTES = 64 * 1024 * 1024
_PREAMBLE = re.compile(r"\A(?:\s*(?:SERVER PROTOCOL \d+|OK)[ \t]*\r?\n)+")


def looks_like_ras(head: str) -> bool:
    """Whether the first bytes of an input are a RAS answer (either form), for the input registry."""
    body = _PREAMBLE.sub("", head.lstrip("\ufeff"), count=1).lstrip()
    if body.startswith("{"):  # NCCL writes "nccl_version" first (a report JSON holding RAS queries does not)
        return bool(re.match(r'\{\s*"nccl_version"\s*:', body)) and '"communicators' in body
    return bool(HEADER.match(body)) and "\nCUDA runtime version " in body[:400]


# --- JSON form -------------------------------------------------------------------------------


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 20:
        raise ValueError("number with %d digits" % len(text))
    return int(text)


def _no_constant(text: str) -> Any:
    raise ValueError("%s is not a JSON number" % text)


_DECODER = json.JSONDecoder(parse_int=_bounded_int, parse_constant=_no_constant)


def _json_documents(text: str, source: str) -> List[Tuple[str, Dict[str, Any]]]:
    """The JSON documents of ``text`` one after the other, each with its name ("file" / "file#2")."""
    docs: List[Tuple[str, Dict[str, Any]]] = []
    pos = 0
    while True:
        rest = _PREAMBLE.match(text, pos)
        pos = rest.end() if rest else pos
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        name = source if not docs else "%s#%d" % (source, len(docs) + 1)
        try:
            doc, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            if e.pos >= len(text.rstrip()) - 1 or "Unterminated" in e.msg:
                raise InputError("%s: truncated JSON (the answer ends at line %d)" % (name, e.lineno)) from None
            raise InputError("%s: not JSON at line %d column %d: %s" % (name, e.lineno, e.colno, e.msg)) from None
        except (ValueError, RecursionError) as e:  # a number too long, NaN, nesting json would recurse into
            raise InputError("%s: not NCCL RAS output: %s" % (name, safe(str(e))[:120])) from None
        if not isinstance(doc, dict):
            raise InputError("%s: expected a JSON object, got %s" % (name, _kind(doc)))
        docs.append((name, doc))
    return docs


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(v), "a number")


class _Doc:
    """Typed reads of one JSON document: a wrong type or range is one line naming the key."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, path: str, want: str, v: Any) -> InputError:
        return InputError("%s: %s: expected %s, got %s" % (self.name, path, want, _kind(v)))

    def integer(self, d: Dict[str, Any], key: str, path: str, lo: int = -I32_MAX - 1,
                hi: int = I32_MAX) -> Optional[int]:
        v = d.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(path + key, "an integer", v)
        if not lo <= v <= hi:
            raise InputError("%s: %s%s: %d out of range [%d, %d]" % (self.name, path, key, v, lo, hi))
        return v

    def string(self, d: Dict[str, Any], key: str, path: str, limit: int = 256) -> Optional[str]:
        v = d.get(key)
        if v is None:
            return None
        if not isinstance(v, str):
            raise self.fail(path + key, "a string", v)
        if len(v) > limit:
            raise InputError("%s: %s%s: a string of %d characters" % (self.name, path, key, len(v)))
        return v

    def flag(self, d: Dict[str, Any], key: str, path: str) -> bool:
        v = d.get(key, False)
        if not isinstance(v, bool):
            raise self.fail(path + key, "true or false", v)
        return v

    def obj(self, d: Dict[str, Any], key: str, path: str) -> Dict[str, Any]:
        v = d.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self.fail(path + key, "an object", v)
        return v

    def objs(self, d: Dict[str, Any], key: str, path: str) -> List[Dict[str, Any]]:
        v = d.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self.fail(path + key, "a list", v)
        for i, x in enumerate(v):
            if not isinstance(x, dict):
                raise self.fail("%s%s[%d]" % (path, key, i), "an object", x)
        return v


def _hash(doc: _Doc, d: Dict[str, Any], path: str) -> Optional[str]:
    v = doc.string(d, "hash", path)
    if v is None:
        return None
    m = re.match(r"^(?:0x)?([0-9a-fA-F]{1,16})$", v)
    if not m:
        raise InputError("%s: %shash: %r is not a communicator hash" % (doc.name, path, safe(v)[:40]))
    return "0x%x" % int(m.group(1), 16)


def _rank(doc: _Doc, d: Dict[str, Any], path: str) -> RasRank:
    status = doc.obj(d, "status", path)
    sp = path + "status."
    counts_in = doc.obj(d, "collective_counts", path)
    counts: Dict[str, int] = {}
    for op in counts_in:
        if not re.match(r"^[A-Za-z][A-Za-z0-9_]{0,31}$", op):
            raise InputError("%s: %scollective_counts: %r is not an operation name" % (doc.name, path, safe(op)[:40]))
        counts[op] = doc.integer(counts_in, op, path + "collective_counts.", 0, U64_MAX)  # type: ignore[assignment]
    counts = {k: v for k, v in counts.items() if v is not None}
    return RasRank(
        rank=doc.integer(d, "rank", path, 0), host=doc.string(d, "host", path), pid=doc.integer(d, "pid", path),
        cuda_dev=doc.integer(d, "cuda_dev", path), nvml_dev=doc.integer(d, "nvml_dev", path),
        init_state=doc.integer(status, "init_state", sp), async_error=doc.integer(status, "async_error", sp),
        finalize_called=doc.flag(status, "finalize_called", sp), destroy_flag=doc.flag(status, "destroy_flag", sp),
        abort_flag=doc.flag(status, "abort_flag", sp), counts=counts)


def _missing(doc: _Doc, d: Dict[str, Any], path: str) -> RasMissingRank:
    status = doc.obj(d, "status", path)
    return RasMissingRank(
        rank=doc.integer(d, "rank", path, 0), host=doc.string(d, "host", path), pid=doc.integer(d, "pid", path),
        cuda_dev=doc.integer(d, "cuda_dev", path), nvml_dev=doc.integer(d, "nvml_dev", path),
        unresponsive=doc.flag(status, "unresponsive", path + "status."),
        considered_dead=doc.flag(status, "considered_dead", path + "status."))


def _json_time(stamp: Optional[str]) -> Optional[float]:
    """The RAS thread's "%F %T" local time as seconds (read as UTC: only differences are used)."""
    if not stamp:
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")))
    except ValueError:
        return None


def parse_json_query(d: Dict[str, Any], source: str) -> RasQuery:
    """One JSON answer (a parsed document) as a ``RasQuery``: every type and range checked."""
    doc = _Doc(source)
    if "nccl_version" not in d or "communicators" not in d:
        raise InputError("%s: not NCCL RAS JSON (no nccl_version / communicators)" % source)
    q = RasQuery(format=JSON, source=source, nccl_version=doc.string(d, "nccl_version", ""),
                 cuda_runtime_version=doc.integer(d, "cuda_runtime_version", ""),
                 cuda_driver_version=doc.integer(d, "cuda_driver_version", ""),
                 timestamp=doc.string(d, "timestamp", ""),
                 communicators_count=doc.integer(d, "communicators_count", "", 0))
    q.time_s = _json_time(q.timestamp)
    for i, c in enumerate(doc.objs(d, "communicators", "")):
        p = "communicators[%d]." % i
        q.communicators.append(RasCommunicator(
            hash=_hash(doc, c, p), secondary_hash=doc.string(c, "secondary_hash", p),
            size=doc.integer(c, "size", p, 0), ranks_count=doc.integer(c, "ranks_count", p, 0),
            missing_ranks_count=doc.integer(c, "missing_ranks_count", p, 0),
            ranks=[_rank(doc, r, "%sranks[%d]." % (p, j)) for j, r in enumerate(doc.objs(c, "ranks", p))],
            missing_ranks=[_missing(doc, r, "%smissing_ranks[%d]." % (p, j))
                           for j, r in enumerate(doc.objs(c, "missing_ranks", p))]))
    ras = doc.obj(d, "ras", "")
    t = ras.get("collection_time_sec")
    if t is not None:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < 1e6:
            raise InputError("%s: ras.collection_time_sec: expected seconds, got %s" % (source, safe(repr(t))[:40]))
        q.collection_time_s = float(t)
    q.timeouts_count = doc.integer(ras, "timeouts_count", "ras.", 0)
    return q


# --- any form ---------------------------------------------------------------------------------


def parse_ras(text: str, source: str) -> List[RasQuery]:
    """Every query of one saved answer (JSON or text, one or several concatenated), in file order."""
    body = _PREAMBLE.sub("", text.lstrip("\ufeff"), count=1).lstrip()
    if body.startswith("{"):
        return [parse_json_query(d, name) for name, d in _json_documents(body, source)]
    if not HEADER.match(body):
        raise InputError("%s: not NCCL RAS output (neither its JSON nor its text: "
                         "no 'NCCL version ... compiled with CUDA' line first)" % source)
    parts = split_text_queries(body)
    return [parse_text_query(part, source if i == 0 else "%s#%d" % (source, i + 1)) for i, part in enumerate(parts)]


def _read_file(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError("%s: %d MiB is larger than any RAS answer (%d MiB at most)"
                             % (path, size >> 20, MAX_BYTES >> 20))
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    if b"\0" in data[:65536]:
        raise InputError("%s: binary data, not NCCL RAS output" % path)
    return data.decode("utf-8", errors="replace")


def series(queries: Sequence[RasQuery], interval_s: Optional[float] = None) -> RasSeries:
    """Queries as one series: JSON kept over text when both came (the same queries twice), then in
    time order where every query has a time (a stable sort: equal seconds keep the given order)."""
    out = RasSeries(queries=list(queries), interval_s=interval_s)
    forms = {q.format for q in out.queries}
    if forms == {JSON, TEXT}:
        dropped = [q for q in out.queries if q.format == TEXT]
        out.queries = [q for q in out.queries if q.format == JSON]
        out.notes.append("%d text quer%s left out: the JSON queries carry every count"
                         % (len(dropped), "y" if len(dropped) == 1 else "ies"))
    if out.queries and all(q.time_s is not None for q in out.queries):
        ordered = sorted(out.queries, key=lambda q: q.time_s)  # type: ignore[arg-type,return-value]
        if ordered != out.queries:
            out.notes.append("queries put in the order of their timestamps")
            out.queries = ordered
    return out


def read_ras(paths: Sequence[Union[str, Path]], interval_s: Optional[float] = None) -> RasSeries:
    """Saved RAS answers (files, each one or several queries) as one series of queries of a job.
    ``interval_s``: the spacing of the queries when they carry no time (the text form)."""
    if not paths:
        raise InputError("no NCCL RAS file given")
    queries: List[RasQuery] = []
    for p in paths:
        path = Path(p)
        queries.extend(parse_ras(_read_file(path), str(path)))
    return series(queries, interval_s)


def ras_snapshot(text: str, source: str) -> Snapshot:
    """A saved RAS answer given as an input (``inputs.py``): a snapshot with its queries as
    ``nccl_ras``; the analysis joins them to the job's processes by pid.  A paste that holds the
    job's log too (a watchdog's timeout line under the RAS status: open round 58) keeps what the text
    readers find in it as its processes; a bare RAS answer has none."""
    ras = series(parse_ras(text, source))
    try:
        rest = parse_text(text)
    except InputError:
        return Snapshot(nccl_ras=ras)
    return Snapshot(processes=rest.processes, nccl_ras=ras)


def merge_series(parts: Sequence[RasSeries]) -> Optional[RasSeries]:
    """Several inputs' queries (one file per query, or files of several) as one series of the job:
    ordered by time where every query has one (``series``), the readers' notes kept."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    out = series([q for p in parts for q in p.queries])
    out.notes = [n for p in parts for n in p.notes if n not in out.notes] + out.notes
    return out


# --- live --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RasAnswer:
    """A live query's outcome: the parsed answer, or a note saying why there is none."""

    addr: str
    query: Optional[RasQuery] = None
    note: Optional[str] = None


def ras_address(env: Optional[Dict[str, str]] = None) -> Tuple[str, int]:
    """(host, port) where the RAS threads listen: ``NCCL_RAS_ADDR`` ("host:port", "[v6]:port") or
    localhost:28028.  ``env``: the job's environment (a rank's /proc/PID/environ) when known."""
    spec = (env if env is not None else os.environ).get("NCCL_RAS_ADDR") or DEFAULT_ADDR
    host, sep, port = spec.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise InputError("NCCL_RAS_ADDR=%r: expected host:port" % safe(spec)[:80])
    return host.strip("[]"), int(port)


class _Conn:
    """A socket with one deadline for everything: each read waits only for what is left of it."""

    def __init__(self, sock: socket.socket, deadline: float, max_bytes: int) -> None:
        self.sock, self.deadline, self.max_bytes = sock, deadline, max_bytes
        self.buf = b""

    def _recv(self) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        self.sock.settimeout(left)
        return self.sock.recv(65536)

    def line(self) -> str:
        while b"\n" not in self.buf:
            chunk = self._recv()
            if not chunk:
                break
            self.buf += chunk
            if len(self.buf) > 4096:
                break
        text, _, self.buf = self.buf.partition(b"\n")
        return text.decode("utf-8", errors="replace").strip()

    def send(self, text: str) -> None:
        self.sock.settimeout(max(0.01, self.deadline - time.monotonic()))
        self.sock.sendall(text.encode())

    def rest(self) -> bytes:
        """Everything until the server closes, at most ``max_bytes``."""
        chunks = [self.buf]
        total = len(self.buf)
        while True:
            chunk = self._recv()
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > self.max_bytes:
                raise InputError("the answer is larger than %d bytes" % self.max_bytes)


def query_ras(addr: Optional[str] = None, connect_timeout: float = 0.5, timeout: float = 2.0,
              max_bytes: int = MAX_BYTES, env: Optional[Dict[str, str]] = None) -> RasAnswer:
    """One ``VERBOSE STATUS`` of the RAS thread at ``addr`` ("host:port"; default ``NCCL_RAS_ADDR``
    of ``env`` or of this process, else localhost:28028), within ``timeout`` seconds in all.  Never
    raises for the network: RAS off, nothing listening or a server that is not RAS is a note."""
    try:
        host, port = ras_address({"NCCL_RAS_ADDR": addr} if addr else env)
    except InputError as e:
        return RasAnswer(addr=addr or "", note="NCCL RAS not queried: %s" % e)
    where = "%s:%d" % (host, port)
    start = time.monotonic()
    try:
        sock = socket.create_connection((host, port), timeout=min(connect_timeout, timeout))
    except ConnectionRefusedError:
        return RasAnswer(where, note="NCCL RAS: nothing listens on %s (RAS is off: NCCL_RAS_ENABLE=0, NCCL "
                         "older than 2.24, or no NCCL process on this host)" % where)
    except (socket.timeout, OSError) as e:
        return RasAnswer(where, note="NCCL RAS at %s unreachable: %s" % (where, safe(str(e) or "timed out")[:120]))
    conn = _Conn(sock, start + timeout, max_bytes)
    try:
        return _converse(conn, where)
    except socket.timeout:
        return RasAnswer(where, note="NCCL RAS at %s did not answer within %g s" % (where, timeout))
    except InputError as e:
        return RasAnswer(where, note="NCCL RAS at %s: %s" % (where, e))
    except OSError as e:
        return RasAnswer(where, note="NCCL RAS at %s: %s" % (where, safe(str(e))[:120]))
    finally:
        sock.close()


def _converse(conn: _Conn, where: str) -> RasAnswer:
    conn.send("CLIENT PROTOCOL 2\n")
    hello = conn.line()
    if not hello.upper().startswith("SERVER PROTOCOL "):
        return RasAnswer(where, note="%s is not NCCL RAS (it answered %r)" % (where, safe(hello)[:60]))
    conn.send("TIMEOUT 1\n")  # the RAS network's own collection waits 5 s per leg by default
    conn.line()  # "OK" (an error only leaves NCCL's default)
    conn.send("SET FORMAT json\n")
    form = JSON if conn.line().upper() == "OK" else TEXT  # NCCL < 2.28.7: "ERROR: Unknown command"
    when = time.time()
    conn.send("VERBOSE STATUS\n")
    text = conn.rest().decode("utf-8", errors="replace")
    if not text.strip():
        return RasAnswer(where, note="NCCL RAS at %s closed without an answer" % where)
    queries = parse_ras(text, where)
    if len(queries) != 1 or queries[0].format != form:
        return RasAnswer(where, note="NCCL RAS at %s: unexpected answer (%d queries)" % (where, len(queries)))
    queries[0].time_s = when
    return RasAnswer(where, query=queries[0])


def sample_ras(count: int = 3, interval_s: float = 2.0, addr: Optional[str] = None,
               env: Optional[Dict[str, str]] = None, timeout: float = 2.0) -> Tuple[RasSeries, List[str]]:
    """``count`` queries ``interval_s`` apart (the first at once): the series and the notes of the
    queries that failed.  Stops at the first failure of the first query (RAS off: no use waiting)."""
    queries: List[RasQuery] = []
    notes: List[str] = []
    for i in range(count):
        if i:
            time.sleep(interval_s)
        answer = query_ras(addr, timeout=timeout, env=env)
        if answer.query is not None:
            queries.append(answer.query)
        elif answer.note:
            notes.append(answer.note)
            if not queries:
                break
    return series(queries), notes
