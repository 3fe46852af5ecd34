"""PyTorch flight-recorder dumps as per-rank collective facts (``Process.collectives``).

With ``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` and a flight-recorder buffer, every rank's watchdog writes
``<TORCH_FR_DUMP_TEMP_FILE><rank>`` when a collective times out: the last collectives the rank
enqueued (sequence number, op, sizes, state, the Python + C++ call site) and, per process group,
the last enqueued / started / completed sequence numbers.  Stacks cannot say which collective a
rank is in; these files can, which is what the job view needs to name the straggler.

The files are pickles, and a pickle is a program: ``safe_pickle`` loads them as plain data only
(an opcode scan, a restricted unpickler, a walk of the result), so no byte sequence can run
code, exhaust memory or crash the interpreter.  PyTorch also writes the same content as JSON
(``_dump_nccl_trace_json``, the debug HTTP handler): keys sorted, no stack frames, and
``pg_status`` numbers as strings; the standard ``json`` module reads it, within the same caps.

Only then are the fields read, each type-checked (a number where a name is expected would
otherwise surface as a traceback far away, in matching or rendering), into the typed records of
``model.collectives``.  Every refusal is one ``InputError`` line that names the file.

The watchdog's log lines give the same facts without a dump: ``acquire/text/watchdog.py``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from hanganalyze.acquire import safe_pickle
from hanganalyze.acquire.ranks import MAX_RANK, rank_from_name
from hanganalyze.acquire.safe_pickle import CONTROL, Refused, check_plain, load_pickle, one_line
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import DistIdentity, Frame, Process
from hanganalyze_gdbext.model.collectives import (
    FLIGHT_RECORDER,
    CollectiveGroup,
    Collectives,
    FlightRecorderEntry,
)

FORMAT_NAME = "flight-recorder"

#: A real dump of 2000 entries (PyTorch's default buffer) with stack traces is a few MiB.
MAX_FILE_BYTES = 64 << 20
#: The newest entries kept; a dump holds TORCH_FR_BUFFER_SIZE of them (2000 by default).
MAX_ENTRIES = 20_000
#: Frames kept per call site (innermost first) and in all, so a huge dump stays a small snapshot.
MAX_FRAMES_PER_ENTRY = 256
MAX_CALL_SITE_FRAMES = 100_000
#: Strings from a dump are cut to this length (C++ template names reach a few KiB).
MAX_STRING = 4096
#: Process groups (a job has a few per parallelism dimension) and ranks listed in all groups.
MAX_GROUPS = 1 << 16
MAX_GROUP_RANKS = 1 << 20
#: Tensors per collective and dimensions per tensor kept in ``sizes``, and sizes + dtypes in all.
MAX_TENSORS = 1024
MAX_DIMS = 16
MAX_SIZE_VALUES = 1_000_000

_INT64 = 1 << 63


# --------------------------------------------------------------------------------------------
# Sniffing
# --------------------------------------------------------------------------------------------

#: Top-level keys only a flight-recorder dump has (``nccl_version`` in older versions such as 2.7,
#: where 2.10 says ``comm_lib_version``; vendors' forks rename ``nccl_comm_state`` to
#: ``hccl_comm_state`` and the like).
_FR_KEYS = frozenset({"pg_config", "pg_status", "comm_lib_version", "nccl_version", "nccl_comm_state"})
_FR_GENERIC_KEYS = frozenset({"entries", "version"})
_SNIFF_BYTES = 1 << 16
_SNIFF_KEYS = 64

_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\r\n]*")


def _json_top_keys(text: str) -> Optional[List[str]]:
    """The keys of the top-level JSON object, as far as ``text`` (a file's head, maybe cut) goes.

    None when the text does not start an object.  The json module reads member by member: a key,
    then its value (``raw_decode``); the first value that does not parse (cut by the head's end,
    or nested past the recursion limit, which json's C scanner checks) ends the list.  Linear in
    the head (``_SNIFF_BYTES``).
    """
    i = _WS.match(text).end()
    if text[i:i + 1] != "{":
        return None
    keys: List[str] = []
    i = _WS.match(text, i + 1).end()
    while len(keys) < _SNIFF_KEYS and text[i:i + 1] == '"':
        try:
            key, i = json.decoder.scanstring(text, i + 1)
        except ValueError:  # cut inside the key
            break
        i = _WS.match(text, i).end()
        if text[i:i + 1] != ":":
            break
        keys.append(key)
        try:
            _, i = _DECODER.raw_decode(text, _WS.match(text, i + 1).end())
        except (ValueError, RecursionError):  # the head ends inside the value, or it nests too deeply
            break
        i = _WS.match(text, i).end()
        if text[i:i + 1] != ",":
            break
        i = _WS.match(text, i + 1).end()
    return keys if keys or text[i:i + 1] == "}" else None


def looks_like_flight_recorder(head: bytes) -> bool:
    """True when the first bytes of a file are a flight-recorder dump (pickle or JSON).

    Cheap, so that input detection can ask it of every file: a pickle header (protocol 2-5,
    then the dump's dict) with one of the dump's key names in view, or a JSON object whose
    top-level keys include two of the dump's (one of them specific to it: ``pg_status``,
    ``pg_config``, ``comm_lib_version`` ...).  A hanganalyze snapshot (``"schema"`` first) and
    JSON that merely has an ``"entries"`` key are not claimed.
    """
    head = head[:_SNIFF_BYTES]
    if len(head) >= 3 and head[0] == 0x80 and 2 <= head[1] <= 5:
        pos = 2
        if head[pos:pos + 1] == b"\x95":  # FRAME (protocol 4+): 8-byte length
            pos += 9
        if head[pos:pos + 1] != b"}":  # EMPTY_DICT: the dump is a dict
            return False
        return any(k.encode() in head for k in _FR_KEYS) or (
            b"entries" in head and b"version" in head and b"profiling_name" in head)
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    keys = _json_top_keys(text)
    if not keys or "schema" in keys:
        return False
    found = set(keys)
    specific = found & _FR_KEYS
    if specific and (len(specific) > 1 or found & _FR_GENERIC_KEYS):
        return True
    return _FR_GENERIC_KEYS <= found and ('"profiling_name"' in text or '"collective_seq_id"' in text)



# --------------------------------------------------------------------------------------------
# The JSON form
# --------------------------------------------------------------------------------------------


def _no_big_int(text: str) -> int:
    """json's parse_int: 64-bit numbers only (a million-digit one is slow to convert)."""
    if len(text) > 20:
        raise Refused("it has a %d-digit integer" % len(text))
    return int(text)


def _load_json(data: bytes) -> Any:
    """The JSON dump as plain data, within the pickle's caps (``check_plain`` bounds the depth)."""
    # json has no object cap of its own: 64 MiB of ``[],`` would be 20 million lists.  Every value
    # but the last of a container is followed by a comma, so this counts (over-counts) them.
    if data.count(b",") + data.count(b"[") + data.count(b"{") > safe_pickle.MAX_OBJECTS:
        raise Refused("it holds more than %d values" % safe_pickle.MAX_OBJECTS)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused("it is not UTF-8 (byte %d)" % e.start) from None
    try:
        return json.loads(text.lstrip("\ufeff"), parse_int=_no_big_int)
    except Refused:
        raise
    except RecursionError:
        raise Refused("it nests too deeply") from None
    except json.JSONDecodeError as e:
        raise Refused("invalid JSON: %s at line %d column %d" % (e.msg, e.lineno, e.colno)) from None
    except (ValueError, MemoryError) as e:
        raise Refused("invalid JSON: %s" % one_line(str(e), 200)) from None


# --------------------------------------------------------------------------------------------
# Reading the fields
# --------------------------------------------------------------------------------------------


def _display(path: Union[str, Path]) -> str:
    """A path as messages show it: bytes that were not UTF-8 as ``\\xNN``, one line."""
    try:
        raw = os.fsencode(str(path))
    except UnicodeError:  # a surrogate that surrogateescape did not make
        raw = str(path).encode("utf-8", "backslashreplace")
    return one_line(raw.decode("utf-8", "backslashreplace"), 1024)


def _tname(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _int(value: Any, where: str, numeric_str: bool = False) -> Optional[int]:
    """An integer field (None stays None); numeric strings too where JSON writes them so."""
    if value is None:
        return None
    if type(value) is int:
        if -_INT64 <= value < _INT64:
            return value
        raise Refused("%s is out of the 64-bit range" % where)
    if numeric_str and type(value) is str and re.fullmatch(r"-?\d{1,19}", value):
        return int(value)
    raise Refused("%s is a %s, expected an integer" % (where, _tname(value)))


def _str(value: Any, where: str) -> Optional[str]:
    if value is None:
        return None
    if type(value) is str:
        return one_line(value) if len(value) > MAX_STRING or CONTROL.search(value) else value
    raise Refused("%s is a %s, expected a string" % (where, _tname(value)))


def _bool(value: Any, where: str) -> Optional[bool]:
    if value is None:
        return None
    if type(value) is bool:
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise Refused("%s is a %s, expected a boolean" % (where, _tname(value)))


def _seq(value: Any, where: str, limit: Optional[int] = None) -> Sequence[Any]:
    """A list or tuple (the first ``limit`` items), [] for None."""
    if value is None:
        return []
    if type(value) in (list, tuple):
        return value[:limit] if limit is not None and len(value) > limit else value
    raise Refused("%s is a %s, expected a list" % (where, _tname(value)))


def _dict(value: Any, where: str) -> Dict[Any, Any]:
    if value is None:
        return {}
    if type(value) is dict:
        return value
    raise Refused("%s is a %s, expected a dict" % (where, _tname(value)))


_RANKS = re.compile(r"\[\s*(-?\d{1,8}(?:\s*,\s*-?\d{1,8})*)?\s*\]")


def _ranks(value: Any, where: str) -> Optional[List[int]]:
    """A group's ranks: the string ``"[0, 1]"`` the dumps write, or a list of integers.

    Parsed by a regular expression, never ``ast.literal_eval``/``eval`` (fr_trace evals it).
    """
    if value is None:
        return None
    if type(value) is str:
        if len(value) > 12 * MAX_GROUP_RANKS or not _RANKS.fullmatch(value.strip()):
            raise Refused("%s is not a list of ranks" % where)
        inner = value.strip()[1:-1].strip()
        out = [int(x) for x in inner.split(",")] if inner else []
    else:
        out = list(_seq(value, where, MAX_GROUP_RANKS + 1))
    if any(type(r) is not int or not 0 <= r < MAX_RANK for r in out):
        raise Refused("%s has a rank out of range, or not a number" % where)
    return out


#: Python files of torch itself: the user's call site is the innermost frame outside them.
_TORCH_PY = re.compile(
    r"(?:^|/)(?:site-packages|dist-packages)/torch/"
    r"|(?:^|/)torch/(?:distributed|nn|autograd|cuda|utils|_dynamo|_inductor|fx|multiprocessing|testing|"
    r"optim|amp|jit|_tensor\.py|functional\.py|_ops\.py|overrides\.py)")


#: Converted frames by the id of the dump's frame dict: the dumps share one dict per distinct
#: frame among all entries (the pickler's memo), so each is checked and converted once.
_FrameCache = Dict[int, Tuple[Frame, Optional[str]]]


def _frame(f: Any, where: str, i: int, cache: _FrameCache) -> Tuple[Frame, Optional[str]]:
    """(Frame, ``function (file.py:line)`` when it is a Python frame outside torch, else None)."""
    hit = cache.get(id(f))
    if hit is not None:
        return hit
    where = "%s[%d]" % (where, i)
    f = _dict(f, where)
    name = _str(f.get("name"), where + ".name")
    filename = _str(f.get("filename"), where + ".filename")
    line = _int(f.get("line"), where + ".line")
    user = None
    if filename is not None and filename.endswith(".py"):
        fd = Frame(kind="python", function=name, file=filename, line=line)
        if not _TORCH_PY.search(filename):
            user = "%s (%s:%s)" % (name or "??", filename.rsplit("/", 1)[-1], line if line is not None else "?")
    else:
        fd = Frame(kind="native", function=name or None, file=filename if filename not in (None, "", "??") else None,
                   line=line if line else None)
    cache[id(f)] = (fd, user)
    return fd, user


def _frames(
    value: Any, where: str, cache: _FrameCache, users: Dict[int, Optional[str]], budget: int
) -> Tuple[List[Frame], Optional[str], bool]:
    """(call site as Frames, innermost first, or [] past the budget; the user's frame; cut).

    The frames keep the dump's order: C++ frames innermost first, then Python frames innermost
    first (PyTorch's symbolizer puts the innermost Python frame among the C++ ones, at the
    interpreter's frame, and the other Python frames after the C++ ones).  ``users`` caches the
    user's frame by the id of the frames list, for lists shared among entries.
    """
    frames = _seq(value, where, MAX_FRAMES_PER_ENTRY)
    keep = len(frames) <= budget
    if not keep and id(value) in users:
        return [], users[id(value)], bool(frames)
    call_site: List[Frame] = []
    user: Optional[str] = None
    for i, f in enumerate(frames):
        fd, u = _frame(f, where, i, cache)
        if keep:
            call_site.append(replace(fd))  # a Frame of its own per entry, as a snapshot read back has
        if user is None:
            user = u
    users[id(value)] = user
    return call_site, user, not keep


def _sizes(value: Any, where: str) -> List[List[int]]:
    """``input_sizes``: a list of shapes.  Field paths are formatted only for the message."""
    out = []
    for i, shape in enumerate(_seq(value, where, MAX_TENSORS)):
        if type(shape) not in (list, tuple):
            raise Refused("%s[%d] is a %s, expected a list" % (where, i, _tname(shape)))
        dims = shape[:MAX_DIMS]
        for j, d in enumerate(dims):
            if type(d) is not int or not -_INT64 <= d < _INT64:
                _int(d, "%s[%d][%d]" % (where, i, j))  # raises, with the message
        out.append(list(dims))
    return out


def _strings(value: Any, where: str) -> List[Optional[str]]:
    """``input_dtypes``: a list of names."""
    out: List[Optional[str]] = []
    for i, d in enumerate(_seq(value, where, MAX_TENSORS)):
        out.append(d if type(d) is str and len(d) <= 64 and d.isprintable() else _str(d, "%s[%d]" % (where, i)))
    return out


def _op_name(profiling_name: Optional[str]) -> Optional[str]:
    """``nccl:all_reduce`` -> ``all_reduce``; ``nccl:send 0->1`` -> ``send``."""
    if not profiling_name:
        return None
    name = profiling_name.split(":", 1)[-1].strip()
    return name.split(" ", 1)[0] or None


class _Budget:
    """What the entries kept may still hold in all: a hostile dump can share one huge list among
    all its entries (the memo), which must not become a huge snapshot."""

    def __init__(self) -> None:
        self.frames = MAX_CALL_SITE_FRAMES
        self.values = MAX_SIZE_VALUES
        self.cut_frames = self.cut_sizes = False
        self.users: Dict[int, Optional[str]] = {}


def _entry(e: Any, where: str, budget: _Budget, cache: _FrameCache
           ) -> Tuple[FlightRecorderEntry, Optional[str], Optional[str]]:
    """One entry, and its group's (name, desc) from ``process_group``."""
    e = _dict(e, where)
    coll_seq = _int(e.get("collective_seq_id", e.get("seq_id")), where + ".collective_seq_id")
    p2p_seq = _int(e.get("p2p_seq_id"), where + ".p2p_seq_id")
    profiling_name = _str(e.get("profiling_name"), where + ".profiling_name")
    op = _op_name(profiling_name)
    p2p = _bool(e.get("is_p2p"), where + ".is_p2p")
    if p2p is None:
        p2p = op in ("send", "recv")
    pg_id = _int(e.get("pg_id"), where + ".pg_id")
    pg_name = pg_desc = None
    if e.get("process_group") is not None:
        pgv = _seq(e.get("process_group"), where + ".process_group")
        pg_name = _str(pgv[0], where + ".process_group[0]") if len(pgv) > 0 else None
        pg_desc = _str(pgv[1], where + ".process_group[1]") if len(pgv) > 1 else None
    sizes: List[List[int]] = []
    dtypes: List[Optional[str]] = []
    if budget.values > 0:  # once an entry's sizes did not fit, older entries get none either
        sizes = _sizes(e.get("input_sizes"), where + ".input_sizes")
        dtypes = _strings(e.get("input_dtypes"), where + ".input_dtypes")
        used = len(dtypes) + sum(len(x) + 1 for x in sizes)
        if used > budget.values:
            sizes, dtypes, budget.cut_sizes, budget.values = [], [], True, 0
        else:
            budget.values -= used
    elif e.get("input_sizes") or e.get("input_dtypes"):
        budget.cut_sizes = True
    call_site: List[Frame] = []
    user_frame = None
    if e.get("frames") is not None:
        call_site, user_frame, cut = _frames(e.get("frames"), where + ".frames", cache, budget.users, budget.frames)
        budget.frames -= len(call_site)
        budget.cut_frames = budget.cut_frames or cut
    out = FlightRecorderEntry(
        seq=p2p_seq if p2p and p2p_seq is not None else coll_seq,
        pg=str(pg_id) if pg_id is not None else pg_name,
        op=op,
        profiling_name=profiling_name,
        state=_str(e.get("state"), where + ".state"),
        p2p=p2p,
        sizes=sizes,
        dtypes=dtypes,
        timeout_ms=_int(e.get("timeout_ms"), where + ".timeout_ms"),
        time_created_ns=_int(e.get("time_created_ns"), where + ".time_created_ns"),
        call_site=call_site,
        user_frame=user_frame,
    )
    # The group's name and description go aside, to join groups (pg_status is keyed by pg_id,
    # pg_config by the group's name).
    return out, pg_name, pg_desc


def _extract(doc: Any, notes: List[str]) -> Tuple[Collectives, Optional[int]]:
    """The collectives record and the rank a dump names (None when it names none)."""
    if type(doc) is not dict:
        raise Refused("its top level is a %s, not a dict" % _tname(doc))
    if not any(k in doc for k in ("entries", "pg_status", "pg_config")):
        raise Refused("it has none of the keys entries, pg_status, pg_config")
    version = _str(doc.get("version"), "version")
    comm = _str(doc.get("comm_lib_version", doc.get("nccl_version")), "comm_lib_version")
    rank = _int(doc.get("rank"), "rank", numeric_str=True)
    if rank is not None and not 0 <= rank < MAX_RANK:
        raise Refused("rank is out of range")
    pg_config = _dict(doc.get("pg_config"), "pg_config")
    pg_status = _dict(doc.get("pg_status"), "pg_status")
    raw_entries = _seq(doc.get("entries"), "entries")
    first = max(0, len(raw_entries) - MAX_ENTRIES)
    if first:
        notes.append("flight recorder: the oldest %d of %d entries were left out" % (first, len(raw_entries)))
    read = []
    budget = _Budget()
    cache: _FrameCache = {}
    for i in range(len(raw_entries) - 1, first - 1, -1):  # newest first: they get the call sites
        read.append(_entry(raw_entries[i], "entries[%d]" % i, budget, cache))
    read.reverse()
    entries = [e for e, _, _ in read]
    if budget.cut_frames:
        notes.append("flight recorder: call sites of the oldest entries were left out (%d frames kept)"
                     % MAX_CALL_SITE_FRAMES)
    if budget.cut_sizes:
        notes.append("flight recorder: tensor sizes of the oldest entries were left out")
    if len(pg_status) + len(pg_config) > MAX_GROUPS:
        raise Refused("it has more than %d process groups" % MAX_GROUPS)
    return Collectives(source=FLIGHT_RECORDER, version=version, comm_lib_version=comm,
                       groups=_groups(read, pg_status, pg_config), entries=list(entries)), rank


def _groups(read: List[Tuple[FlightRecorderEntry, Optional[str], Optional[str]]], pg_status: Dict[Any, Any],
            pg_config: Dict[Any, Any]) -> Dict[str, CollectiveGroup]:
    """Groups: pg_status (keyed by pg_id), named through the entries' (name, desc) and pg_config."""
    names: Dict[str, Tuple[Optional[str], Optional[str]]] = {}
    id_of_name: Dict[str, str] = {}
    for e, pg_name, pg_desc in read:
        if e.pg is not None and e.pg not in names:
            names[e.pg] = (pg_name, pg_desc)
            if pg_name is not None:
                id_of_name.setdefault(pg_name, e.pg)
    groups: Dict[str, CollectiveGroup] = {}
    config_used = set()
    listed = [0]

    parsed: Dict[int, Optional[List[int]]] = {}  # by id: groups may share one (huge) ranks string

    def ranks_of(cfg: Dict[Any, Any], k: str) -> Optional[List[int]]:
        value = cfg.get("ranks")
        if id(value) not in parsed:
            parsed[id(value)] = _ranks(value, "pg_config[%s].ranks" % k)
        out = parsed[id(value)]
        out = list(out) if out is not None else None
        listed[0] += len(out or ())
        if listed[0] > MAX_GROUP_RANKS:
            raise Refused("its process groups list more than %d ranks in all" % MAX_GROUP_RANKS)
        return out

    def config_of(name: Optional[str], where: str) -> Dict[Any, Any]:
        if name is None or name not in pg_config:
            return {}
        config_used.add(name)
        return _dict(pg_config[name], "pg_config[%s]" % where)

    for key, st in pg_status.items():
        if type(key) is not str and type(key) is not int:
            raise Refused("pg_status has a %s key, expected a string" % _tname(key))
        k = one_line(str(key), 256)
        where = "pg_status[%s]" % k
        st = _dict(st, where)
        name, desc = names.get(k, (None, None))
        cfg = config_of(name, k) or config_of(k, k)
        groups[k] = CollectiveGroup(
            name=_str(cfg.get("name"), "pg_config[%s].name" % k) or name,
            desc=_str(cfg.get("desc"), "pg_config[%s].desc" % k) or desc,
            ranks=ranks_of(cfg, k),
            last_enqueued=_int(st.get("last_enqueued_collective"), where + ".last_enqueued_collective", True),
            last_started=_int(st.get("last_started_collective"), where + ".last_started_collective", True),
            last_completed=_int(st.get("last_completed_collective"), where + ".last_completed_collective", True),
        )
    # Groups the status does not list (dumps before pg_status, or groups with no collective yet):
    # from pg_config, and their progress from the entries when the dump has no pg_status at all.
    for name, cfg in pg_config.items():
        if type(name) is not str:
            raise Refused("pg_config has a %s key, expected a string" % _tname(name))
        if name in config_used:
            continue
        k = one_line(id_of_name.get(name, name), 256)
        if k in groups:
            continue
        cfg = _dict(cfg, "pg_config[%s]" % k)
        groups[k] = CollectiveGroup(name=_str(cfg.get("name"), "pg_config[%s].name" % k) or name,
                                    desc=_str(cfg.get("desc"), "pg_config[%s].desc" % k), ranks=ranks_of(cfg, k))
    if not pg_status:
        for e, pg_name, pg_desc in read:
            if e.p2p or e.pg is None or not isinstance(e.seq, int):
                continue
            g = groups.setdefault(e.pg, CollectiveGroup(name=pg_name, desc=pg_desc))
            g.derived = "entries"
            g.last_enqueued = max(g.last_enqueued or e.seq, e.seq)
            if e.state == "completed":
                g.last_completed = max(g.last_completed or e.seq, e.seq)
            if e.state in ("started", "completed"):
                g.last_started = max(g.last_started or e.seq, e.seq)
    return groups


def read_flight_recorder(path: Path) -> Process:
    """One rank's flight-recorder dump (pickle or JSON) as a Process with ``collectives`` and no threads.

    The rank is the dump's own ``rank`` key when a format has one, else the digits after
    ``rank`` in the file's name (``straggler.fr.rank_0``, ``fr_rank-12.json``), else None.
    Any problem is one InputError line naming the file; nothing in the file is ever executed.
    """
    name = _display(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (name, e.strerror or type(e).__name__)) from None
    except ValueError:  # a NUL or an unencodable character in the name
        raise InputError("cannot read %s: the name is not a valid path" % name) from None
    if not data:
        raise InputError("%s: the flight-recorder dump is empty" % name)
    kind = "JSON" if data.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"{" else "pickle"
    notes: List[str] = []
    try:
        if len(data) > MAX_FILE_BYTES:
            raise Refused("it is larger than %d MiB" % (MAX_FILE_BYTES >> 20))
        doc = load_pickle(data) if kind == "pickle" else _load_json(data)
        del data
        check_plain(doc)
        coll, rank = _extract(doc, notes)
    except Refused as e:
        raise InputError("%s: flight-recorder %s refused: %s" % (name, kind, one_line(str(e), 1000))) from None
    except RecursionError:  # defensive: nothing above recurses on the data
        raise InputError("%s: flight-recorder %s refused: it nests too deeply" % (name, kind)) from None
    coll.file = name
    source = "flight-recorder dump"
    if rank is None:
        rank = rank_from_name(os.path.basename(str(path)))  # not the display name: its \xNN has a "\"
        source = "flight-recorder file name"
    dist = DistIdentity(from_=source) if rank is not None else None
    label = "rank %d" % rank if rank is not None else _display(os.path.basename(str(path)))
    return Process(source="flight-recorder", rank=rank, dist=dist, collectives=coll, label=label, notes=notes)

