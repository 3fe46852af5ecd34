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

from hanganalyze.analyze.framelists import pattern
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
        return True
    return False


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
