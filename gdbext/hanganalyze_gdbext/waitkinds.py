"""Which kind of wait a stack shows, from native frame names alone (no gdb, no memory).

Kept apart from ``locks.py`` (which reads memory inside gdb) so the patterns can be unit-tested
on recorded stacks, stripped ones included: Debian's ``python3.11`` shows ``take_gil`` as
``??`` but keeps the exported ``PyEval_RestoreThread``; a stripped libc keeps
``pthread_mutex_lock`` and ``__lll_lock_wait`` in ``.dynsym``.
"""

import os
import pkgutil
import re
from typing import List, Optional, Tuple

from . import compile_pattern

#: The pattern lists, as data (Socorro siggen's siglists): plain text, one pattern per line,
#: ``#`` comments, so gdb's Python reads them with the standard library.
LISTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lists")


def read_list(name: str) -> List[List[str]]:
    """The non-comment lines of ``lists/NAME.txt``, each split at the first run of spaces.  Read
    through the package's loader (``pkgutil.get_data``), so a zipapp's copy reads them too."""
    data = pkgutil.get_data(__name__.rpartition(".")[0], "lists/%s.txt" % name)
    if data is None:
        raise OSError("lists/%s.txt: the package's loader reads no data files" % name)
    lines = data.decode("utf-8").splitlines()
    return [line.strip().split(None, 1) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _alternatives(name: str) -> "re.Pattern[str]":
    return compile_pattern("|".join("(?:%s)" % " ".join(parts) for parts in read_list(name)))


def _kinds() -> Tuple[Tuple[str, str], ...]:
    """(kind, regex) in file order, the lines of one kind joined as alternatives."""
    order: List[str] = []
    parts = {}  # type: dict
    for kind, rx in read_list("wait_kinds"):
        if kind not in parts:
            order.append(kind)
            parts[kind] = []
        parts[kind].append("(?:%s)" % rx)
    return tuple((k, "|".join(parts[k])) for k in order)


#: Native-frame classifiers, checked innermost first (``lists/wait_kinds.txt``).
CLASSIFIERS: Tuple[Tuple[str, str], ...] = _kinds()
_COMPILED = [(kind, compile_pattern(rx)) for kind, rx in CLASSIFIERS]
BY_KIND = dict(_COMPILED)
#: Kinds that decide only when nothing specific is found before the eval frames, best first.
GENERIC = ("parked", "condvar", "futex")
#: Frames that execute Python: the wait belongs to native code called from here, not above it.
EVAL_FRAMES = _alternatives("eval_frames")
#: Frames that implement the wait itself; the "frame where it waits" is the first frame outside.
IMPL_FRAMES = _alternatives("wait_impl_frames")
#: Libraries whose frames are plumbing, not "where the program waits" (ctypes, ffi, the runtime).
RUNTIME_LIBS = _alternatives("wait_runtime_libraries")
MAX_SCAN_FRAMES = 48


def classify(names: List[Optional[str]]) -> Tuple[Optional[str], Optional[int], Optional[int]]:
    """(kind, index of the deciding frame, index of the first eval frame) for innermost-first
    function names.  ``kind`` is None for a thread that is not waiting on anything we know."""
    generic: Tuple[Optional[str], Optional[int]] = (None, None)
    for i, name in enumerate(names[:MAX_SCAN_FRAMES]):
        if not name:
            continue
        if EVAL_FRAMES.match(name):
            return generic[0], generic[1], i
        for kind, rx in _COMPILED:
            if rx.search(name):
                if kind not in GENERIC:
                    return kind, i, _first_eval(names, i)
                if generic[0] is None or GENERIC.index(kind) < GENERIC.index(generic[0]):
                    generic = (kind, i)  # a condition variable explains a futex wait better
                break
    return generic[0], generic[1], None


def _first_eval(names: List[Optional[str]], start: int) -> Optional[int]:
    for j in range(start, min(len(names), MAX_SCAN_FRAMES)):
        if names[j] and EVAL_FRAMES.match(names[j] or ""):
            return j
    return None


def bare(name: Optional[str]) -> str:
    """A Python function name without its class (3.11+ frames carry qualnames: "Condition.wait")."""
    return (name or "").rsplit(".", 1)[-1]
