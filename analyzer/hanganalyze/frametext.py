"""Frame -> text: the one formatter every renderer, matcher, bucket, tree and sampler calls.

``frame_text(frame, FrameStyle.X)``.  A frame is spelled differently for different purposes, and
each purpose is one named style here, so that the spellings sit side by side and a change to one is
made, and seen against the others, in one place:

============  =======================================  =============================================
style         for                                      e.g.
============  =======================================  =============================================
REPORT        a report's frame line (gdb-like; needs   ``#3   0x00007f12 in pthread_mutex_lock ()
              ``index``)                               from /lib/libc.so.6``, ``#5   [py] run
                                                       (/srv/app/train.py:42)``
LOCATION      where a frame is, as gdb says it         ``/srv/app/train.py:42``, ``/lib/libc.so.6``
PLACE         a process's place in a class table       ``run (/srv/app/train.py:42)`` (clean_label)
EVIDENCE      a finding's evidence line                ``run (/srv/app/train.py:42)``,
                                                       ``ncclGroupEnd (libnccl.so.2)``
WAIT          where a thread of a cycle waits          ``acquire (/app/x.py:9)``, ``lock``
TASK_WAIT     where an asyncio task waits              ``sleep (/usr/lib/asyncio/tasks.py:9)``
CALLER        the Python frame that called what        ``step (/app/loop.py:40)``
              blocks an event loop's thread
COROUTINE     one coroutine of an asyncio task stack   ``fetch (client.py:30)``
HINT          a collapsed thread group's hint          ``fetch (loader.py:130)``, ``fetch (loader.py)``
RANK          where a rank is (job tables)             ``load (train.py:22)``, ``ncclGroupEnd
                                                       (libnccl.so.2)``: Python leaf name, C++ name
                                                       normalized
TRIAGE        the triage's wait and blame frames       ``run (train.py:22)``, ``?? (libcuda.so)``,
                                                       ``?? (no library)``
TREE          a call-tree node (compact, one clean     ``train_step (train.py:12)``, ``c10d::Work::
              line, bounded length)                    wait``, ``?? (libcuda.so)``
BUCKET        one token of a bucket id: stable over    ``py:threading.py:run``, ``c:ncclCommDestroy``,
              builds, hosts and versions (no line,     ``c:libcuda.so:?``
              no version, no address)
SAMPLE        a frame's identity between two samples   ``run (/app/x.py:42)``, ``poll (libc.so.6)``
              of a live process (full file and line:
              a moved line is progress)
============  =======================================  =============================================

The styles keep, byte for byte, the spellings that bucket ids (which users file bugs by), reports
and sampling comparisons were made with when each had its own function.  Some differ where no
purpose asks them to: a ``line`` of 0 shown or not; ``:None`` for a missing line in COROUTINE, WAIT
and TASK_WAIT; ``None`` for a missing function without file in TASK_WAIT and for any missing part in
CALLER; ``/``-only or ``\\``-aware base names.  They are kept so that no output changes, and written
down here (and in tests/unit/test_frametext.py) so that they can be made one on purpose.

It sits with the small shared modules (below ``acquire``), because sampling compares frames too.
"""

from __future__ import annotations

import enum
import re
from typing import Callable, Dict, Optional

from hanganalyze.names import basename, library_base, normalize_native_name, short_function
from hanganalyze_gdbext.model import Frame

#: Longest label kept (characters); longer ones keep their head and tail around ``…``.
MAX_LABEL = 200
#: Longest raw function name normalized (the normalizer is linear, but a 10 MB name is no name).
MAX_RAW_NAME = 4096
#: How a frame found without CFI is named in listings (``Frame.unwind``).
HEURISTIC_NAMES = {"fp": "frame pointer", "scan": "stack scan"}

#: Characters that would break the one-line-per-node layout or act on a terminal: C0/C1 controls,
#: DEL, bidi overrides and isolates, zero-width marks, line/paragraph separators, BOM.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_WHITESPACE_CONTROL = frozenset("\t\n\r\x0b\x0c\x85\u2028\u2029")


class FrameStyle(enum.Enum):
    """What the text is for (see the table in the module's docstring)."""

    REPORT = "report"
    LOCATION = "location"
    PLACE = "place"
    EVIDENCE = "evidence"
    WAIT = "wait"
    TASK_WAIT = "task-wait"
    CALLER = "caller"
    COROUTINE = "coroutine"
    HINT = "hint"
    RANK = "rank"
    TRIAGE = "triage"
    TREE = "tree"
    BUCKET = "bucket"
    SAMPLE = "sample"


def frame_text(frame: Frame, style: FrameStyle, index: Optional[int] = None) -> str:
    """``frame`` as ``style`` spells it; ``index`` (the frame's number in its thread) only for
    ``FrameStyle.REPORT``, whose lines carry it as gdb's do."""
    if style is FrameStyle.REPORT:
        if index is None:
            raise TypeError("FrameStyle.REPORT needs the frame's index")
        return _report(frame, index)
    return _STYLES[style](frame)


def clean_label(text: str, limit: int = MAX_LABEL) -> str:
    """One line of printable text: a function name from a core is attacker-controlled and may hold
    newlines (which would forge extra tree lines), terminal escapes or bidi overrides.  Whitespace
    controls become spaces, other controls ``\\xNN``/``\\uNNNN``; runs of spaces collapse; a label
    longer than ``limit`` keeps its head and tail (the tail of a C++ name is the method)."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(
            lambda m: " " if m.group(0) in _WHITESPACE_CONTROL
            else ("\\x%02x" if ord(m.group(0)) < 0x100 else "\\u%04x") % ord(m.group(0)),
            text,
        )
    if "  " in text or text[:1] == " " or text[-1:] == " ":
        text = " ".join(text.split())
    if len(text) > limit:
        keep = max(limit - 1, 2)
        head = keep // 2
        text = text[:head] + "…" + text[len(text) - (keep - head):]
    return text


# --------------------------------------------------------------------------------------------
# The core: a name, where it is, and the two together
# --------------------------------------------------------------------------------------------


def _named(name: str, where: str) -> str:
    """``name (where)``, or the name alone where nothing says where."""
    return "%s (%s)" % (name, where) if where else name


def _slash_base(path: Optional[str]) -> str:
    """The last ``/`` component (``os.path.basename`` on Linux; ``basename`` also splits ``\\``)."""
    return (path or "").rsplit("/", 1)[-1]


def _known(function: Optional[str]) -> bool:
    """A native function the symbol tables named (``??`` is gdb's word for none)."""
    return bool(function) and function != "??"


def _location(f: Frame) -> str:
    if f.file:
        return "%s:%s" % (f.file, f.line) if f.line is not None else f.file
    return f.library or ""


def _marker_line(f: Frame) -> str:
    return "-- %s --" % (f.note or f.function or "gap")


# --------------------------------------------------------------------------------------------
# The styles
# --------------------------------------------------------------------------------------------


def _report(f: Frame, index: int) -> str:
    if f.marker:
        return "#%-3d %s" % (index, _marker_line(f))
    if f.kind == "python":
        where = _location(f)
        return "#%-3d [py] %s%s" % (index, f.function or "??", " (%s)" % where if where else "")
    parts = ["#%-3d" % index]
    if f.address is not None and not f.inlined:
        parts.append("0x%016x in" % f.address)
    func = f.function or "??"
    parts.append(func if "(" in func else func + " ()")
    if f.inlined:
        parts.append("[inlined]")
    if f.file:
        parts.append("at " + _location(f))
    elif f.library:
        parts.append("from " + f.library)
    if f.note:
        parts.append("[%s]" % f.note)
    if f.unwind:
        parts.append("(heuristic: %s)" % HEURISTIC_NAMES.get(f.unwind, f.unwind))
    return " ".join(parts)


def _place(f: Frame) -> str:
    return clean_label(_named(f.function or "??", _location(f)))


def _evidence(f: Frame) -> str:
    if f.file:
        where = "%s:%s" % (f.file, f.line) if f.line else f.file
    else:
        where = _slash_base(f.library)
    return _named(f.function or "??", where)


def _wait(f: Frame) -> str:
    return _named(f.function or "??", "%s:%s" % (f.file, f.line) if f.file else "")


def _task_wait(f: Frame) -> str:
    return "%s (%s:%s)" % (f.function or "??", f.file, f.line) if f.file else "%s" % f.function


def _caller(f: Frame) -> str:
    return "%s (%s:%s)" % (f.function, f.file, f.line)


def _coroutine(f: Frame) -> str:
    return _named(f.function or "??", "%s:%s" % (_slash_base(f.file), f.line) if f.file else "")


def _hint(f: Frame) -> str:
    where = _slash_base(f.file) + (":%s" % f.line if f.file and f.line is not None else "")
    return _named(f.function or "??", where)


def _rank(f: Frame) -> str:
    if f.kind == "python":
        name = f.function or "??"
        where = basename(f.file)
        if where and f.line is not None:
            where = "%s:%s" % (where, f.line)
        return _named(name.rsplit(".", 1)[-1] if "<" not in name else name, where)
    return _named(normalize_native_name(f.function) if f.function else "??", basename(f.library))


def _triage(f: Frame) -> str:
    if f.kind == "python":
        return _named(f.function or "??", "%s:%s" % (basename(f.file), f.line) if f.line else basename(f.file))
    if not _known(f.function):
        return "?? (%s)" % (library_base(f.library) or "no library")
    return _named(normalize_native_name(f.function or ""), library_base(f.library))


def _tree(f: Frame) -> str:
    if f.kind == "python":
        where = basename(f.file) or f.module or ""
        if where and f.line is not None:
            where = "%s:%s" % (where, f.line)
        where = clean_label(where[:MAX_RAW_NAME], MAX_LABEL // 2)
        name = clean_label((f.function or "??")[:MAX_RAW_NAME], MAX_LABEL - len(where) - 3)
        return _named(name, where)
    if f.marker:
        return clean_label(_marker_line(f))
    raw = f.function
    if raw and raw.strip() and raw.strip() != "??":
        raw = raw[:MAX_RAW_NAME]
        name = normalize_native_name(raw)
        if not name or name == "??":  # "<lambda>" and such: all template / parameter list
            name = short_function(raw) or raw.strip()
        return clean_label(name)
    lib = library_base(f.library)
    return clean_label("?? (%s)" % lib) if lib else "??"


def _bucket(f: Frame) -> str:
    if f.kind == "python":
        func = (f.function or "?").rsplit(".", 1)[-1]
        return "py:%s:%s" % (basename(f.file) or f.module or "?", func)
    name = normalize_native_name(f.function) if f.function and f.function != "??" else "?"
    return "c:%s:?" % library_base(f.library) if name == "?" else "c:%s" % name


def _sample(f: Frame) -> str:
    if f.kind == "python":
        return "%s (%s:%s)" % (f.function or "??", f.file or "?", f.line if f.line is not None else "?")
    return "%s (%s)" % (f.function or "??", _slash_base(f.library or "?"))


_STYLES: Dict[FrameStyle, Callable[[Frame], str]] = {
    FrameStyle.LOCATION: _location,
    FrameStyle.PLACE: _place,
    FrameStyle.EVIDENCE: _evidence,
    FrameStyle.WAIT: _wait,
    FrameStyle.TASK_WAIT: _task_wait,
    FrameStyle.CALLER: _caller,
    FrameStyle.COROUTINE: _coroutine,
    FrameStyle.HINT: _hint,
    FrameStyle.RANK: _rank,
    FrameStyle.TRIAGE: _triage,
    FrameStyle.TREE: _tree,
    FrameStyle.BUCKET: _bucket,
    FrameStyle.SAMPLE: _sample,
}
