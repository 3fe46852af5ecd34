"""``--job PID``: the worker processes of a launcher, read from /proc.

A launcher (torchrun, ``python -m torch.distributed.run``, mpirun, an srun step's slurmstepd, a
``multiprocessing`` parent) starts the processes that do the work; when the job hangs, those are
the ones to look at, and the user knows only the launcher's pid.  The rules, in order:

1. Every descendant of PID (children, grandchildren ...) that runs Python (its executable is
   ``python*``, or it maps a ``libpython``).
2. If some of them have a rank in their environment (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
   SLURM_PROCID), only those are workers; a process whose parent has the same rank is that
   rank's child (a DataLoader worker, a compile worker: they inherit RANK): it is captured as
   part of its rank (``JobProcesses.children``, at most ``MAX_CHILDREN`` a rank), never as a
   rank of its own.
3. Otherwise (a ``multiprocessing`` job) the Python descendants are the workers, and PID itself
   too when it runs Python: the parent waiting for a result is part of the story.
   multiprocessing's own helpers (resource tracker, fork server) are left out.

What is left out is said in a note, never silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from hanganalyze.acquire.procfacts import live_argv
from hanganalyze.acquire.procfs import read_proc
from hanganalyze.acquire.ranks import identity_from_environ, read_proc_environ
from hanganalyze.errors import InputError

_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "multiprocessing.semaphore_tracker")


#: Children captured per rank: a DataLoader has a few workers, a compile pool one per CPU; the
#: first ones say what the rank waits for, and each costs an attach.
MAX_CHILDREN = 8


@dataclass
class JobProcesses:
    launcher: int
    pids: List[int]
    notes: List[str] = field(default_factory=list)
    #: child pid -> the pid of the rank it belongs to (captured with the rank, not as a rank).
    children: Dict[int, int] = field(default_factory=dict)


def _ppid_and_name(pid: int) -> Optional[tuple]:
    raw = read_proc(pid, "stat")
    if raw is None:
        return None
    # comm may hold spaces and parentheses: the state and ppid follow the last ')'
    close = raw.rfind(b")")
    if close < 0:
        return None
    rest = raw[close + 2:].split()
    try:
        return int(rest[1]), raw[raw.find(b"(") + 1:close].decode("utf-8", "replace"), rest[0].decode()
    except (IndexError, ValueError):
        return None


def _children_map() -> Dict[int, List[int]]:
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        info = _ppid_and_name(int(entry))
        if info is not None:
            children.setdefault(info[0], []).append(int(entry))
    return children


def _task_children(pid: int) -> Optional[List[int]]:
    """``pid``'s children from ``/proc/PID/task/*/children`` (one file per thread); None where the
    kernel has no such file."""
    found: List[int] = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            raw = read_proc(pid, "task/%s/children" % tid)
            if raw is None:
                return None
            found.extend(int(x) for x in raw.split())
    except (OSError, ValueError):
        return None
    return found


def children_of(pid: int, children: Optional[Dict[int, List[int]]] = None) -> List[int]:
    """The live direct children of ``pid`` (zombies left out), by pid: from ``children`` (a
    ``_children_map()`` already read, for many pids at once), else from the kernel's children files,
    else from every process's ppid."""
    if children is not None:
        kids = children.get(pid, [])
    else:
        task_kids = _task_children(pid)
        kids = task_kids if task_kids is not None else _children_map().get(pid, [])
    return sorted(p for p in set(kids) if _state(p) not in ("Z", "X", None))


def descendants(pid: int) -> List[int]:
    """All descendants of ``pid``, parents before children, each level by pid."""
    children = _children_map()
    out: List[int] = []
    todo = sorted(children.get(pid, []))
    seen = {pid}
    while todo:
        p = todo.pop(0)
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        todo.extend(sorted(children.get(p, [])))
    return out


def children(pid: int) -> List[Tuple[int, str]]:
    """The live child processes of ``pid``, each with its name (comm), by pid (``children_of``)."""
    out = []
    for c in children_of(pid):
        info = _ppid_and_name(c)
        if info is not None:
            out.append((c, info[1]))
    return out
def runs_python(pid: int) -> bool:
    """Its executable is python*, or it maps libpython (an embedding launcher, a static python)."""
    try:
        exe = os.path.basename(os.readlink("/proc/%d/exe" % pid))
    except OSError:
        return False
    if exe.startswith("python"):
        return True
    return b"/libpython3" in (read_proc(pid, "maps", 4 << 20) or b"")


def _state(pid: int) -> Optional[str]:
    info = _ppid_and_name(pid)
    return info[2] if info else None


def _rank_children(helpers: List[int], parents: Dict[int, Optional[int]],
                   workers: Set[int]) -> Tuple[Dict[int, int], List[int]]:
    """({child: its rank's pid}, the children over ``MAX_CHILDREN`` a rank): a child of a child
    (a worker's own pool) belongs to the rank above both."""
    kept: Dict[int, int] = {}
    extra: List[int] = []
    per_rank: Dict[int, int] = {}
    for p in sorted(helpers):
        owner = parents.get(p)
        for _ in range(8):  # up the tree to the rank: a few levels at most
            if owner is None or owner in workers:
                break
            owner = parents.get(owner)
        if owner is None or owner not in workers:
            extra.append(p)
            continue
        if per_rank.get(owner, 0) >= MAX_CHILDREN:
            extra.append(p)
            continue
        per_rank[owner] = per_rank.get(owner, 0) + 1
        kept[p] = owner
    return kept, extra


def job_processes(launcher: int) -> JobProcesses:
    """The workers of the job started by ``launcher`` (see the module's rules)."""
    if launcher <= 0 or _ppid_and_name(launcher) is None:
        raise InputError("--job %d: no such process" % launcher)
    if launcher == os.getpid():
        raise InputError("--job %d is hanganalyze itself" % launcher)
    own = os.getpid()
    desc = [p for p in descendants(launcher) if p != own and _state(p) not in ("Z", "X", None)]
    python = [p for p in desc if runs_python(p)]
    ranks: Dict[int, Optional[int]] = {p: identity_from_environ(read_proc_environ(p), "environ")[0] for p in python}
    notes: List[str] = []
    kept: Dict[int, int] = {}
    ranks_known = any(r is not None for r in ranks.values())
    if ranks_known:
        parents = {p: (_ppid_and_name(p) or (None,))[0] for p in python}
        workers = []
        helpers = []
        for p in python:
            r = ranks[p]
            if r is None:
                continue
            if parents.get(p) in ranks and ranks.get(parents[p]) == r:
                helpers.append(p)
            else:
                workers.append(p)
        kept, extra = _rank_children(helpers, parents, set(workers))
        if kept:
            notes.append("captured %d child process(es) of ranks as part of their rank (DataLoader workers "
                         "and the like): pid %s" % (len(kept), ", ".join(map(str, sorted(kept)[:20]))))
        if extra:
            notes.append("left out %d more child process(es) of ranks (at most %d a rank): pid %s"
                         % (len(extra), MAX_CHILDREN, ", ".join(map(str, extra[:20]))))
        others = [p for p in python if ranks[p] is None]
        if others:
            notes.append("left out %d Python process(es) without a rank: pid %s"
                         % (len(others), ", ".join(map(str, others[:20]))))
    else:
        workers = [p for p in python if not any(h in " ".join(live_argv(p) or []) for h in _HELPERS)]
        if len(workers) < len(python):
            notes.append("left out multiprocessing's helper process(es) (resource tracker, fork server)")
        if runs_python(launcher):
            workers.insert(0, launcher)
    if not workers:
        raise InputError("--job %d: found no Python worker process among its %d descendant(s)" % (launcher, len(desc)))
    return JobProcesses(launcher=launcher, pids=workers, notes=notes, children=kept if ranks_known else {})
