"""PyTorch flight-recorder dumps (and the watchdog's log lines) as per-rank collective facts.

With ``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` and a flight-recorder buffer, every rank's watchdog writes
``<TORCH_FR_DUMP_TEMP_FILE><rank>`` when a collective times out: the last collectives the rank
enqueued (sequence number, op, sizes, state, the Python + C++ call site) and, per process group,
the last enqueued / started / completed sequence numbers.  Stacks cannot say which collective a
rank is in; these files can, which is what the job view needs to name the straggler.

The files are pickles, and a pickle is a program: ``pickle.load`` of a hostile file runs any
callable it names.  They are read here in three steps, so that no byte sequence can run code,
exhaust memory or crash the interpreter:

1. ``_scan_pickle`` walks the opcodes without building anything and refuses every opcode that
   names a global, calls an object, asks for a persistent id or extension code, or builds a set;
   it also refuses what would crash or exhaust the C unpickler even with no global at all: a
   tuple nested a million deep used as a dict key (``hash`` recurses in C without a depth check:
   a segmentation fault), and a memo index in the billions (the C unpickler grows its memo array
   to that index: a 9-byte pickle asks for tens of GiB).
2. ``_PlainUnpickler`` (``find_class`` and ``persistent_load`` refuse everything) builds the value:
   a second line of defence, should the scan miss an opcode.
3. ``_check_plain`` walks the result iteratively: only dict, list, tuple, str, bytes, int, float,
   bool and None, no cycles, bounded depth and size.

Only then are the fields read, each type-checked (a number where a name is expected would
otherwise surface as a traceback far away, in matching or rendering).  Every refusal is one
``InputError`` line that names the file.

PyTorch also writes the same content as JSON (``_dump_nccl_trace_json``, the debug HTTP handler):
keys sorted, no stack frames, and ``pg_status`` numbers as strings.  Both forms are read.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from hanganalyze.acquire.ranks import MAX_RANK, rank_from_name
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Frame, Process

FORMAT_NAME = "flight-recorder"

#: A real dump of 2000 entries (PyTorch's default buffer) with stack traces is a few MiB.
MAX_FILE_BYTES = 64 << 20
#: Objects the pickle may build (strings, numbers, containers): bounds memory before anything is built.
MAX_OBJECTS = 4_000_000
#: Memo indices: the C unpickler allocates its memo array up to the largest index it is given.
MAX_MEMO_INDEX = 1 << 23
#: Tuples inside tuples: hashing one recurses in C once per level, without a recursion check.
MAX_TUPLE_DEPTH = 16
#: Container nesting: a dump is 6 deep (dump -> entries -> entry -> frames -> frame -> value).
MAX_DEPTH = 64
#: Container items in all (each needs at least one opcode, so this is also bounded by the size).
MAX_ITEMS = 16_000_000
#: Integers are 64-bit in a dump; a bigger one is a hostile file (and slow to print).
MAX_INT_BYTES = 16
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
#: Lines of a log looked at, and their length (a megabyte-long line must not be slow).
MAX_MESSAGES = 200_000
MAX_LINE = 20_000

_SCALARS = (str, bytes, int, float, bool, type(None))
_INT64 = 1 << 63


class _Refused(Exception):
    """Why a dump is not loaded: the end of the InputError line."""


# --------------------------------------------------------------------------------------------
# Sniffing
# --------------------------------------------------------------------------------------------

#: Top-level keys only a flight-recorder dump has (``nccl_version`` in older versions such as 2.7,
#: where 2.10 says ``comm_lib_version``; vendors' forks rename ``nccl_comm_state`` to
#: ``hccl_comm_state`` and the like).
_FR_KEYS = frozenset({"pg_config", "pg_status", "comm_lib_version", "nccl_version", "nccl_comm_state"})
_FR_GENERIC_KEYS = frozenset({"entries", "version"})
_SNIFF_BYTES = 1 << 16

_JSON_KEY = re.compile(r'"((?:[^"\\\n]|\\.){0,256})"\s*:')
_JSON_SPECIAL = re.compile(r'["{}\[\],]')
_JSON_IN_STRING = re.compile(r'["\\]')
_WS = " \t\r\n"


def _json_top_keys(text: str) -> Optional[List[str]]:
    """The keys of the top-level JSON object, as far as ``text`` (maybe truncated) goes.

    None when the text does not start an object.  Values are skipped without parsing them
    (strings, brackets and commas only), so it is linear and never recurses.
    """
    n = len(text)
    i = 0
    while i < n and text[i] in _WS:
        i += 1
    if i >= n or text[i] != "{":
        return None
    i += 1
    keys: List[str] = []
    while len(keys) < 64:
        while i < n and text[i] in _WS:
            i += 1
        if i >= n or text[i] == "}":
            return keys
        m = _JSON_KEY.match(text, i)
        if not m:
            return keys if keys else None
        keys.append(m.group(1))
        i = m.end()
        depth = 0
        while True:
            m = _JSON_SPECIAL.search(text, i)
            if not m:
                return keys
            c = m.group()
            i = m.end()
            if c == '"':
                while True:
                    s = _JSON_IN_STRING.search(text, i)
                    if not s:
                        return keys
                    i = s.end() + (1 if s.group() == "\\" else 0)
                    if s.group() == '"':
                        break
            elif c in "{[":
                depth += 1
            elif c in "}]":
                if depth == 0:
                    return keys
                depth -= 1
            elif depth == 0:  # a comma between top-level members
                break
    return keys


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
# Step 1: the opcode scan
# --------------------------------------------------------------------------------------------

# Opcode classes (see pickletools for the opcodes themselves).
(_K_FIXED, _K_COUNTED, _K_LINE, _K_EMPTY, _K_EMPTY_TUPLE, _K_MARK, _K_FROM_MARK, _K_TUPLE_MARK,
 _K_TUPLE_N, _K_APPEND, _K_SETITEM, _K_POP, _K_POP_MARK, _K_DUP, _K_PUT, _K_PUT_LINE, _K_MEMOIZE,
 _K_GET, _K_GET_LINE, _K_PROTO, _K_FRAME, _K_STOP, _K_REFUSE) = range(23)

_OPS: Dict[int, Tuple[int, Any]] = {}


def _op(code: bytes, kind: int, arg: Any = None) -> None:
    _OPS[code[0]] = (kind, arg)


for _c, _n in ((b"K", 1), (b"M", 2), (b"J", 4), (b"G", 8), (b"N", 0), (b"\x88", 0), (b"\x89", 0)):
    _op(_c, _K_FIXED, _n)  # BININT1 BININT2 BININT BINFLOAT NONE NEWTRUE NEWFALSE
# (length bytes, is a string, is an integer): SHORT_BINSTRING SHORT_BINBYTES SHORT_BINUNICODE LONG1
# BINSTRING BINBYTES BINUNICODE LONG4 BINUNICODE8 BINBYTES8
for _c, _n, _s, _i in ((b"U", 1, True, False), (b"C", 1, True, False), (b"\x8c", 1, True, False),
                       (b"\x8a", 1, False, True), (b"T", 4, True, False), (b"B", 4, True, False),
                       (b"X", 4, True, False), (b"\x8b", 4, False, True), (b"\x8d", 8, True, False),
                       (b"\x8e", 8, True, False)):
    _op(_c, _K_COUNTED, (_n, _s, _i))
for _c, _i in ((b"I", True), (b"L", True), (b"F", False), (b"S", False), (b"V", False)):
    _op(_c, _K_LINE, _i)  # INT LONG FLOAT STRING UNICODE (protocol 0 text)
_op(b"]", _K_EMPTY)  # EMPTY_LIST
_op(b"}", _K_EMPTY)  # EMPTY_DICT
_op(b")", _K_EMPTY_TUPLE)
_op(b"(", _K_MARK)
_op(b"l", _K_FROM_MARK)  # LIST
_op(b"d", _K_FROM_MARK)  # DICT
_op(b"t", _K_TUPLE_MARK)  # TUPLE
_op(b"\x85", _K_TUPLE_N, 1)
_op(b"\x86", _K_TUPLE_N, 2)
_op(b"\x87", _K_TUPLE_N, 3)
_op(b"a", _K_APPEND, False)  # APPEND
_op(b"e", _K_APPEND, True)  # APPENDS
_op(b"s", _K_SETITEM, False)  # SETITEM
_op(b"u", _K_SETITEM, True)  # SETITEMS
_op(b"0", _K_POP)
_op(b"1", _K_POP_MARK)
_op(b"2", _K_DUP)
_op(b"q", _K_PUT, 1)  # BINPUT
_op(b"r", _K_PUT, 4)  # LONG_BINPUT
_op(b"p", _K_PUT_LINE)  # PUT
_op(b"\x94", _K_MEMOIZE)
_op(b"h", _K_GET, 1)  # BINGET
_op(b"j", _K_GET, 4)  # LONG_BINGET
_op(b"g", _K_GET_LINE)  # GET
_op(b"\x80", _K_PROTO)
_op(b"\x95", _K_FRAME)
_op(b".", _K_STOP)
for _c, _why in (
    (b"c", "global"), (b"\x93", "global"), (b"i", "global"),
    (b"R", "a call of an object (REDUCE)"), (b"o", "a call of an object (OBJ)"),
    (b"\x81", "a call of an object (NEWOBJ)"), (b"\x92", "a call of an object (NEWOBJ_EX)"),
    (b"b", "a call of __setstate__ (BUILD)"), (b"P", "a persistent id"), (b"Q", "a persistent id"),
    (b"\x82", "extension"), (b"\x83", "extension"), (b"\x84", "extension"),
    (b"\x97", "an out-of-band buffer"), (b"\x98", "an out-of-band buffer"),
    (b"\x8f", "a set"), (b"\x90", "a set"), (b"\x91", "a frozenset"), (b"\x96", "a bytearray"),
):
    _op(_c, _K_REFUSE, _why)


def _printable(raw: bytes, limit: int = 80) -> str:
    """Bytes named in a message: decoded, control characters escaped, cut."""
    text = raw[:limit].decode("utf-8", "backslashreplace")
    return "".join(ch if ch.isprintable() else "\\x%02x" % (ord(ch) & 0xFF) for ch in text)


def _refuse_op(data: bytes, pos: int, why: str, strings: List[Tuple[int, int]]) -> _Refused:
    """The message for a refused opcode at ``pos`` (the opcode's own offset)."""
    op = data[pos]
    if op in (0x63, 0x69):  # GLOBAL / INST: "module\nname\n"
        end1 = data.find(b"\n", pos + 1)
        end2 = data.find(b"\n", end1 + 1) if end1 >= 0 else -1
        if end2 >= 0:
            return _Refused("it asks for global %s.%s (only plain data is loaded)"
                            % (_printable(data[pos + 1:end1]), _printable(data[end1 + 1:end2])))
        return _Refused("it asks for a global (only plain data is loaded)")
    if op == 0x93 and len(strings) >= 2:  # STACK_GLOBAL: the last two strings pushed
        (m0, m1), (n0, n1) = strings[-2], strings[-1]
        return _Refused("it asks for global %s.%s (only plain data is loaded)"
                        % (_printable(data[m0:m1]), _printable(data[n0:n1])))
    if op == 0x93:
        return _Refused("it asks for a global (only plain data is loaded)")
    if why == "extension":
        width = {0x82: 1, 0x83: 2, 0x84: 4}[op]
        code = int.from_bytes(data[pos + 1:pos + 1 + width], "little")
        return _Refused("it asks for extension code %d (only plain data is loaded)" % code)
    return _Refused("it asks for %s at byte %d (only plain data is loaded)" % (why, pos))


def _memo_store(memo: dict, idx: int, stack: list, fence: int, start: int) -> None:
    """PUT / MEMOIZE: a bounded index (the C unpickler grows its memo array to it) of a real object."""
    if idx >= MAX_MEMO_INDEX:
        raise _Refused("it stores memo entry %d (at most %d; byte %d)" % (idx, MAX_MEMO_INDEX, start))
    if len(stack) <= fence:
        raise _Refused("it is malformed: memo store with an empty stack (byte %d)" % start)
    memo[idx] = stack[-1]


def _scan_pickle(data: bytes) -> None:
    """Refuse, before anything is built, a pickle that is more than plain data (see the module doc).

    A simulation of the unpickler's stack in which each item is only its tuple depth (0 for
    anything but a tuple), plus the mark stack and the memo.  Linear in the size of the data.
    """
    n = len(data)
    pos = 0
    stack: List[int] = []
    marks: List[int] = []
    memo: Dict[int, int] = {}
    strings: List[Tuple[int, int]] = []  # the last strings pushed, for STACK_GLOBAL's message
    objects = 0
    ops = _OPS
    fence = 0
    while True:
        if pos >= n:
            raise _Refused("it is truncated (no STOP opcode after %d bytes)" % n)
        start = pos
        code = data[pos]
        pos += 1
        entry = ops.get(code)
        if entry is None:
            raise _Refused("it has an unknown opcode 0x%02x at byte %d" % (code, start))
        kind, arg = entry
        if kind == _K_FIXED:
            pos += arg
            stack.append(0)
        elif kind == _K_GET:
            if pos + arg > n:
                break
            idx = int.from_bytes(data[pos:pos + arg], "little")
            pos += arg
            if idx not in memo:
                raise _Refused("it refers to memo entry %d, never stored (byte %d)" % (idx, start))
            stack.append(memo[idx])
            continue
        elif kind == _K_PUT or kind == _K_MEMOIZE:
            if kind == _K_PUT:
                if pos + arg > n:
                    break
                idx = int.from_bytes(data[pos:pos + arg], "little")
                pos += arg
            else:
                idx = len(memo)
            _memo_store(memo, idx, stack, fence, start)
            continue
        elif kind == _K_COUNTED:
            width, is_string, is_int = arg
            if pos + width > n:
                break
            size = int.from_bytes(data[pos:pos + width], "little", signed=(width == 4))
            pos += width
            if size < 0:
                raise _Refused("it has a negative length at byte %d" % start)
            if is_int and size > MAX_INT_BYTES:
                raise _Refused("it has a %d-byte integer at byte %d (at most %d)" % (size, start, MAX_INT_BYTES))
            if pos + size > n:
                break
            if is_string:
                strings.append((pos, pos + size))
                if len(strings) > 8:
                    del strings[:4]
            pos += size
            stack.append(0)
        elif kind == _K_MARK:
            marks.append(len(stack))
            fence = len(stack)
            continue
        elif kind == _K_APPEND or kind == _K_SETITEM:
            if arg:  # APPENDS / SETITEMS: the items since the mark go into the object below it
                if not marks:
                    raise _Refused("it is malformed: no MARK before byte %d" % start)
                mark = marks.pop()
                fence = marks[-1] if marks else 0
                if mark < 1 or mark <= fence:
                    raise _Refused("it is malformed: nothing to add items to (byte %d)" % start)
                del stack[mark:]
            else:
                k = 1 if kind == _K_APPEND else 2
                if len(stack) - k - 1 < fence:
                    raise _Refused("it is malformed: stack underflow at byte %d" % start)
                del stack[-k:]
            continue
        elif kind == _K_EMPTY:
            stack.append(0)
        elif kind == _K_EMPTY_TUPLE:
            stack.append(1)
        elif kind == _K_TUPLE_N:
            if len(stack) - arg < fence:
                raise _Refused("it is malformed: stack underflow at byte %d" % start)
            depth = 1 + max(stack[-arg:])
            if depth > MAX_TUPLE_DEPTH:
                raise _Refused("it nests tuples more than %d deep (byte %d)" % (MAX_TUPLE_DEPTH, start))
            del stack[-arg:]
            stack.append(depth)
        elif kind == _K_TUPLE_MARK or kind == _K_FROM_MARK:
            if not marks:
                raise _Refused("it is malformed: no MARK before byte %d" % start)
            mark = marks.pop()
            fence = marks[-1] if marks else 0
            depth = 0
            if kind == _K_TUPLE_MARK:
                depth = 1 + max(stack[mark:], default=0)
                if depth > MAX_TUPLE_DEPTH:
                    raise _Refused("it nests tuples more than %d deep (byte %d)" % (MAX_TUPLE_DEPTH, start))
            del stack[mark:]
            stack.append(depth)
        elif kind == _K_LINE:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            if arg and end - pos > 64:
                raise _Refused("it has a %d-digit integer at byte %d" % (end - pos, start))
            if code == 0x56:  # UNICODE
                strings.append((pos, end))
            pos = end + 1
            stack.append(0)
        elif kind == _K_POP:
            if marks and marks[-1] == len(stack):
                marks.pop()
                fence = marks[-1] if marks else 0
            elif len(stack) <= fence:
                raise _Refused("it is malformed: stack underflow at byte %d" % start)
            else:
                stack.pop()
            continue
        elif kind == _K_POP_MARK:
            if not marks:
                raise _Refused("it is malformed: no MARK before byte %d" % start)
            del stack[marks.pop():]
            fence = marks[-1] if marks else 0
            continue
        elif kind == _K_DUP:
            if len(stack) <= fence:
                raise _Refused("it is malformed: stack underflow at byte %d" % start)
            stack.append(stack[-1])
            continue
        elif kind == _K_PUT_LINE or kind == _K_GET_LINE:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            digits = data[pos:end]
            pos = end + 1
            if not digits.isdigit() or len(digits) > 12:
                raise _Refused("it has a bad memo index at byte %d" % start)
            idx = int(digits)
            if kind == _K_GET_LINE:
                if idx not in memo:
                    raise _Refused("it refers to memo entry %d, never stored (byte %d)" % (idx, start))
                stack.append(memo[idx])
            else:
                _memo_store(memo, idx, stack, fence, start)
            continue
        elif kind == _K_PROTO:
            if pos >= n:
                break
            if data[pos] > pickle.HIGHEST_PROTOCOL:
                raise _Refused("it uses pickle protocol %d" % data[pos])
            pos += 1
            continue
        elif kind == _K_FRAME:
            pos += 8
            continue
        elif kind == _K_STOP:
            if len(stack) <= fence or marks:
                raise _Refused("it is malformed: STOP with %s (byte %d)"
                               % ("an open MARK" if marks else "an empty stack", start))
            return
        else:  # _K_REFUSE
            raise _refuse_op(data, start, arg, strings)
        objects += 1
        if objects > MAX_OBJECTS:
            raise _Refused("it builds more than %d objects" % MAX_OBJECTS)
    raise _Refused("it is truncated (at byte %d of %d)" % (start, n))


# --------------------------------------------------------------------------------------------
# Step 2: the restricted unpickler; step 3: the plain-data walk
# --------------------------------------------------------------------------------------------


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain data only: every global and every persistent id is refused.

    With no class or function reachable, REDUCE/BUILD/NEWOBJ have nothing to call; ``_scan_pickle``
    refuses those opcodes before this runs, this is the second line.
    """

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused("it asks for global %s.%s (only plain data is loaded)"
                       % (_printable(str(module).encode("utf-8", "replace")),
                          _printable(str(name).encode("utf-8", "replace"))))

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("it asks for a persistent id (only plain data is loaded)")


def _load_pickle(data: bytes) -> Any:
    _scan_pickle(data)
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused:
        raise
    except RecursionError:
        raise _Refused("it nests too deeply") from None
    except MemoryError:
        raise _Refused("it needs too much memory") from None
    except Exception as e:  # UnpicklingError, EOFError, ValueError, TypeError, KeyError ...
        raise _Refused("it does not unpickle: %s" % _one_line(str(e) or type(e).__name__, 200)) from None


def _no_big_int(text: str) -> int:
    """json's parse_int: 64-bit numbers only (a million-digit one is slow to convert)."""
    if len(text) > 20:
        raise _Refused("it has a %d-digit integer" % len(text))
    return int(text)


def _load_json(data: bytes) -> Any:
    # json has no object cap of its own: 64 MiB of ``[],`` would be 20 million lists.  Every value
    # but the last of a container is followed by a comma, so this counts (over-counts) them.
    if data.count(b",") + data.count(b"[") + data.count(b"{") > MAX_OBJECTS:
        raise _Refused("it holds more than %d values" % MAX_OBJECTS)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Refused("it is not UTF-8 (byte %d)" % e.start) from None
    try:
        return json.loads(text.lstrip("\ufeff"), parse_int=_no_big_int)
    except _Refused:
        raise
    except RecursionError:
        raise _Refused("it nests too deeply") from None
    except json.JSONDecodeError as e:
        raise _Refused("invalid JSON: %s at line %d column %d" % (e.msg, e.lineno, e.colno)) from None
    except (ValueError, MemoryError) as e:
        raise _Refused("invalid JSON: %s" % _one_line(str(e), 200)) from None


def _children(obj: Any) -> Iterator[Any]:
    if type(obj) is dict:
        for k, v in obj.items():
            yield k
            yield v
    else:
        yield from obj


def _check_plain(root: Any) -> None:
    """Refuse anything but plain containers and scalars, cycles, and nesting beyond MAX_DEPTH.

    Iterative (a recursive walk of a million-deep list would overflow the C stack), each
    container visited once however often it is shared (the dumps share frame dicts through the
    memo), and the depth is exact: the height of every container is computed bottom-up.
    """
    if type(root) in _SCALARS:
        return
    if type(root) not in (dict, list, tuple):
        raise _Refused("it holds a %s (only plain data is loaded)" % type(root).__name__)
    heights: Dict[int, int] = {}
    on_path = {id(root)}
    path: List[Tuple[Any, Iterator[Any], int]] = [(root, _children(root), 0)]
    items = 0
    while path:
        obj, it, height = path[-1]
        child = next(it, _DONE)
        if child is _DONE:
            path.pop()
            on_path.discard(id(obj))
            heights[id(obj)] = height + 1
            if path:
                parent, pit, ph = path[-1]
                if height + 1 > ph:
                    path[-1] = (parent, pit, height + 1)
            continue
        items += 1
        if items > MAX_ITEMS:
            raise _Refused("it holds more than %d items" % MAX_ITEMS)
        t = type(child)
        if t in _SCALARS:
            continue
        if t is not dict and t is not list and t is not tuple:
            raise _Refused("it holds a %s (only plain data is loaded)" % t.__name__)
        cid = id(child)
        if cid in on_path:
            raise _Refused("it is a recursive structure (a container holds itself)")
        h = heights.get(cid)
        if h is not None:
            if h > height:
                path[-1] = (obj, it, h)
            if len(path) + h > MAX_DEPTH:
                raise _Refused("it nests containers more than %d deep" % MAX_DEPTH)
            continue
        if len(path) >= MAX_DEPTH:
            raise _Refused("it nests containers more than %d deep" % MAX_DEPTH)
        on_path.add(cid)
        path.append((child, _children(child), 0))


_DONE = object()


# --------------------------------------------------------------------------------------------
# Reading the fields
# --------------------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\ud800-\udfff]")


def _one_line(s: str, limit: int = MAX_STRING) -> str:
    """Control characters (and lone surrogates) escaped, so that a message stays one printable line."""
    s = s[:limit]
    return _CONTROL.sub(lambda m: "\\x%02x" % (ord(m.group()) & 0xFF), s)


def _display(path: Union[str, Path]) -> str:
    """A path as messages show it: bytes that were not UTF-8 as ``\\xNN``, one line."""
    try:
        raw = os.fsencode(str(path))
    except UnicodeError:  # a surrogate that surrogateescape did not make
        raw = str(path).encode("utf-8", "backslashreplace")
    return _one_line(raw.decode("utf-8", "backslashreplace"), 1024)


def _tname(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _int(value: Any, where: str, numeric_str: bool = False) -> Optional[int]:
    """An integer field (None stays None); numeric strings too where JSON writes them so."""
    if value is None:
        return None
    if type(value) is int:
        if -_INT64 <= value < _INT64:
            return value
        raise _Refused("%s is out of the 64-bit range" % where)
    if numeric_str and type(value) is str and re.fullmatch(r"-?\d{1,19}", value):
        return int(value)
    raise _Refused("%s is a %s, expected an integer" % (where, _tname(value)))


def _str(value: Any, where: str) -> Optional[str]:
    if value is None:
        return None
    if type(value) is str:
        return _one_line(value) if len(value) > MAX_STRING or _CONTROL.search(value) else value
    raise _Refused("%s is a %s, expected a string" % (where, _tname(value)))


def _bool(value: Any, where: str) -> Optional[bool]:
    if value is None:
        return None
    if type(value) is bool:
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise _Refused("%s is a %s, expected a boolean" % (where, _tname(value)))


def _seq(value: Any, where: str, limit: Optional[int] = None) -> Sequence[Any]:
    """A list or tuple (the first ``limit`` items), [] for None."""
    if value is None:
        return []
    if type(value) in (list, tuple):
        return value[:limit] if limit is not None and len(value) > limit else value
    raise _Refused("%s is a %s, expected a list" % (where, _tname(value)))


def _dict(value: Any, where: str) -> Dict[Any, Any]:
    if value is None:
        return {}
    if type(value) is dict:
        return value
    raise _Refused("%s is a %s, expected a dict" % (where, _tname(value)))


_RANKS = re.compile(r"\[\s*(-?\d{1,8}(?:\s*,\s*-?\d{1,8})*)?\s*\]")


def _ranks(value: Any, where: str) -> Optional[List[int]]:
    """A group's ranks: the string ``"[0, 1]"`` the dumps write, or a list of integers.

    Parsed by a regular expression, never ``ast.literal_eval``/``eval`` (fr_trace evals it).
    """
    if value is None:
        return None
    if type(value) is str:
        if len(value) > 12 * MAX_GROUP_RANKS or not _RANKS.fullmatch(value.strip()):
            raise _Refused("%s is not a list of ranks" % where)
        inner = value.strip()[1:-1].strip()
        out = [int(x) for x in inner.split(",")] if inner else []
    else:
        out = list(_seq(value, where, MAX_GROUP_RANKS + 1))
    if any(type(r) is not int or not 0 <= r < MAX_RANK for r in out):
        raise _Refused("%s has a rank out of range, or not a number" % where)
    return out


#: Python files of torch itself: the user's call site is the innermost frame outside them.
_TORCH_PY = re.compile(
    r"(?:^|/)(?:site-packages|dist-packages)/torch/"
    r"|(?:^|/)torch/(?:distributed|nn|autograd|cuda|utils|_dynamo|_inductor|fx|multiprocessing|testing|"
    r"optim|amp|jit|_tensor\.py|functional\.py|_ops\.py|overrides\.py)")


#: Converted frames by the id of the dump's frame dict: the dumps share one dict per distinct
#: frame among all entries (the pickler's memo), so each is checked and converted once.
_FrameCache = Dict[int, Tuple[Dict[str, Any], Optional[str]]]


def _frame(f: Any, where: str, i: int, cache: _FrameCache) -> Tuple[Dict[str, Any], Optional[str]]:
    """(Frame dict, ``function (file.py:line)`` when it is a Python frame outside torch, else None)."""
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
        fd = Frame(kind="python", function=name, file=filename, line=line).to_dict()
        if not _TORCH_PY.search(filename):
            user = "%s (%s:%s)" % (name or "??", filename.rsplit("/", 1)[-1], line if line is not None else "?")
    else:
        fd = Frame(kind="native", function=name or None, file=filename if filename not in (None, "", "??") else None,
                   line=line if line else None).to_dict()
    cache[id(f)] = (fd, user)
    return fd, user


def _frames(
    value: Any, where: str, cache: _FrameCache, users: Dict[int, Optional[str]], budget: int
) -> Tuple[List[Dict[str, Any]], Optional[str], bool]:
    """(call site as Frame dicts, innermost first, or [] past the budget; the user's frame; cut).

    The frames keep the dump's order: C++ frames innermost first, then Python frames innermost
    first (PyTorch's symbolizer puts the innermost Python frame among the C++ ones, at the
    interpreter's frame, and the other Python frames after the C++ ones).  ``users`` caches the
    user's frame by the id of the frames list, for lists shared among entries.
    """
    frames = _seq(value, where, MAX_FRAMES_PER_ENTRY)
    keep = len(frames) <= budget
    if not keep and id(value) in users:
        return [], users[id(value)], bool(frames)
    call_site: List[Dict[str, Any]] = []
    user: Optional[str] = None
    for i, f in enumerate(frames):
        fd, u = _frame(f, where, i, cache)
        if keep:
            call_site.append(dict(fd))
        if user is None:
            user = u
    users[id(value)] = user
    return call_site, user, not keep


def _sizes(value: Any, where: str) -> List[List[int]]:
    """``input_sizes``: a list of shapes.  Field paths are formatted only for the message."""
    out = []
    for i, shape in enumerate(_seq(value, where, MAX_TENSORS)):
        if type(shape) not in (list, tuple):
            raise _Refused("%s[%d] is a %s, expected a list" % (where, i, _tname(shape)))
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


def _entry(e: Any, where: str, budget: _Budget, cache: _FrameCache) -> Dict[str, Any]:
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
    call_site: List[Dict[str, Any]] = []
    user_frame = None
    if e.get("frames") is not None:
        call_site, user_frame, cut = _frames(e.get("frames"), where + ".frames", cache, budget.users, budget.frames)
        budget.frames -= len(call_site)
        budget.cut_frames = budget.cut_frames or cut
    out = {
        "seq": p2p_seq if p2p and p2p_seq is not None else coll_seq,
        "pg": str(pg_id) if pg_id is not None else pg_name,
        "op": op,
        "profiling_name": profiling_name,
        "state": _str(e.get("state"), where + ".state"),
        "p2p": p2p,
        "sizes": sizes,
        "dtypes": dtypes,
        "timeout_ms": _int(e.get("timeout_ms"), where + ".timeout_ms"),
        "time_created_ns": _int(e.get("time_created_ns"), where + ".time_created_ns"),
        "call_site": call_site,
        "user_frame": user_frame,
    }
    # Kept aside to join groups (pg_status is keyed by pg_id, pg_config by the group's name).
    out["_pg_name"], out["_pg_desc"] = pg_name, pg_desc
    return out


def _extract(doc: Any, notes: List[str]) -> Tuple[Dict[str, Any], Optional[int]]:
    """The ``collectives`` dict and the rank a dump names (None when it names none)."""
    if type(doc) is not dict:
        raise _Refused("its top level is a %s, not a dict" % _tname(doc))
    if not any(k in doc for k in ("entries", "pg_status", "pg_config")):
        raise _Refused("it has none of the keys entries, pg_status, pg_config")
    version = _str(doc.get("version"), "version")
    comm = _str(doc.get("comm_lib_version", doc.get("nccl_version")), "comm_lib_version")
    rank = _int(doc.get("rank"), "rank", numeric_str=True)
    if rank is not None and not 0 <= rank < MAX_RANK:
        raise _Refused("rank is out of range")
    pg_config = _dict(doc.get("pg_config"), "pg_config")
    pg_status = _dict(doc.get("pg_status"), "pg_status")
    raw_entries = _seq(doc.get("entries"), "entries")
    first = max(0, len(raw_entries) - MAX_ENTRIES)
    if first:
        notes.append("flight recorder: the oldest %d of %d entries were left out" % (first, len(raw_entries)))
    entries: List[Dict[str, Any]] = []
    budget = _Budget()
    cache: _FrameCache = {}
    for i in range(len(raw_entries) - 1, first - 1, -1):  # newest first: they get the call sites
        entries.append(_entry(raw_entries[i], "entries[%d]" % i, budget, cache))
    entries.reverse()
    if budget.cut_frames:
        notes.append("flight recorder: call sites of the oldest entries were left out (%d frames kept)"
                     % MAX_CALL_SITE_FRAMES)
    if budget.cut_sizes:
        notes.append("flight recorder: tensor sizes of the oldest entries were left out")
    if len(pg_status) + len(pg_config) > MAX_GROUPS:
        raise _Refused("it has more than %d process groups" % MAX_GROUPS)

    # Groups: pg_status (keyed by pg_id), named through the entries' (name, desc) and pg_config.
    names: Dict[str, Tuple[Optional[str], Optional[str]]] = {}
    id_of_name: Dict[str, str] = {}
    for e in entries:
        if e["pg"] is not None and e["pg"] not in names:
            names[e["pg"]] = (e["_pg_name"], e["_pg_desc"])
            if e["_pg_name"] is not None:
                id_of_name.setdefault(e["_pg_name"], e["pg"])
    groups: Dict[str, Dict[str, Any]] = {}
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
            raise _Refused("its process groups list more than %d ranks in all" % MAX_GROUP_RANKS)
        return out

    def config_of(name: Optional[str], where: str) -> Dict[Any, Any]:
        if name is None or name not in pg_config:
            return {}
        config_used.add(name)
        return _dict(pg_config[name], "pg_config[%s]" % where)

    for key, st in pg_status.items():
        if type(key) is not str and type(key) is not int:
            raise _Refused("pg_status has a %s key, expected a string" % _tname(key))
        k = _one_line(str(key), 256)
        where = "pg_status[%s]" % k
        st = _dict(st, where)
        name, desc = names.get(k, (None, None))
        cfg = config_of(name, k) or config_of(k, k)
        groups[k] = {
            "name": _str(cfg.get("name"), "pg_config[%s].name" % k) or name,
            "desc": _str(cfg.get("desc"), "pg_config[%s].desc" % k) or desc,
            "ranks": ranks_of(cfg, k),
            "last_enqueued": _int(st.get("last_enqueued_collective"), where + ".last_enqueued_collective", True),
            "last_started": _int(st.get("last_started_collective"), where + ".last_started_collective", True),
            "last_completed": _int(st.get("last_completed_collective"), where + ".last_completed_collective", True),
        }
    # Groups the status does not list (dumps before pg_status, or groups with no collective yet):
    # from pg_config, and their progress from the entries when the dump has no pg_status at all.
    for name, cfg in pg_config.items():
        if type(name) is not str:
            raise _Refused("pg_config has a %s key, expected a string" % _tname(name))
        if name in config_used:
            continue
        k = _one_line(id_of_name.get(name, name), 256)
        if k in groups:
            continue
        cfg = _dict(cfg, "pg_config[%s]" % k)
        groups[k] = {"name": _str(cfg.get("name"), "pg_config[%s].name" % k) or name,
                     "desc": _str(cfg.get("desc"), "pg_config[%s].desc" % k),
                     "ranks": ranks_of(cfg, k),
                     "last_enqueued": None, "last_started": None, "last_completed": None}
    if not pg_status:
        for e in entries:
            if e["p2p"] or e["pg"] is None or not isinstance(e["seq"], int):
                continue
            g = groups.setdefault(e["pg"], {"name": e["_pg_name"], "desc": e["_pg_desc"], "ranks": None,
                                            "last_enqueued": None, "last_started": None,
                                            "last_completed": None})
            g["derived"] = "entries"
            g["last_enqueued"] = max(g["last_enqueued"] or e["seq"], e["seq"])
            if e["state"] == "completed":
                g["last_completed"] = max(g["last_completed"] or e["seq"], e["seq"])
            if e["state"] in ("started", "completed"):
                g["last_started"] = max(g["last_started"] or e["seq"], e["seq"])
    for e in entries:
        del e["_pg_name"], e["_pg_desc"]
    return {"source": "flight-recorder", "file": None, "version": version, "comm_lib_version": comm,
            "groups": groups, "entries": entries}, rank


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
            raise _Refused("it is larger than %d MiB" % (MAX_FILE_BYTES >> 20))
        doc = _load_pickle(data) if kind == "pickle" else _load_json(data)
        del data
        _check_plain(doc)
        coll, rank = _extract(doc, notes)
    except _Refused as e:
        raise InputError("%s: flight-recorder %s refused: %s" % (name, kind, _one_line(str(e), 1000))) from None
    except RecursionError:  # defensive: nothing above recurses on the data
        raise InputError("%s: flight-recorder %s refused: it nests too deeply" % (name, kind)) from None
    coll["file"] = name
    source = "flight-recorder dump"
    if rank is None:
        rank = rank_from_name(os.path.basename(str(path)))  # not the display name: its \xNN has a "\"
        source = "flight-recorder file name"
    dist = {"from": source} if rank is not None else None
    label = "rank %d" % rank if rank is not None else _display(os.path.basename(str(path)))
    return Process(source="flight-recorder", rank=rank, dist=dist, collectives=coll, label=label, notes=notes)


# --------------------------------------------------------------------------------------------
# Watchdog log lines
# --------------------------------------------------------------------------------------------

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


def _group(groups: Dict[str, Dict[str, Any]], pg: str, guid: Optional[str], desc: Optional[str]) -> Dict[str, Any]:
    g = groups.setdefault(pg, {"name": None, "desc": None, "ranks": None, "last_enqueued": None,
                               "last_started": None, "last_completed": None})
    if guid:
        g["name"] = guid
    if desc:
        g["desc"] = desc
    return g


def collectives_from_messages(messages: List[str], rank: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """Collective progress from PyTorch's watchdog lines in a log (torchrun's, a job's stderr).

    The same shape as a dump's (``source`` "watchdog-log", no ``file``), from the lines
    ProcessGroupNCCL prints when a collective times out: the timed-out work (an entry with
    ``state`` "timed_out", its ``seq``, ``op`` and ``timeout_ms``) and the group's last enqueued
    and completed sequence numbers (the last line wins: logs are in time order).  gloo's
    ``Timed out waiting ...`` gives an entry without ``seq``.

    A log may hold several ranks' lines (``[rank1]:`` prefixes, ``Rank 1`` in the PG prefix):
    only ``rank``'s are read, or when ``rank`` is None those of the first rank named; the rank
    read is returned as ``collectives["rank"]`` (None when no line names one).  None when no
    watchdog line is found.  Regular expressions are bounded and anchored on literals, so a
    megabyte of hostile text takes linear time.
    """
    groups: Dict[str, Dict[str, Any]] = {}
    entries: List[Dict[str, Any]] = []
    by_seq: Dict[Tuple[Optional[str], Optional[int]], Dict[str, Any]] = {}
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
                e = by_seq[(pg, seq)] = {"seq": seq, "pg": pg, "op": None, "state": "timed_out"}
                entries.append(e)
            e["op"] = _OPTYPES.get(optype, optype.lower())
            e["optype"] = optype
            e["timeout_ms"] = int(m_caught.group(5))
            if m_caught.group(3) is not None:
                e["numel_in"], e["numel_out"] = int(m_caught.group(3)), int(m_caught.group(4))
            if m_caught.group(6) is not None:
                e["ran_ms"] = int(m_caught.group(6))
        for m in (m_fail, m_old):
            if m is None:
                continue
            seq = int(m.group(1))
            key = pg if pg is not None else "0"
            g = _group(groups, key, guid, desc)
            g["last_enqueued"], g["last_completed"] = int(m.group(2)), int(m.group(3))
            e = by_seq.get((pg, seq)) or by_seq.get((None, seq))
            if e is None:
                e = by_seq[(pg, seq)] = {"seq": seq, "pg": key, "op": None, "state": "timed_out"}
                entries.append(e)
            e["pg"] = key
        if m_dump and not (m_fail or m_old):
            g = _group(groups, pg if pg is not None else "0", guid, desc)
            g["last_enqueued"], g["last_completed"] = int(m_dump.group(1)), int(m_dump.group(2))
        if m_gloo:
            entries.append({"seq": None, "pg": pg, "op": m_gloo.group(2).lower(), "state": "timed_out",
                            "timeout_ms": int(m_gloo.group(1))})
    if not found:
        return None
    # ``[Rank 0] Watchdog caught ...`` names no group: it is the one whose failure line has its seq,
    # else the only group there is.
    for e in entries:
        if e["pg"] is None and e["seq"] is not None and len(groups) == 1:
            e["pg"] = next(iter(groups))
    out: Dict[str, Any] = {"source": "watchdog-log", "file": None, "version": None, "comm_lib_version": None,
                           "groups": groups, "entries": entries, "rank": rank}
    if others:
        out["other_ranks"] = sorted(others)[:64]
    return out
