"""The triage's table: ``signatures/triage/waits.yaml`` read once into wait categories (frame
patterns, the next steps), the blame-frame skip lists and the general next steps.  A broken file is
one SignatureError line; its parse is cached by content (``signatures.read_data_file``).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hanganalyze import rxcache
from hanganalyze.analyze.sigmodel import LazyPattern
from hanganalyze.analyze.signatures import builtin_dir, display_path, read_data_file
from hanganalyze.errors import SignatureError
from hanganalyze.names import basename, normalize_native_name, wait_name
from hanganalyze_gdbext.model import Frame


@dataclass
class Category:
    """One wait category of ``waits.yaml``."""

    id: str
    label: str
    rank: int = 5
    within: int = 12
    native: Optional[re.Pattern] = None
    #: ``context``: names matched as ``native`` are, for the thread's wait, but of a library's own
    #: code that waits in something else (NCCL's host functions): a debugger's lone stack stopped
    #: in one is running that code, not standing in a wait (``stands_still``).
    context: Optional[re.Pattern] = None
    unnamed: Tuple[str, ...] = ()
    #: Libraries (globs) only a host thread passes through on its way into the ``unnamed`` ones (the
    #: CUDA runtime into the driver): a frame of one above them is the program entering them.
    entered_from: Tuple[str, ...] = ()
    python: Tuple[Tuple[str, str], ...] = ()
    python_path: Optional[re.Pattern] = None
    messages: Optional[re.Pattern] = None
    needs_lock_wait: bool = False
    #: The matched frame counts only when every frame inside it is a wait primitive matching this
    #: (or an unnamed C-runtime frame): a helper thread's loop sleeping between its checks, not busy
    #: in one.
    only_above: Optional[re.Pattern] = None
    #: ``entered_at``: Python frames that enter this wait's primitive (a ``with lock:`` block's
    #: ``__enter__``): as a thread's innermost Python frame they decide before a context further out
    #: matches (a queue's put entering the queue's own lock waits for that lock, not for a consumer).
    entered: Tuple[Tuple[str, str], ...] = ()
    #: ``driver_semaphore``: (a native regex, library globs): a frame matching the regex whose every
    #: caller in view is an unnamed frame of those libraries (or the C runtime's thread start) is a
    #: device driver waiting on its own semaphore, not this wait (``in_driver``).
    driver_semaphore: Optional[Tuple[re.Pattern, Tuple[str, ...]]] = None
    #: ``worker_loops``: "file:function" pairs of a worker's loop between tasks: the frames inside
    #: one that only read the next task are this wait (``Table.vetoed``).
    worker_loops: Tuple[Tuple[str, str], ...] = ()
    #: ``unless_inside``: a frame of this category does not count when a frame inside it (nearer the
    #: top) matches this: a thread inside the GPU driver that waits there for a mutex or rwlock waits
    #: for the host thread that holds it (``Table.vetoed``), not for the device.
    unless_inside: Optional[re.Pattern] = None
    #: ``unless_inside_python``: "file:function" pairs: likewise for a Python frame inside it (a
    #: network library's frame over threading's Condition.wait waits for the thread that does its
    #: I/O to signal, not for the network itself).
    unless_inside_py: Tuple[Tuple[str, str], ...] = ()
    #: ``unless_under``: a frame of this category does not count when its caller (the next named
    #: native frame out) matches this: the primitive is another wait's implementation (CPython's lock
    #: is a condition variable where the platform has no semaphores: macOS's ``__psynch_cvwait`` under
    #: ``PyThread_acquire_lock_timed`` waits for the lock's holder, not for a signal).
    unless_under: Optional[re.Pattern] = None
    #: What to capture or set next: advice entries, each a string (for every program) or a mapping
    #: ``{text, kinds, not_kinds, inputs}`` (``analyze/programkind.py``'s ``advice_fits``).
    next: List[Any] = field(default_factory=list)
    #: Why a thread waits here: advice entries like ``next``; the first that fits is the cause.
    cause: List[Any] = field(default_factory=list)


    def in_driver(self, frames: Sequence[Frame], i: int, runtime: re.Pattern) -> bool:
        """Frame ``i`` is a semaphore wait that a device driver's unnamed frames (libcuda's) alone
        called: the driver waiting for its device (a blocking synchronisation's event) or one of the
        driver's own threads, never a lock another thread of the program holds.  ``runtime``: the
        C runtime's libraries (the thread's start under a driver thread)."""
        if self.driver_semaphore is None or frames[i].kind == "python":
            return False
        rx, libs = self.driver_semaphore
        name = normalize_native_name(frames[i].function or "")
        if not name or not (rx.search(name) or rx.search(wait_name(name))):
            return False
        callers = [f for f in frames[i + 1:] if not f.marker]
        driver = [f for f in callers if not (f.function and f.function != "??")
                  and any(glob_match(basename(f.library), g) for g in libs)]
        return bool(driver) and callers[:1] == driver[:1] and all(
            f in driver or runtime.search(basename(f.library) or "-") for f in callers)


@dataclass
class Table:
    categories: List[Category]
    crashed: Category
    runs: Category
    skip_libraries: re.Pattern
    skip_functions: re.Pattern
    skip_python_files: frozenset
    #: Next steps that depend on the input, not on the wait: advice entries per situation.
    general: Dict[str, List[Any]]
    #: category id -> log pattern: a crash whose log says this is that wait's consequence (the
    #: collective watchdog's abort after a timeout) is triaged as the wait, not as a crash
    consequence_of: Dict[str, re.Pattern] = field(default_factory=dict)

    def by_id(self, cid: str) -> Optional[Category]:
        """The category of that id (``crashed`` and ``runs`` included); None for an unknown id."""
        return next((c for c in self.categories + [self.crashed, self.runs] if c.id == cid), None)

    def vetoed(self, cat: Category, frames: Sequence[Frame], i: int) -> bool:
        """Frame ``i``'s match does not make ``cat`` the thread's wait: a semaphore inside a device
        driver's own frames (``Category.in_driver``), or a frame inside a worker loop's read of its
        next task (that loop's category, ``worker_loops``, is the wait: an idle worker)."""
        if cat.in_driver(frames, i, self.skip_libraries) or _inside(cat.unless_inside, frames[:i]):
            return True
        if cat.unless_under is not None and _inside(
                cat.unless_under, [f for f in _callers(frames, i) if not _inside(cat.native, [f])][:1]):
            return True
        if cat.unless_inside_py and any(f.kind == "python" and not f.marker and _pair_match(f, cat.unless_inside_py)
                                        for f in frames[:i]):
            return True
        if cat.worker_loops:
            return False
        loop = next((c for c in self.categories if c.worker_loops), None)
        return loop is not None and self._inside_loop(loop, frames, i)

    def _inside_loop(self, loop: Category, frames: Sequence[Frame], i: int) -> bool:
        queue = next((c for c in self.categories if c.id == "queue"), None)
        for f in frames[i:i + loop.within]:
            if f.marker:
                continue
            if f.kind == "python":
                file, func = basename(f.file), (f.function or "").rsplit(".", 1)[-1]
                if loop.unless_inside_py and _pair_match(f, loop.unless_inside_py):
                    return False  # a task's runner (the pool's work item, a server's request): not between tasks
                if any(glob_match(file, pf) and glob_match(func, pn) for pf, pn in loop.worker_loops):
                    return True
                if f.file and not (file in self.skip_python_files or (queue is not None and any(
                        glob_match(file, pf) and glob_match(func, pn) for pf, pn in queue.python))):
                    return False  # the program's own frame: the worker runs a task (a built-in has no file)
            elif not self._runtime(f):
                return False
        return False

    def stands_still(self, f: Frame) -> bool:
        """A native frame where a thread stands without running the program's own code: the C
        runtime's and the interpreter's (by name or library), a wait primitive of any category."""
        return self._runtime(f) or bool(self.skip_libraries.search(basename(f.library) or "-"))

    def _runtime(self, f: Frame) -> bool:
        """A native frame of the C runtime, the interpreter or a wait primitive (no program code)."""
        name = normalize_native_name(f.function) if f.function and f.function != "??" else ""
        if not name:
            return bool(self.skip_libraries.search(basename(f.library) or "-"))
        short = wait_name(name)
        return bool(self.skip_functions.search(name) or self.skip_functions.search(short) or self.waits_in(f))

    def waits_in(self, f: Frame) -> bool:
        """A named native frame that some category's native list names: a wait primitive."""
        name = normalize_native_name(f.function) if f.function and f.function != "??" else ""
        if not name:
            return False
        short = wait_name(name)
        return any(c.native is not None and (c.native.search(name) or c.native.search(short)) for c in self.categories)


def _pair_match(f: Frame, pairs: Sequence[Tuple[str, str]]) -> bool:
    """A Python frame whose file's basename and function's last name part match a pair's globs."""
    file, func = basename(f.file), (f.function or "").split(" ", 1)[0].rsplit(".", 1)[-1]
    return any(glob_match(file, pf) and glob_match(func, pn) for pf, pn in pairs)


def _callers(frames: Sequence[Frame], i: int) -> List[Frame]:
    """The named native frames outside frame ``i``, nearest first."""
    return [f for f in frames[i + 1:] if not f.marker and f.kind != "python" and f.function and f.function != "??"]


def _inside(rx: Optional[re.Pattern], frames: Sequence[Frame]) -> bool:
    """A native frame of ``frames`` whose name (or its wait name) ``rx`` matches."""
    if rx is None:
        return False
    for f in frames:
        if f.marker or f.kind == "python" or not f.function or f.function == "??":
            continue
        name = normalize_native_name(f.function)
        if rx.search(name) or rx.search(wait_name(name)):
            return True
    return False


def _rx(items: Any, where: str, lazy: bool = False) -> Optional[re.Pattern]:
    """The items as one alternation; ``lazy``: compiled on first use (a table read from the data
    cache was compiled in full when it was parsed, ``_checked``), as most runs see no log line nor
    Python file that needs the message and path patterns (start-up time, issue 21)."""
    if not items:
        return None
    text = "|".join("(?:%s)" % i for i in items)
    if lazy:
        return LazyPattern(text, 0)  # type: ignore[return-value] - quacks like re.Pattern
    try:
        return rxcache.compile(text)
    except re.error as e:
        raise SignatureError("%s: bad regex: %s" % (where, e)) from None


def path_hit(cat: Category, file: Optional[str]) -> bool:
    """The category's ``python_path`` regexes find the frame's file, a Windows path's backslashes read as
    slashes (the regexes are written with ``/``: open round 71's pip\\_vendor\\lockfile on Windows)."""
    if cat.python_path is None or not file:
        return False
    return bool(cat.python_path.search(file.replace("\\", "/") if "\\" in file else file))


def glob_match(name: str, pattern: str) -> bool:
    """``fnmatch.fnmatchcase``, without compiling a pattern that has no wildcard (most do not)."""
    if "*" in pattern or "?" in pattern or "[" in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    return name == pattern


def _category(d: Dict[str, Any], where: str, lazy: bool = False) -> Category:
    if not isinstance(d, dict) or not d.get("id") or not d.get("label"):
        raise SignatureError("%s: each category needs an id and a label" % where)
    py, entered, loops, unless_py = [], [], [], []
    for key, out in (("python", py), ("entered_at", entered), ("worker_loops", loops),
                     ("unless_inside_python", unless_py)):
        for item in d.get(key) or []:
            file, _, func = str(item).rpartition(":")
            out.append((file or "*", func or "*"))
    return Category(id=str(d["id"]), label=str(d["label"]), rank=int(d.get("rank", 5)),
                    within=int(d.get("within", 12)), native=_rx(_native(d), where),
                    context=_rx(d.get("context"), where),
                    unnamed=tuple(d.get("unnamed") or ()), entered_from=tuple(d.get("entered_from") or ()),
                    python=tuple(py), entered=tuple(entered), worker_loops=tuple(loops),
                    python_path=_rx(d.get("python_path"), where, lazy), messages=_rx(d.get("messages"), where, lazy),
                    needs_lock_wait=bool(d.get("needs_lock_wait")), only_above=_rx(d.get("only_above"), where, lazy),
                    driver_semaphore=_driver(d.get("driver_semaphore"), where),
                    unless_inside=_rx(d.get("unless_inside"), where), unless_inside_py=tuple(unless_py),
                    unless_under=_rx(d.get("unless_under"), where),
                    next=_advice(d.get("next"), where), cause=_advice(d.get("cause"), where))


def _native(d: Dict[str, Any]) -> List[str]:
    """``native`` and ``kernel`` (a Linux kernel stack's wait functions, ``acquire/text/kstack.py``):
    both are matched against native frames' names; kept apart in the data so each list says what it
    is."""
    return list(d.get("native") or []) + list(d.get("kernel") or [])


def _driver(d: Any, where: str) -> Optional[Tuple[re.Pattern, Tuple[str, ...]]]:
    if not d:
        return None
    if not isinstance(d, dict) or not d.get("native") or not d.get("libraries"):
        raise SignatureError("%s: driver_semaphore needs a native and a libraries list" % where)
    return _rx(d["native"], where), tuple(str(g) for g in d["libraries"])  # type: ignore[return-value]


def _advice(items: Any, where: str) -> List[Any]:
    """A category's advice entries (a string or a list of strings and ``{text, kinds, not_kinds,
    inputs}`` mappings), checked: a mapping without a text is one SignatureError line."""
    out = [items] if isinstance(items, (str, dict)) else list(items or [])
    for e in out:
        if isinstance(e, dict) and not isinstance(e.get("text"), str):
            raise SignatureError("%s: an advice entry needs a text" % where)
    return out


@lru_cache(maxsize=None)
def table() -> Table:
    """``signatures/triage/waits.yaml``, read once; a broken file is one SignatureError line."""
    path = builtin_dir() / "triage" / "waits.yaml"
    where = display_path(path)
    data, _checked = read_data_file(path, lambda data, _node: _table(data, where) and True, "triage-compiled")
    return _table(data, where, lazy=True)


def _table(data: Any, where: str, lazy: bool = False) -> Table:
    try:
        cats = [_category(c, "%s: %s" % (where, c.get("id") if isinstance(c, dict) else c), lazy)
                for c in data["categories"]]
        skip = data["blame_skip"]
        return Table(categories=cats, crashed=_category(data["crashed"], where, lazy),
                     runs=_category(data["runs"], where, lazy),
                     skip_libraries=_rx(skip["libraries"], where) or rxcache.compile("$^"),
                     skip_functions=_rx(skip["functions"], where) or rxcache.compile("$^"),
                     skip_python_files=frozenset(skip["python_files"]),
                     general={str(k): _advice(v, where) for k, v in data["general"].items()},
                     consequence_of={str(k): _rx(v, where, lazy) for k, v in
                                     (data["crashed"].get("consequence_of") or {}).items() if v})
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise SignatureError("%s: not a triage table (%s)" % (where, e)) from None


# --------------------------------------------------------------------------------------------
# One thread
# --------------------------------------------------------------------------------------------


