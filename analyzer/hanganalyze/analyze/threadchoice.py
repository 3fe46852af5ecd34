"""Which thread the triage's headline is about: the program's own before a runtime's helpers.

Why: among threads waiting in equally telling ways, the triage took the first in the paste, and in
gdb pastes (``thread apply all bt`` lists the newest thread first) that was often a runtime's
helper (cuda-gdb's libcudadebugger thread, a gloo / NCCL / c10d loop, a thread pool worker,
faulthandler's watchdog, PyTorch's pin-memory thread) rather than the thread in the program's code.
Helpers are named by frame lists (``signatures/lists/runtime_helper_threads.yaml`` and
``worker_loops.yaml``); a thread with a frame in the program's own Python code (not the standard
library, not site-packages) or the main thread is preferred by rule.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Sequence, Tuple

from hanganalyze.analyze.framelists import pattern
from hanganalyze.analyze.triagetable import table
from hanganalyze.names import basename, library_base, normalize_native_name
from hanganalyze_gdbext.model import Frame, Process, Thread

#: A Python file of the interpreter's library or an installed package: not the program's own code.
_LIBRARY_PY = re.compile(r"(^|[/\\])(lib[/\\]python\d[.\d]*t?|site-packages|dist-packages)[/\\]|^<frozen ")


def _frame_keys(f: Frame) -> list:
    if f.kind == "python":
        return ["%s:%s" % (basename(f.file), (f.function or "").rsplit(".", 1)[-1])]
    keys = []
    if f.function and f.function != "??":
        keys.append(normalize_native_name(f.function))
    lib = library_base(f.library)
    if lib:
        keys.append(lib)
    return keys


def is_helper(t: Thread) -> bool:
    """The thread runs a runtime's own loop (a frame of the helper lists anywhere in its stack)."""
    helpers = pattern("runtime_helper_threads")
    pools = pattern("worker_loops")
    for f in t.all_frames():
        if f.marker:
            continue
        for k in _frame_keys(f):
            if helpers.search(k) or (f.kind == "native" and pools.search(k)):
                return True
    return False


def in_user_code(t: Thread) -> bool:
    """A Python frame of the program's own code: a file outside the interpreter's library and the
    installed packages (a relative path, as py-spy prints site-packages ones, counts as a package's
    when it names one: ``torch/...``; a bare ``app.py`` is the program's)."""
    for f in t.all_frames():
        if f.kind != "python" or f.marker or not f.file or f.file.startswith("<"):
            continue
        path = f.file.replace("\\", "/")
        if _LIBRARY_PY.search(path):
            continue
        if not path.startswith("/") and "/" in path:
            continue  # py-spy's package-relative path (torch/utils/data/...)
        if path in table().skip_python_files:
            continue  # py-spy's bare name of a standard-library file (threading.py, queue.py)
        return True
    return False


#: What a runtime's background thread shows between its pieces of work (never a lock, a join, the GIL).
_BACKGROUND = ("condition", "runs", "sleep", "helper")


def background(helper: Sequence[int], cats: Sequence[str]) -> list:
    """Per thread: a runtime's background thread of a process whose main thread is idle in a
    worker's loop (waits for its next task) while no other thread runs the program's code (``helper``
    as ``helper_order`` gives it, ``cats`` the wait categories).  Such a process waits for work: a
    background thread between its own checks (Ray's GC thread on its event, a reader thread, an
    event loop's thread) is not the hang, and the idle main thread speaks for the process."""
    idle = any(h == 0 for h in helper) and all(c == "idle" for h, c in zip(helper, cats) if h == 0)
    return [idle and h > 0 and c in _BACKGROUND for h, c in zip(helper, cats)]


def helper_order(t: Thread, proc: Process) -> int:
    """0 for the main thread or a thread in the program's code, 1 for an unknown one, 2 for a
    runtime's helper thread (sorted after others of the same category)."""
    if t.current or (t.name or "").lower() in ("mainthread", "main") or (proc.pid is not None and t.tid == proc.pid):
        return 0
    if in_user_code(t):
        return 0  # a pool worker running the program's task is the program's thread
    return 2 if is_helper(t) else 1


def _threading_started(t: Thread) -> bool:
    return any(f.kind == "python" and basename(f.file) == "threading.py"
               and (f.function or "").rsplit(".", 1)[-1] in ("_bootstrap", "_bootstrap_inner") for f in t.all_frames())


def main_missing(proc: Process) -> bool:
    """No thread of the process is its main thread (none has the pid, the name MainThread or the
    debugger's selection) and the first one, which stands for it, was started by
    ``threading.Thread`` (``threading.py``'s ``_bootstrap`` outermost, where the main thread never
    runs): a paste cut before the main thread, so where the process is is not in the input."""
    if not proc.threads or any(t.current or "MainThread" in (t.name, t.python_name)
                               or (proc.pid is not None and t.tid == proc.pid) for t in proc.threads):
        return False
    return _threading_started(proc.threads[0])


#: The C runtime's entry into the program: only the main thread has these frames.
_MAIN_ENTRY = ("main", "__libc_start_main", "__libc_start_call_main")


def main_first(t: Thread, index: int, proc: Process) -> int:
    """0 for the thread most likely the program's own (main / the signalled one, or the one that
    runs ``main()``: gdb lists the main thread last), else 1."""
    if t.current or (t.name or "").lower() in ("mainthread", "main") or (proc.pid is not None and t.tid == proc.pid):
        return 0
    if any(x.current for x in proc.threads):
        return 1
    if _runs_main(t):
        return 0
    return 0 if index == 0 and not any(_runs_main(x) for x in proc.threads) else 1


def _runs_main(t: Thread) -> bool:
    return any(f.kind == "native" and f.function in _MAIN_ENTRY for f in t.frames[-3:])


#: Waits of threads that hold no lock another thread waits for here: idle pool workers and a
#: runtime's helpers between their pieces of work (waits.yaml's rank 6 and above).
_HOLDS_NOTHING = 6


def join_holds_lock(rows: Sequence[Tuple[str, Optional[int]]], rank: Dict[str, int]) -> bool:
    """``rows``: (wait category, owner) per thread.  Some thread joins, others wait for a lock
    whose owner no memory recorded, and every thread waits in a join, that lock or idly: the lock's
    holder is a thread in view that is not waiting for it, and only a joiner is left, so the
    joiner took the lock and then joins the thread that waits for it (a shutdown that joins its
    workers under the lock they need: the join-vs-lock deadlock).  The join is then the hang's
    entry, as much as the lock: it ranks with it (the main thread first, as in any tie).  A thread
    that runs, sleeps or does I/O could hold the lock itself, and a recorded owner names the
    holder: the lock keeps its rank there."""
    cats = [c for c, _owner in rows]
    if "join" not in cats or "lock" not in cats:
        return False
    if any(owner is not None for c, owner in rows if c == "lock"):
        return False
    return all(c in ("join", "lock") or rank.get(c, 0) >= _HOLDS_NOTHING for c in cats)
