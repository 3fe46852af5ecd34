"""What a Python thread waits for, told by its innermost Python source line.

Why: a stack with Python frames only (py-spy without ``--native``, a traceback, py-bt,
faulthandler) shows no native wait, and a thread standing on ``with self.lock:`` in the program's
own function matched no frame list: it "ran".  The line it stands on says the mechanism
(``with X:`` / ``X.acquire()`` a lock, ``.join()`` a join, ``.get()`` a queue, ``.wait()`` a
condition, ``select`` I/O, ``recv`` the network, ``sleep`` a sleep, ``.result()`` a future).
The regexes are data (``signatures/triage/source_lines.yaml``, one a line, first match wins), as
Socorro's signature lists are.

Where the line comes from: the paste's own line under the frame (``Frame.source``: tracebacks,
py-bt), else the file on this machine when it is there (a live process or a core of this host),
read as ``heldsource`` reads it (size-capped, never from /proc, /sys or /dev).

Under a native lock wait: CPython's ``Lock.acquire`` is the primitive under every Python wait
(``Condition.wait`` blocks on ``waiter.acquire()``, ``Thread.join``, ``Queue.get``), so a thread
whose innermost native frames are only that primitive and the interpreter (a gdb session's
``#0 do_futex_wait`` with py-list's ``>339  waiter.acquire()``) is told by its Python line too
(``through_lock_wait``): the native frames say "a lock", the line says which wait it is.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple

from hanganalyze import rxcache
from hanganalyze.analyze.signatures import builtin_dir, display_path, read_data_file
from hanganalyze.analyze.triagetable import glob_match, path_hit, table
from hanganalyze.errors import SignatureError
from hanganalyze.names import basename, normalize_native_name, wait_name
from hanganalyze_gdbext.model import Frame

#: Source files larger than this are not read for one line.
MAX_SOURCE_BYTES = 1 << 20
_NOT_SOURCES = ("/proc/", "/sys/", "/dev/")


@lru_cache(maxsize=None)
def line_table() -> Tuple[Tuple[str, re.Pattern], ...]:
    """(category id, regex) pairs of ``source_lines.yaml``, in file order."""
    path = builtin_dir() / "triage" / "source_lines.yaml"
    where = display_path(path)
    data, _extra = read_data_file(path)
    out: List[Tuple[str, re.Pattern]] = []
    try:
        for item in data["lines"]:
            out.append((str(item["category"]), rxcache.compile(str(item["match"]))))
    except (KeyError, TypeError) as e:
        raise SignatureError("%s: each line needs a category and a match (%s)" % (where, e)) from None
    except re.error as e:
        raise SignatureError("%s: bad regex: %s" % (where, e)) from None
    return tuple(out)


@lru_cache(maxsize=256)
def _file_line(path: str, line: int) -> Optional[str]:
    if not path.startswith("/") or path.startswith(_NOT_SOURCES):
        return None
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_SOURCE_BYTES:
            return None
        with open(path, "rb") as f:
            for i, raw in enumerate(f, 1):
                if i == line:
                    return raw.decode("utf-8", "replace").strip()
    except OSError:
        return None
    return None


def source_line(f: Frame) -> Optional[str]:
    """The frame's source line: the paste's, else the file's on this machine."""
    if f.source:
        return f.source.strip()
    if f.file and f.line:
        return _file_line(f.file, f.line)
    return None


def line_category(text: str) -> Optional[str]:
    """The category id the first matching regex of the table gives ``text``, else None."""
    s = text.strip()
    if s.startswith("#"):
        return None
    for cid, rx in line_table():
        if rx.search(s):
            return cid
    return None


#: Python frames looked at from the innermost one outwards for a line the table knows.
WITHIN = 3


#: Waits CPython builds on its lock primitive (``Condition.wait``'s waiter lock, ``Thread.join``'s
#: tstate lock, ``Queue.get``'s and ``Future.result``'s conditions): over a native lock wait a line
#: naming one of these says which it is; a line naming the lock itself adds nothing to the native
#: frames, and one naming I/O or a sleep does not (a buffered stream's own lock under ``flush()``).
LOCK_BUILT = ("condition", "join", "queue", "future")


def _named(f: Frame) -> Tuple[str, str]:
    name = normalize_native_name(f.function) if f.function and f.function != "??" else ""
    return name, wait_name(name) if name else ""


def _lock_primitive(f: Frame) -> bool:
    name, short = _named(f)
    lock = table().by_id("lock")
    return bool(name) and lock is not None and lock.native is not None and bool(
        lock.native.search(name) or lock.native.search(short))


def through_lock_wait(f: Frame) -> bool:
    """A native frame a Python line explains: the lock category's primitive (a futex, a semaphore,
    ``PyThread_acquire_lock_timed``) or the interpreter and C runtime it is called through; never
    a GIL frame (a GIL wait is its own answer) nor an extension's named function."""
    if f.marker or _lock_primitive(f):
        return True
    tab = table()
    name, short = _named(f)
    if not name:
        return bool(tab.skip_libraries.search(basename(f.library) or "-"))
    gil = tab.by_id("gil")
    if gil is not None and gil.native is not None and gil.native.search(short):
        return False
    return bool(tab.skip_functions.search(name) or tab.skip_functions.search(short))


def _listed(f: Frame) -> bool:
    """A Python frame some category's frame list names (threading.py's wait, queue.py's get): its
    list, not its line, tells the wait."""
    file, func = basename(f.file), (f.function or "").split(" ", 1)[0].rsplit(".", 1)[-1]
    for c in table().categories:
        if path_hit(c, f.file):
            return True
        if any(glob_match(file, pf) and glob_match(func, pn) for pf, pn in c.python):
            return True
    return False


def source_wait(frames: Sequence[Frame], through_lock: bool = False) -> Optional[Tuple[str, int, str]]:
    """(category id, frame index, the line) for a thread whose innermost frames are Python frames,
    one of which (within ``WITHIN``) stands on a line the table knows; None when a native frame
    comes first (native frames tell the wait) or no line says anything.  ``through_lock``: native
    frames before the first Python one that are a lock primitive and the interpreter
    (``through_lock_wait``) are passed when that Python frame is no frame list's and its line names
    a wait built on the lock (``LOCK_BUILT``).  A frame's line is the call
    in progress, so every frame inside it is part of that call: a ``with self._lock:`` frame whose
    inner frames are a lock wrapper's (ddtrace's profiling proxy) still waits for the lock.  A
    built-in frame (py-bt's ``<built-in method flush ...>``) is how its caller's line waits."""
    seen = 0
    through = False  # native frames passed: a lock primitive innermost, then the interpreter
    for i, f in enumerate(frames):
        if f.marker:
            continue
        if f.kind != "python":
            if through_lock and not seen and (through or _lock_primitive(f)) and through_lock_wait(f):
                through = True
                continue
            return None
        if (through or not seen) and _listed(f):
            # threading.py's wait over the lock, or innermost (its line is the primitive's own
            # ``waiter.acquire``): its frame list, with its callers (a queue's get), tells the wait
            return None
        if not f.file and f.note and f.note.startswith("built-in"):
            continue
        text = source_line(f)
        if not text:
            return None
        cid = line_category(text)
        if cid is not None:
            return (cid, i, text) if not through or cid in LOCK_BUILT else None
        seen += 1
        if seen >= WITHIN:
            return None
    return None


#: A line that calls a method of its own object (``self._get_data()``, ``idx, data = self._get_data()``,
#: ``return self._recv(n)``): the callee's name.
_SELF_CALL = re.compile(r"^(?:(?:return|yield(?:\s+from)?|await)\s+|[\w\[\], .]+?\s*=\s*)?self\.(\w+)\(")


def called_method(frames: Sequence[Frame]) -> Optional[Frame]:
    """The frame a cut traceback's innermost line was calling, where that line calls a method of
    its own object: the method's frame (of the same file, as a class's own method is) was the next
    one, cut with the exception line.  Only the frame lists read it (a DataLoader's ``_next_data``
    on ``idx, data = self._get_data()`` waits in ``_get_data``, the queue's wait: open round 17)."""
    inner = next((f for f in frames if not f.marker), None)
    if inner is None or inner.kind != "python" or not inner.file:
        return None
    m = _SELF_CALL.match(source_line(inner) or "")
    if m is None:
        return None
    return Frame(kind="python", function=m.group(1), file=inner.file,
                 note="called on its caller's line (the traceback was cut before this frame)")
