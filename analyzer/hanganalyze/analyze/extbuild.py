"""A JIT build of a PyTorch C++/CUDA extension that stopped before its build: the wait for the
build's lock file, told by the order of torch.utils.cpp_extension's own log lines.

Why: ``cpp_extension.load`` (DeepSpeed's ops, every project that JIT-builds its kernels) prints
"Using DIR as PyTorch extensions root..." and then takes the build directory's lock (FileBaton, a
plain lock file).  The process that gets it prints "Emitting ninja build file" / "Building
extension module" as it builds, every process "Loading extension module" once the build is there;
a process that waits for the lock prints nothing until the holder removes it, and a lock left by a
killed build is never removed (torch_extensions' stale lock).  So a log whose last build line is
the extensions root, with no frame naming a wait, waits for that lock file: the build itself would
have printed more.  A log with the build going on after that line says nothing of the kind.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from hanganalyze.analyze.triagetable import Category, table

#: torch.utils.cpp_extension's line before it takes the build lock (verbose builds, DeepSpeed's).
_ROOT = re.compile(r"\bUsing\s+\S.{0,500}?\s+as PyTorch extensions root\b")
#: Lines a build or load past the lock writes: the builder's ninja steps, a load, a build's error.
_PAST_LOCK = re.compile(r"Emitting ninja build file|Building extension module|Allowing ninja to set|"
                        r"ninja: no work to do|Loading extension module|No modifications detected for "
                        r"re-loaded extension module|Error building extension|Time to load \w+ op:")
#: Log lines read, at most.
MAX_LINES = 20000


def build_lock_wait(lines: Sequence[str]) -> Tuple[Optional[Category], Optional[int]]:
    """(the file-lock category, the extensions-root line's index) when the last line of a JIT
    extension build in ``lines`` is its extensions root (``_ROOT``) with no line after it that a
    build or load past the lock writes (``_PAST_LOCK``); (None, None) otherwise."""
    at = None
    for i, line in enumerate(lines[:MAX_LINES]):
        if _ROOT.search(line):
            at = i
        elif at is not None and _PAST_LOCK.search(line):
            at = None
    if at is None:
        return None, None
    return next((c for c in table().categories if c.id == "file-lock"), None), at
