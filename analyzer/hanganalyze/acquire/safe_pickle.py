"""Pickles as plain data only: no byte sequence can run code, exhaust memory or crash the interpreter.

A pickle is a program: ``pickle.load`` of a hostile file runs any callable it names.  PyTorch's
flight-recorder dumps are pickles written by another machine (or anyone), so ``load_pickle``
reads one in three steps:

1. ``scan_pickle`` walks the opcodes without building anything and refuses every opcode that
   names a global, calls an object, asks for a persistent id or extension code, or builds a set;
   it also refuses what would crash or exhaust the C unpickler even with no global at all: a
   tuple nested a million deep used as a dict key (``hash`` recurses in C without a depth check:
   a segmentation fault), and a memo index in the billions (the C unpickler grows its memo array
   to that index: a 9-byte pickle asks for tens of GiB).
2. ``PlainUnpickler`` (``find_class`` and ``persistent_load`` refuse everything) builds the value:
   a second line of defence, should the scan miss an opcode.
3. ``check_plain`` (also run on parsed JSON) walks the result iteratively: only dict, list,
   tuple, str, bytes, int, float, bool and None, no cycles, bounded depth and size.

Every refusal is a ``Refused`` whose text ends the caller's one-line error.
"""

from __future__ import annotations

import io
import pickle
import re
from typing import Any, Callable, Dict, Iterator, List, Tuple

#: Objects the pickle may build (strings, numbers, containers): bounds memory before anything is built.
#: Read at call time (``safe_pickle.MAX_OBJECTS``) by the JSON reader too: one knob for both forms.
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
#: Strings in messages are cut to this length.
MAX_STRING = 4096

_SCALARS = (str, bytes, int, float, bool, type(None))


class Refused(Exception):
    """Why a file is not loaded: the end of the caller's InputError line."""


CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\ud800-\udfff]")


def one_line(s: str, limit: int = MAX_STRING) -> str:
    """Control characters (and lone surrogates) escaped, so that a message stays one printable line."""
    s = s[:limit]
    return CONTROL.sub(lambda m: "\\x%02x" % (ord(m.group()) & 0xFF), s)


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


def _refuse_op(data: bytes, pos: int, why: str, strings: List[Tuple[int, int]]) -> Refused:
    """The message for a refused opcode at ``pos`` (the opcode's own offset)."""
    op = data[pos]
    if op in (0x63, 0x69):  # GLOBAL / INST: "module\nname\n"
        end1 = data.find(b"\n", pos + 1)
        end2 = data.find(b"\n", end1 + 1) if end1 >= 0 else -1
        if end2 >= 0:
            return Refused("it asks for global %s.%s (only plain data is loaded)"
                            % (_printable(data[pos + 1:end1]), _printable(data[end1 + 1:end2])))
        return Refused("it asks for a global (only plain data is loaded)")
    if op == 0x93 and len(strings) >= 2:  # STACK_GLOBAL: the last two strings pushed
        (m0, m1), (n0, n1) = strings[-2], strings[-1]
        return Refused("it asks for global %s.%s (only plain data is loaded)"
                        % (_printable(data[m0:m1]), _printable(data[n0:n1])))
    if op == 0x93:
        return Refused("it asks for a global (only plain data is loaded)")
    if why == "extension":
        width = {0x82: 1, 0x83: 2, 0x84: 4}[op]
        code = int.from_bytes(data[pos + 1:pos + 1 + width], "little")
        return Refused("it asks for extension code %d (only plain data is loaded)" % code)
    return Refused("it asks for %s at byte %d (only plain data is loaded)" % (why, pos))


def _memo_store(memo: dict, idx: int, stack: list, fence: int, start: int) -> None:
    """PUT / MEMOIZE: a bounded index (the C unpickler grows its memo array to it) of a real object."""
    if idx >= MAX_MEMO_INDEX:
        raise Refused("it stores memo entry %d (at most %d; byte %d)" % (idx, MAX_MEMO_INDEX, start))
    if len(stack) <= fence:
        raise Refused("it is malformed: memo store with an empty stack (byte %d)" % start)
    memo[idx] = stack[-1]


def scan_pickle(data: bytes) -> None:
    """Refuse, before anything is built, a pickle that is more than plain data (see the module doc).

    A simulation of the unpickler's stack in which each item is only its tuple depth (0 for
    anything but a tuple), plus the mark stack and the memo (``_Scan``: one step per opcode class).
    Linear in the size of the data.
    """
    steps = _Scan(data).steps()
    n = len(data)
    pos = 0
    objects = 0
    while True:
        if pos >= n:
            raise Refused("it is truncated (no STOP opcode after %d bytes)" % n)
        code = data[pos]
        step = steps.get(code)
        if step is None:
            raise Refused("it has an unknown opcode 0x%02x at byte %d" % (code, pos))
        run, arg, builds = step
        pos = run(code, arg, pos + 1)
        if pos < 0:  # STOP
            return
        if builds:
            objects += 1
            if objects > MAX_OBJECTS:
                raise Refused("it builds more than %d objects" % MAX_OBJECTS)


#: The opcode classes whose opcode pushes a new object (counted against ``MAX_OBJECTS``).
_BUILDS = frozenset((_K_FIXED, _K_COUNTED, _K_LINE, _K_EMPTY, _K_EMPTY_TUPLE, _K_FROM_MARK, _K_TUPLE_MARK,
                     _K_TUPLE_N))
#: What a step returns at STOP instead of the offset of the next opcode.
_STOPPED = -1


class _Scan:
    """The state of ``scan_pickle``, and one step per opcode class (``_K_*``).

    A step is called with the opcode, its class's argument (``_OPS``) and ``pos``, the offset just
    after the opcode (so the opcode, named in every refusal, is at ``pos - 1``); it reads the
    opcode's argument, updates the stack of tuple depths, the marks and the memo, and returns the
    offset of the next opcode (``_STOPPED`` at STOP)."""

    __slots__ = ("data", "n", "stack", "marks", "memo", "strings", "fence")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)
        self.stack: List[int] = []
        self.marks: List[int] = []
        self.memo: Dict[int, int] = {}
        self.strings: List[Tuple[int, int]] = []  # the last strings pushed, for STACK_GLOBAL's message
        self.fence = 0  # the stack below the innermost mark: no opcode may take from it

    def steps(self) -> Dict[int, Tuple[Callable[[int, Any, int], int], Any, bool]]:
        """Each opcode's step (its class's), argument, and whether it builds an object."""
        by_kind = {
            _K_FIXED: self._fixed, _K_COUNTED: self._counted, _K_LINE: self._line, _K_EMPTY: self._empty,
            _K_EMPTY_TUPLE: self._empty_tuple, _K_MARK: self._mark, _K_FROM_MARK: self._from_mark,
            _K_TUPLE_MARK: self._from_mark, _K_TUPLE_N: self._tuple_n, _K_APPEND: self._add,
            _K_SETITEM: self._add, _K_POP: self._pop, _K_POP_MARK: self._pop_mark, _K_DUP: self._dup,
            _K_PUT: self._put, _K_PUT_LINE: self._memo_line, _K_MEMOIZE: self._memoize, _K_GET: self._get,
            _K_GET_LINE: self._memo_line, _K_PROTO: self._proto, _K_FRAME: self._frame, _K_STOP: self._stop,
            _K_REFUSE: self._refuse,
        }
        return {code: (by_kind[kind], arg, kind in _BUILDS) for code, (kind, arg) in _OPS.items()}

    def _truncated(self, pos: int) -> Refused:
        return Refused("it is truncated (at byte %d of %d)" % (pos - 1, self.n))

    def _underflow(self, pos: int) -> Refused:
        return Refused("it is malformed: stack underflow at byte %d" % (pos - 1))

    def _close_mark(self, pos: int) -> int:
        """The innermost mark, closed: the stack index it was set at."""
        if not self.marks:
            raise Refused("it is malformed: no MARK before byte %d" % (pos - 1))
        mark = self.marks.pop()
        self.fence = self.marks[-1] if self.marks else 0
        return mark

    def _fixed(self, code: int, width: int, pos: int) -> int:
        self.stack.append(0)
        return pos + width

    def _counted(self, code: int, arg: Tuple[int, bool, bool], pos: int) -> int:
        """Strings, bytes and long integers: a length of ``width`` bytes, then the bytes."""
        width, is_string, is_int = arg
        at = pos + width
        if at > self.n:
            raise self._truncated(pos)
        size = int.from_bytes(self.data[pos:at], "little", signed=(width == 4))
        if size < 0:
            raise Refused("it has a negative length at byte %d" % (pos - 1))
        if is_int and size > MAX_INT_BYTES:
            raise Refused("it has a %d-byte integer at byte %d (at most %d)" % (size, pos - 1, MAX_INT_BYTES))
        if at + size > self.n:
            raise self._truncated(pos)
        if is_string:
            self.strings.append((at, at + size))
            if len(self.strings) > 8:
                del self.strings[:4]
        self.stack.append(0)
        return at + size

    def _line(self, code: int, is_int: bool, pos: int) -> int:
        """Protocol 0's text arguments, ended by a newline."""
        end = self.data.find(b"\n", pos)
        if end < 0:
            raise self._truncated(pos)
        if is_int and end - pos > 64:
            raise Refused("it has a %d-digit integer at byte %d" % (end - pos, pos - 1))
        if code == 0x56:  # UNICODE
            self.strings.append((pos, end))
        self.stack.append(0)
        return end + 1

    def _empty(self, code: int, arg: Any, pos: int) -> int:
        self.stack.append(0)
        return pos

    def _empty_tuple(self, code: int, arg: Any, pos: int) -> int:
        self.stack.append(1)
        return pos

    def _mark(self, code: int, arg: Any, pos: int) -> int:
        self.marks.append(len(self.stack))
        self.fence = len(self.stack)
        return pos

    def _from_mark(self, code: int, arg: Any, pos: int) -> int:
        """LIST, DICT, TUPLE: the items since the mark become one container."""
        stack = self.stack
        mark = self._close_mark(pos)
        depth = 0
        if code == 0x74:  # TUPLE
            depth = 1 + max(stack[mark:], default=0)
            if depth > MAX_TUPLE_DEPTH:
                raise Refused("it nests tuples more than %d deep (byte %d)" % (MAX_TUPLE_DEPTH, pos - 1))
        del stack[mark:]
        stack.append(depth)
        return pos

    def _tuple_n(self, code: int, count: int, pos: int) -> int:
        """TUPLE1, TUPLE2, TUPLE3: the top ``count`` items become a tuple."""
        stack = self.stack
        if len(stack) - count < self.fence:
            raise self._underflow(pos)
        depth = 1 + max(stack[-count:])
        if depth > MAX_TUPLE_DEPTH:
            raise Refused("it nests tuples more than %d deep (byte %d)" % (MAX_TUPLE_DEPTH, pos - 1))
        del stack[-count:]
        stack.append(depth)
        return pos

    def _add(self, code: int, many: bool, pos: int) -> int:
        """APPEND, SETITEM; APPENDS, SETITEMS: the items since the mark go into the object below it."""
        stack = self.stack
        if many:
            mark = self._close_mark(pos)
            if mark < 1 or mark <= self.fence:
                raise Refused("it is malformed: nothing to add items to (byte %d)" % (pos - 1))
            del stack[mark:]
        else:
            k = 1 if code == 0x61 else 2  # APPEND: an item; SETITEM: a key and a value
            if len(stack) - k - 1 < self.fence:
                raise self._underflow(pos)
            del stack[-k:]
        return pos

    def _pop(self, code: int, arg: Any, pos: int) -> int:
        """POP: the top item, or the mark set just above it."""
        marks = self.marks
        if marks and marks[-1] == len(self.stack):
            marks.pop()
            self.fence = marks[-1] if marks else 0
        elif len(self.stack) <= self.fence:
            raise self._underflow(pos)
        else:
            self.stack.pop()
        return pos

    def _pop_mark(self, code: int, arg: Any, pos: int) -> int:
        del self.stack[self._close_mark(pos):]
        return pos

    def _dup(self, code: int, arg: Any, pos: int) -> int:
        if len(self.stack) <= self.fence:
            raise self._underflow(pos)
        self.stack.append(self.stack[-1])
        return pos

    def _put(self, code: int, width: int, pos: int) -> int:
        """BINPUT, LONG_BINPUT: the top item stored at a memo index of ``width`` bytes."""
        at = pos + width
        if at > self.n:
            raise self._truncated(pos)
        _memo_store(self.memo, int.from_bytes(self.data[pos:at], "little"), self.stack, self.fence, pos - 1)
        return at

    def _memoize(self, code: int, arg: Any, pos: int) -> int:
        _memo_store(self.memo, len(self.memo), self.stack, self.fence, pos - 1)
        return pos

    def _get(self, code: int, width: int, pos: int) -> int:
        """BINGET, LONG_BINGET: a memo entry pushed again, by an index of ``width`` bytes."""
        at = pos + width
        if at > self.n:
            raise self._truncated(pos)
        idx = int.from_bytes(self.data[pos:at], "little")
        if idx not in self.memo:
            raise Refused("it refers to memo entry %d, never stored (byte %d)" % (idx, pos - 1))
        self.stack.append(self.memo[idx])
        return at

    def _memo_line(self, code: int, arg: Any, pos: int) -> int:
        """PUT and GET of protocol 0: the memo index in digits, ended by a newline."""
        end = self.data.find(b"\n", pos)
        if end < 0:
            raise self._truncated(pos)
        digits = self.data[pos:end]
        if not digits.isdigit() or len(digits) > 12:
            raise Refused("it has a bad memo index at byte %d" % (pos - 1))
        idx = int(digits)
        if code == 0x67:  # GET
            if idx not in self.memo:
                raise Refused("it refers to memo entry %d, never stored (byte %d)" % (idx, pos - 1))
            self.stack.append(self.memo[idx])
        else:
            _memo_store(self.memo, idx, self.stack, self.fence, pos - 1)
        return end + 1

    def _proto(self, code: int, arg: Any, pos: int) -> int:
        if pos >= self.n:
            raise self._truncated(pos)
        if self.data[pos] > pickle.HIGHEST_PROTOCOL:
            raise Refused("it uses pickle protocol %d" % self.data[pos])
        return pos + 1

    def _frame(self, code: int, arg: Any, pos: int) -> int:
        return pos + 8

    def _stop(self, code: int, arg: Any, pos: int) -> int:
        if len(self.stack) <= self.fence or self.marks:
            raise Refused("it is malformed: STOP with %s (byte %d)"
                          % ("an open MARK" if self.marks else "an empty stack", pos - 1))
        return _STOPPED

    def _refuse(self, code: int, why: str, pos: int) -> int:
        raise _refuse_op(self.data, pos - 1, why, self.strings)


# --------------------------------------------------------------------------------------------
# Step 2: the restricted unpickler; step 3: the plain-data walk
# --------------------------------------------------------------------------------------------


class PlainUnpickler(pickle.Unpickler):
    """Builds plain data only: every global and every persistent id is refused.

    With no class or function reachable, REDUCE/BUILD/NEWOBJ have nothing to call; ``scan_pickle``
    refuses those opcodes before this runs, this is the second line.
    """

    def find_class(self, module: str, name: str) -> Any:
        raise Refused("it asks for global %s.%s (only plain data is loaded)"
                       % (_printable(str(module).encode("utf-8", "replace")),
                          _printable(str(name).encode("utf-8", "replace"))))

    def persistent_load(self, pid: Any) -> Any:
        raise Refused("it asks for a persistent id (only plain data is loaded)")


def load_pickle(data: bytes) -> Any:
    """The plain value a pickle holds (scanned, then built with nothing callable); Refused otherwise.

    The caller still runs ``check_plain`` on the result (a JSON document needs it as well).
    """
    scan_pickle(data)
    try:
        return PlainUnpickler(io.BytesIO(data)).load()
    except Refused:
        raise
    except RecursionError:
        raise Refused("it nests too deeply") from None
    except MemoryError:
        raise Refused("it needs too much memory") from None
    except Exception as e:  # UnpicklingError, EOFError, ValueError, TypeError, KeyError ...
        raise Refused("it does not unpickle: %s" % one_line(str(e) or type(e).__name__, 200)) from None



def _children(obj: Any) -> Iterator[Any]:
    if type(obj) is dict:
        for k, v in obj.items():
            yield k
            yield v
    else:
        yield from obj


def check_plain(root: Any) -> None:
    """Refuse anything but plain containers and scalars, cycles, and nesting beyond MAX_DEPTH.

    Iterative (a recursive walk of a million-deep list would overflow the C stack), each
    container visited once however often it is shared (the dumps share frame dicts through the
    memo), and the depth is exact: the height of every container is computed bottom-up.
    """
    if type(root) in _SCALARS:
        return
    if type(root) not in (dict, list, tuple):
        raise Refused("it holds a %s (only plain data is loaded)" % type(root).__name__)
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
            raise Refused("it holds more than %d items" % MAX_ITEMS)
        t = type(child)
        if t in _SCALARS:
            continue
        if t is not dict and t is not list and t is not tuple:
            raise Refused("it holds a %s (only plain data is loaded)" % t.__name__)
        cid = id(child)
        if cid in on_path:
            raise Refused("it is a recursive structure (a container holds itself)")
        h = heights.get(cid)
        if h is not None:
            if h > height:
                path[-1] = (obj, it, h)
            if len(path) + h > MAX_DEPTH:
                raise Refused("it nests containers more than %d deep" % MAX_DEPTH)
            continue
        if len(path) >= MAX_DEPTH:
            raise Refused("it nests containers more than %d deep" % MAX_DEPTH)
        on_path.add(cid)
        path.append((child, _children(child), 0))


_DONE = object()
