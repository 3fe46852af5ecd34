"""A signature's conditions (signal, Python version, libraries and their versions) checked against
what is known of one process.  Unknown is not "no": a version that cannot be read lowers the
finding and says why; only a known fact outside the range rules it out.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.sigmodel import Signature, parse_version
from hanganalyze.libversions import static_name, versions_from_messages
from hanganalyze.names import library_version
from hanganalyze_gdbext.model import Evidence, Frame, Process

#: Confidence factor when a version condition could not be checked: the library is loaded but its
#: version is unreadable (``libnccl.so.2``), or the Python version is unknown.
UNKNOWN_VERSION_FACTOR = 0.9
#: ... and when the library was not found at all (not mapped, no embedded version string, not in
#: the log): linked statically where we could not read it, or an input that lists no libraries.
MISSING_LIBRARY_FACTOR = 0.7

def known_libraries(process: Process, frame_lists: Sequence[List[Frame]]) -> List[Tuple[str, Optional[str], str]]:
    """(name, version, where) of every library known: process.libraries (a statically linked
    one, ``"FILE (static libnccl.so)"``, under its library name), versions NCCL printed in the
    log (text inputs), plus frame libraries (no version)."""
    seen: Dict[str, Tuple[str, Optional[str], str]] = {}
    for lib in process.libraries:
        static = static_name(lib.path)
        name = static or os.path.basename(lib.path)
        key = lib.path if static else name
        where = "%s linked into %s" % (static, lib.path[: lib.path.rfind(" (static ")]) if static else name
        seen[key] = (name, lib.version, where)
    for name, v in versions_from_messages(process.messages):
        seen.setdefault("log:" + name, (name, v, "%s (version printed in the log)" % name))
    for frames in frame_lists:
        for f in frames:
            if f.library:
                base = os.path.basename(f.library)
                seen.setdefault(base, (base, None, base))
    return list(seen.values())


def check_conditions(sig: Signature, process: Process, libraries: List[Tuple[str, Optional[str], str]]
                     ) -> Optional[Tuple[float, List[Evidence], List[str]]]:
    """(confidence factor, evidence, notes) when the conditions hold or cannot be checked;
    None only when a KNOWN fact fails them (a known version outside the range, a known signal
    or Python version, a presence-only library absent from a known library list)."""
    c = sig.conditions
    factor, ev, notes = 1.0, [], []
    if c.signal is not None and process.signal not in c.signal:
        return None
    if c.python is not None:
        v = parse_version(process.python.version if process.python is not None else None)
        if v is None:
            factor *= UNKNOWN_VERSION_FACTOR
            notes.append("Python version unknown: this applies to Python %s" % c.python.text)
        elif not c.python.contains(v):
            return None
    for lc in c.libraries:
        found = [(n, v, w) for n, v, w in libraries if lc.name.search(n)]
        if lc.version is None:
            if not found and process.libraries:  # full list known and the library is not loaded
                return None
            continue
        versions = []
        for n, v, w in found:
            pv = parse_version(v) if v else _version_from_name(n)
            # a bare soname major ("libnccl.so.2", the pip wheels' name) says nothing useful
            if pv is not None and len(pv) >= 2:
                versions.append((w, pv))
        if not versions:
            # Unknown is not "no": NCCL may be linked statically, or the input (a paste) does
            # not list libraries.  Keep the finding, lower, and say why.
            factor *= UNKNOWN_VERSION_FACTOR if found else MISSING_LIBRARY_FACTOR
            what = _display_name(lc.name_text)
            why = ("%s is loaded but its version could not be read" % found[0][2] if found
                   else "%s is not mapped as a file and no embedded version string was found" % lc.name_text)
            note = "%s version unknown: the fix applies from %s (%s)" % (
                what, lc.version.text.lstrip(">="), why) if lc.version.text.startswith(">=") else (
                "%s version unknown: this applies to %s %s (%s)" % (what, what, lc.version.text, why))
            notes.append(note)
            ev.append(Evidence(rule="library %s %s" % (lc.name_text, lc.version.text), text=note))
            continue
        ok = [(w, pv) for w, pv in versions if lc.version.contains(pv)]
        if not ok:
            return None
        ev.append(Evidence(rule="library %s %s" % (lc.name_text, lc.version.text),
                           text="%s (version %s)" % (ok[0][0], ".".join(map(str, ok[0][1])))))
    return factor, ev, notes



def _display_name(glob: str) -> str:
    """"NCCL" from "libnccl.so*"."""
    base = re.sub(r"\.so.*$", "", glob)
    base = base[3:] if base.startswith("lib") else base
    return _DISPLAY.get(base.lower(), base)


_DISPLAY = {"nccl": "NCCL", "rccl": "RCCL", "cudart": "CUDA runtime", "cuda": "CUDA driver", "cudnn": "cuDNN"}


def _version_from_name(basename: str) -> Optional[Tuple[int, ...]]:
    """2.26.5 from ``libnccl.so.2.26.5``; a bare soname major (``libnccl.so.2``) is not a version."""
    v = parse_version(library_version(basename))
    return v if v is not None and len(v) >= 2 else None


