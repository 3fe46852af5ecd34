"""A forked child blocked on a lock it inherited: the fork hazard, told from the frames.

Why: ``fork()`` copies only the calling thread, so a lock another parent thread held at that
moment (logging's module lock, a handler's lock, sys.stderr's buffer lock, malloc's arena lock) is
held forever in the child.  The triage called such a child's wait "a lock" (or, for a std stream's
flush, "I/O"), the same as any lock wait, and sent people looking for a holder that does not exist
in the child.  A child is known as forked by frames only a forked child runs
(``signatures/lists/fork_child_frames.yaml``: popen_fork's ``_launch`` with process.py's
``_bootstrap`` inside it, the after-fork hooks); process.py's ``_bootstrap`` with neither those
nor a spawn/forkserver entry (``fork_spawn_frames.yaml``) outside it is a child whose start
method the paste cut (fork is the default on Linux before 3.14): told as "likely".
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

from hanganalyze.analyze.framelists import python_frames
from hanganalyze.analyze.triagetable import glob_match
from hanganalyze.names import basename
from hanganalyze_gdbext.model import Frame

#: Python frames innermost in a child that wait for a lock the parent's threads take: the standard
#: streams' flush and write (their buffer lock), logging's module and handler locks.
_LOCKING_CALLS = frozenset(("flush", "_flush_std_streams", "write", "_enter_buffered_busy", "_acquireLock",
                            "acquire", "__enter__", "handle", "emit"))


def _in(f: Frame, name: str) -> bool:
    if f.kind != "python" or f.marker:
        return False
    file, func = basename(f.file), (f.function or "").rsplit(".", 1)[-1]
    return any(glob_match(file, pf) and func == pn for pf, pn in python_frames(name))


def _bootstrap(f: Frame) -> bool:
    return (f.kind == "python" and (f.function or "").rsplit(".", 1)[-1] == "_bootstrap"
            and (f.file or "").replace("\\", "/").endswith("multiprocessing/process.py"))


#: multiprocessing's line over a child's uncaught exception ("Process ForkProcess-1:"): the process's
#: name says its context's start method (the default context's "Process-N" says none).
_CHILD_LINE = re.compile(r"\bProcess (Fork|Spawn|ForkServer)Process-\d+(?::\d+)*:\s*$")


def forked(frames: Sequence[Frame], messages: Sequence[str] = ()) -> Optional[str]:
    """"forked" when a frame only a forked child runs is in the stack, "likely" for multiprocessing's
    ``_bootstrap`` with no start method visible, None otherwise (no child, or a spawned one).  The
    child's name in multiprocessing's "Process ForkProcess-1:" line over its traceback says the start
    method of a ``_bootstrap`` child: ForkProcess forked, SpawnProcess / ForkServerProcess did not."""
    if any(_in(f, "fork_spawn_frames") for f in frames):
        return None
    if any(_in(f, "fork_child_frames") for f in frames):
        return "forked"
    if not any(_bootstrap(f) for f in frames):
        return None
    said = {m.group(1) for m in map(_CHILD_LINE.search, messages[:200]) if m}
    if said == {"Fork"}:
        return "forked"
    return None if said else "likely"


def inherited_lock_wait(frames: Sequence[Frame], category: str, messages: Sequence[str] = ()) -> Optional[str]:
    """"forked" / "likely" when the thread is a forked child (``forked``) whose wait is a lock, or
    whose innermost Python call takes a lock the parent's threads hold (a std stream's flush,
    logging's locks) while the triage saw I/O or nothing; None otherwise."""
    if category not in ("lock", "io", "runs"):
        return None
    how = forked(frames, messages)
    if how is None:
        return None
    if category == "lock":
        return how
    for f in frames[:4]:
        if f.marker:
            continue
        if f.kind != "python":
            return None
        name = (f.function or "").rsplit(".", 1)[-1]
        if name in _LOCKING_CALLS:
            return how
        if f.file:
            return None
        # py-bt's <built-in method ...> other than those: its caller's line says more
    return None
