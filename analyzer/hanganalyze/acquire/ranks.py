"""Who is this process in its job: rank, local rank, world size, host.

Every launcher tells its workers who they are through the environment, and that environment is
what we can read everywhere: ``/proc/PID/environ`` for a live process, the initial stack of a
core (``corefile.initial_stack``), and, for pasted text, the ``[rankN]:`` prefixes torchrun
prints or the file's name (``rank3.txt``, ``job.rank_3.pyspy``, ``job.r3.pyspy.txt``,
``snap-3.json``).  This module reads each of those facts; ``many.identify`` is the one place
that decides who a process is from them, and the acquirers only hand it what they read.
The variables, by launcher:

* torchrun / torch.distributed.run / torchelastic: RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK,
  LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID;
* Open MPI: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK; MPICH, Intel MPI: PMI_RANK / PMI_SIZE;
* Slurm (srun): SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, SLURMD_NODENAME.

The first family that names a rank wins, in that order: a torchrun worker inside an srun step
has both, and RANK is the one ``torch.distributed`` uses.  Only these variables are kept: the
rest of an environment (tokens, paths) never enters a snapshot.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Dict, Mapping, Optional, Tuple

from hanganalyze import rxcache
from hanganalyze.acquire.procfs import read_proc
from hanganalyze_gdbext.model import DistIdentity

#: (rank, world size, local rank, group/node rank, local world size) per launcher family.
FAMILIES: Tuple[Tuple[str, Tuple[Optional[str], ...]], ...] = (
    ("torch", ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE")),
    ("openmpi", ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", None,
                 "OMPI_COMM_WORLD_LOCAL_SIZE")),
    ("pmi", ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", None, "MPI_LOCALNRANKS")),
    ("slurm", ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", None)),
)
_FIELDS = ("rank", "world_size", "local_rank", "group_rank", "local_world_size")
#: Host names, first found wins.
HOST_VARS = ("SLURMD_NODENAME", "HOSTNAME", "HOST")
#: Kept as is when present (strings): enough to tell two jobs or two nodes apart.
EXTRA_VARS = {"MASTER_ADDR": "master_addr", "MASTER_PORT": "master_port", "TORCHELASTIC_RUN_ID": "run_id"}

#: A rank number no real job reaches; bigger values are corrupt memory or a hostile file.
MAX_RANK = 1 << 24

_RANK_IN_NAME = rxcache.compile(r"(?:^|[^a-z0-9])rank[_-]?(\d{1,8})(?![0-9])", re.IGNORECASE)
#: ``job.r0.pyspy.txt``, ``r12-stack.txt``: an ``r`` and digits standing alone between separators.
_R_IN_NAME = rxcache.compile(r"(?:^|[._-])r(\d{1,8})(?=[._-]|$)", re.IGNORECASE)
#: ``snap-3.json``, ``job.3.txt``: digits alone between ``-``/``.`` and a ``.``; taken only when they
#: are the name's only digits (``core.12345.0.txt`` or ``py-spy-4242.txt`` may be pids, times).
_BARE_IN_NAME = rxcache.compile(r"[.-](\d{1,8})\.")
_DIGITS = rxcache.compile(r"\d+")
#: Names whose numbers are pids, not ranks.
_PID_NAME = rxcache.compile(r"(?:^|[^a-z])(?:core|pid)(?:[^a-z]|$)", re.IGNORECASE)
_RANK_LABEL = rxcache.compile(r"^rank(\d{1,8})$")


def _int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    value = value.strip()
    if not value.isdigit() or len(value) > 8:
        return None
    n = int(value)
    return n if n < MAX_RANK else None


def identity_from_environ(env: Mapping[str, str], source: str) -> Tuple[Optional[int], Optional[DistIdentity]]:
    """(rank, dist) from an environment; (None, None) when no launcher set a rank."""
    for family, names in FAMILIES:
        if names[0] is None or _int(env.get(names[0])) is None:
            continue
        dist = DistIdentity(launcher=family, from_=source)
        for field, name in zip(_FIELDS, names):
            value = _int(env.get(name)) if name else None
            if value is not None and field != "rank":
                setattr(dist, field, value)
        for name in HOST_VARS:
            if env.get(name):
                dist.host = env[name][:255]
                break
        for name, key in EXTRA_VARS.items():
            if env.get(name):
                setattr(dist, key, env[name][:255])
        return _int(env.get(names[0])), dist
    return None, None


def read_proc_environ(pid: int) -> Dict[str, str]:
    """The launcher variables of a live process (empty when unreadable: not ours, or gone)."""
    raw = read_proc(pid, "environ", 1 << 20)
    if raw is None:
        return {}
    wanted = {n for _, names in FAMILIES for n in names if n} | set(HOST_VARS) | set(EXTRA_VARS)
    env: Dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            k = key.decode("utf-8", "replace")
            if k in wanted:
                env.setdefault(k, value.decode("utf-8", "replace"))
    return env


def rank_from_name(name: str) -> Optional[int]:
    """``straggler.fr.rank_0`` -> 0, ``rank12.txt`` -> 12, ``job.r0.pyspy.txt`` -> 0,
    ``snap-3.json`` -> 3, ``worker.log`` / ``core.4242.txt`` -> None (basename only).

    An explicit ``rank`` wins; ``rN`` next; bare digits only when they are the name's only number
    and the name does not say it is a core or pid: a wrong rank merges two ranks' evidence.
    """
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    m = _RANK_IN_NAME.search(base)
    if m:
        return _int(m.group(1))
    found = {int(x.group(1)) for x in _R_IN_NAME.finditer(base)}
    if len(found) == 1:
        return _int(str(found.pop()))
    if found or _PID_NAME.search(base) or len(_DIGITS.findall(base)) != 1:
        return None
    m = _BARE_IN_NAME.search(base)
    return _int(m.group(1)) if m else None


def rank_from_label(label: Optional[str]) -> Optional[int]:
    """The text parsers label torchrun's ``[rank3]:`` sections ``rank3``."""
    m = _RANK_LABEL.match(label or "")
    return _int(m.group(1)) if m else None


def said(dist: Optional[DistIdentity], source: str) -> DistIdentity:
    """A copy of ``dist`` (a new one if None) that says the rank came from ``source``."""
    return replace(dist, from_=source) if dist is not None else DistIdentity(from_=source)

