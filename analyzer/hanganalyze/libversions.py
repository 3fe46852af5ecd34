"""Library versions as names and lines say them: the pure half of ``acquire/embedded_versions.py``
(which reads them from binaries and cores), shared by acquisition, the matcher and the renderers.

A statically linked library is a ``Library`` whose path is ``"<file where the string was found>
(static libnccl.so)"`` and whose version is the embedded one; ``static_name(path)`` gives the library
name back ("libnccl.so") and the matcher checks ``conditions: libraries`` against that name.
"""

from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Optional, Tuple

from hanganalyze_gdbext.model import Library

#: (library name the conditions glob against, regex whose group 1 is the version)
EMBEDDED: List[Tuple[str, re.Pattern[bytes]]] = [
    ("libnccl.so", re.compile(rb"NCCL version (\d+\.\d+\.\d+)")),
]
#: A log line printed by NCCL (``NCCL INFO NCCL version 2.21.5+cuda12.4``).
TEXT_PATTERNS: List[Tuple[str, re.Pattern[str]]] = [
    ("libnccl.so", re.compile(r"\bNCCL version (\d+\.\d+\.\d+)")),
]

_STATIC = re.compile(r" \(static ([^()/\s]+)\)$")


def static_path(where: str, name: str) -> str:
    return "%s (static %s)" % (where, name)


def static_name(path: str) -> Optional[str]:
    """"libnccl.so" from ``"/x/libtensorflow_cc.so.2 (static libnccl.so)"``, else None."""
    m = _STATIC.search(path)
    return m.group(1) if m else None


def disk_path(path: str) -> str:
    return path[: -len(" (deleted)")] if path.endswith(" (deleted)") else path


def static_where(path: str) -> Optional[str]:
    """Where an embedded version was read, for people: the file's name, or "core memory"."""
    m = _STATIC.search(path)
    if m is None:
        return None
    where = path[: m.start()]
    return "core memory" if where.startswith("memory of ") else os.path.basename(where)


def drop_shadowed(libraries: List[Library]) -> List[Library]:
    """Without the embedded versions of a library the process maps with a known version (in
    place, also returned): the process runs the mapped one (PyTorch cu130 maps libnccl.so.2
    2.28.9 while libtorch carries the string of the 2.27.0 it was built against), and a second
    NCCL version beside it would only mislead the reader and the version conditions."""
    mapped = set()
    for lib in libraries:
        if static_name(lib.path) is None and (lib.version or "").count(".") >= 1:
            base = os.path.basename(disk_path(lib.path))
            mapped.update(name for name, _pat in EMBEDDED if base.startswith(name))
    if mapped:
        libraries[:] = [lib for lib in libraries if static_name(lib.path) not in mapped]
    return libraries


def versions_from_messages(messages: Iterable[str]) -> List[Tuple[str, str]]:
    """[(library name, version)] from log lines NCCL printed (first per library)."""
    out: Dict[str, str] = {}
    for line in messages:
        for lname, pat in TEXT_PATTERNS:
            if lname not in out:
                m = pat.search(line)
                if m:
                    out[lname] = m.group(1)
    return list(out.items())
