"""What a process is (a plain Python program, PyTorch, a distributed job, C/C++ ...) and what the
input was (a live pid, a core, a paste), so the triage's advice fits the program (issue 30): a plain
Python program is never told about DataLoader workers or ``ray stack``, a C++ program never to merge
Python frames in, and a live run never to run the command it just ran.

The rule, from positive evidence only (a kind nothing shows is not claimed; a process may have
several kinds, e.g. python + torch + distributed):

* ``python``: a Python frame; or the interpreter (a ``python`` facts record, libpython mapped, or
  a native frame of the eval loop: ``_PyEval_EvalFrameDefault`` / ``PyEval_*``);
* ``native``: frames were seen and none of the ``python`` evidence is there (a C/C++ program);
* ``torch``: a Python frame under ``torch/``, a native frame in ``at::``/``c10::``/``torch::``, or
  libtorch / libc10 mapped;
* ``distributed``: rank facts (``Process.rank``/``dist``, collectives), or a frame of a collective
  runtime (``c10d::``, NCCL, gloo, MPI, horovod; ``torch/distributed/``, ``deepspeed/comm/``);
* ``asyncio``: an event loop read from memory, or a Python frame in ``asyncio/``;
* ``multiprocessing``: a Python frame in ``multiprocessing/`` or ``concurrent/futures/process.py``;
* ``ray``: a Python frame under ``ray/`` or a native ``ray::`` frame;
* ``dataloader``: a Python frame in ``torch/utils/data/``;
* ``parent``: a live process read alone that has child processes (the note ``acquire/many.py``
  leaves, ``loglines.CHILDREN_NOTE``).

Advice entries (``signatures/triage/waits.yaml``) name the kinds they are for (``kinds:``), the
inputs (``inputs:``: ``live`` | ``core`` | ``text``) and whether the process was read alone or with
others (``alone: true|false``: a ``--job`` is not told to run ``--job``); ``advice_fits`` is the
one test.
"""

from __future__ import annotations

import re
from typing import Any, FrozenSet, Iterable, Set

from hanganalyze.loglines import CHILDREN_NOTE
from hanganalyze_gdbext.model import Process

#: Every kind ``program_kinds`` may answer (``waits.yaml``'s ``kinds:`` filters name these).
KINDS = ("python", "native", "torch", "distributed", "asyncio", "multiprocessing", "ray", "dataloader", "parent")
#: Every input kind (``Process.source``; a job's failed input says "file").
INPUTS = ("live", "core", "text")

_PY_EVAL = re.compile(r"^(_PyEval_EvalFrame\w*|PyEval_\w+|_PyEval_Vector|Py_RunMain|Py_BytesMain|pymain_\w+)$")
_LIBPYTHON = re.compile(r"(^|/)libpython\d")
_LIBTORCH = re.compile(r"(^|/)lib(torch\w*|c10\w*)\.so")
_TORCH_NATIVE = re.compile(r"^(at|c10|torch)::")
_DIST_NATIVE = re.compile(r"^(c10d::|gloo::|horovod::|P?MPI_|p?nccl[A-Z])")
_DIST_PY = re.compile(r"(^|/)(torch/distributed/|deepspeed/comm/|horovod/)")
_PATHS = (
    ("torch", re.compile(r"(^|/)torch/")),
    ("asyncio", re.compile(r"(^|/)asyncio/")),
    ("multiprocessing", re.compile(r"(^|/)multiprocessing/|concurrent/futures/process\.py$")),
    ("ray", re.compile(r"(^|/)ray/")),
    ("dataloader", re.compile(r"(^|/)torch/utils/data/")),
)


def program_kinds(proc: Process) -> FrozenSet[str]:
    """The kinds of program ``proc`` is, by the rule of the module docstring."""
    kinds: Set[str] = set()
    frames_seen = False
    libs = [lib.path for lib in proc.libraries] + [str(m.path or "") for m in proc.mapped_files]
    if proc.python:
        kinds.add("python")
    if any(_LIBPYTHON.search(p) for p in libs):
        kinds.add("python")
    if any(_LIBTORCH.search(p) for p in libs):
        kinds.add("torch")
    if proc.rank is not None or proc.dist or proc.collectives is not None:
        kinds.add("distributed")
    if proc.asyncio is not None and getattr(proc.asyncio, "loops", None):
        kinds.add("asyncio")
    if any(n.startswith(CHILDREN_NOTE) for n in proc.notes):
        kinds.add("parent")
    for t in proc.threads:
        for f in t.all_frames():
            if f.marker:
                continue
            frames_seen = True
            if f.kind == "python":
                kinds.add("python")
                path = f.file or ""
                for kind, rx in _PATHS:
                    if rx.search(path):
                        kinds.add(kind)
                if _DIST_PY.search(path):
                    kinds.add("distributed")
                continue
            name = f.function or ""
            if _PY_EVAL.match(name):
                kinds.add("python")
            elif _TORCH_NATIVE.match(name):
                kinds.add("torch")
            if _DIST_NATIVE.match(name):
                kinds.add("distributed")
            if name.startswith("ray::"):
                kinds.add("ray")
            if f.library and _LIBPYTHON.search(f.library):
                kinds.add("python")
    if frames_seen and "python" not in kinds:
        kinds.add("native")
    return frozenset(kinds)


def input_kind(proc: Process) -> str:
    """How the process was read: ``live``, ``core`` or ``text`` (a paste, a log, a JSON)."""
    return proc.source if proc.source in ("live", "core") else "text"


def advice_fits(entry: Any, kinds: Iterable[str], source: str, alone: bool = True) -> bool:
    """Whether an advice entry of ``waits.yaml`` is for this program and input: a plain string is
    for every one; a mapping's ``kinds:`` needs one of them shown, ``not_kinds:`` none of them,
    ``inputs:`` the input kind, and ``alone:`` the process read alone (true) or with others (false)."""
    if not isinstance(entry, dict):
        return True
    have = set(kinds)
    want = entry.get("kinds")
    if want and not have.intersection(want):
        return False
    if have.intersection(entry.get("not_kinds") or ()):
        return False
    if "alone" in entry and bool(entry["alone"]) != alone:
        return False
    inputs = entry.get("inputs")
    return not inputs or source in inputs


def advice_text(entry: Any) -> str:
    """The text of an advice entry (a string, or a mapping's ``text``)."""
    return str(entry["text"]) if isinstance(entry, dict) else str(entry)
