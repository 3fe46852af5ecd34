"""A rank's children (``--job``): DataLoader workers, compile workers, ``multiprocessing``
children, captured with their rank and kept in its ``Process.children`` (issue 31).

A child inherits RANK from its rank's environment, so by its environment alone it would be a
second process of that rank; it is never one: ``attach_children`` moves every child acquired
for a rank under that rank, with ``parent`` (the rank's pid) and ``role`` decided from positive
evidence, strongest first:

* its frames: ``_worker_loop`` of ``torch/utils/data/_utils/worker.py`` is a DataLoader worker;
  a frame of ``torch/_inductor/compile_worker/`` an inductor compile worker; ``_bootstrap`` of
  ``multiprocessing/process.py`` (or ``multiprocessing.spawn`` / ``forkserver`` in its command
  line) any other ``multiprocessing`` child;
* its command line: ``torch._inductor.compile_worker`` (the subprocess pool's entry point);
* else "child": it is the rank's, what it does is not known.

(The pin-memory "worker" is a thread of the rank, not a process: it is in the rank's threads.)
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from hanganalyze_gdbext.model import Process

#: (role, file path part, function or None) of a frame that says what a child is, first match wins.
_FRAME_ROLES = (
    ("dataloader-worker", "torch/utils/data/_utils/worker.py", "_worker_loop"),
    ("compile-worker", "torch/_inductor/compile_worker/", None),
    ("mp-child", "multiprocessing/process.py", "_bootstrap"),
)
#: (role, command-line part): a child read without Python frames still says what it runs.
_ARGV_ROLES = (
    ("compile-worker", "torch._inductor.compile_worker"),
    ("compile-worker", "torch/_inductor/compile_worker"),
    ("mp-child", "multiprocessing.spawn"),
    ("mp-child", "multiprocessing.forkserver"),
)
#: How a role is named in a sentence: "waits for DataLoader worker 4242".
ROLE_NAMES = {"dataloader-worker": "DataLoader worker", "compile-worker": "compile worker",
              "mp-child": "multiprocessing child", "child": "child process"}


def child_role(proc: Process) -> str:
    """What ``proc`` is for its rank (see the module's rules)."""
    for role, part, func in _FRAME_ROLES:
        for t in proc.threads:
            for f in t.all_frames():
                if f.kind == "python" and part in (f.file or "").replace("\\", "/") \
                        and (func is None or (f.function or "").rsplit(".", 1)[-1] == func):
                    return role
    argv = " ".join(proc.argv or [])
    for role, part in _ARGV_ROLES:
        if part in argv:
            return role
    return "child"


def attach_children(processes: List[Process], parents: Sequence[Optional[int]]) -> List[Process]:
    """The processes that are ranks, each child moved under its rank's ``children``.

    ``parents[i]``: the pid of the rank process ``i`` was captured for, None for a rank.  A child
    whose rank is not among the processes (its acquisition failed) is dropped with its rank's
    failure rather than counted as a rank."""
    by_pid: Dict[int, Process] = {p.pid: p for p, parent in zip(processes, parents)
                                  if parent is None and p.pid is not None}
    out: List[Process] = []
    for p, parent in zip(processes, parents):
        if parent is None:
            out.append(p)
            continue
        owner = by_pid.get(parent)
        if owner is None:
            continue
        p.parent = parent
        p.role = child_role(p)
        p.label = "%s %s" % (ROLE_NAMES.get(p.role, "child process"), p.pid)
        owner.children.append(p)
    return out
