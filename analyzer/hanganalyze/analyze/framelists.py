"""Frame lists as data: ``signatures/lists/*.yaml`` (idle waits, runtime / interpreter / key libraries).

Like Socorro siggen's ``siglists/``, the names that decide which frames are idle waits, which are
interpreter or C-runtime plumbing and which libraries a summary names are kept in small YAML files
next to the signatures, not in code.  Each file is one list::

    kind: names            # exact names (a set)
    entries: [epoll_wait, poll]

    kind: regex            # regexes, joined with "|"
    match: prefix          # prefix: at the name's start (the default); search: anywhere in it;
                           # fullmatch: the whole name (^...$)
    ignore_case: false
    entries: ['libc[.-]', libpthread]

    kind: python_frames    # (file basename, function's last name part) pairs
    entries: [{file: queue.py, function: get}]

Each file is read once per process; a broken file stops the run with one line naming it.
(The wait-kind patterns of ``gdbext/waitkinds.py`` are data too, in ``gdbext/lists/*.txt``: plain text,
because gdb's Python has only the standard library.)
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, FrozenSet, Tuple

from hanganalyze import rxcache
from hanganalyze.analyze.regex_guard import risky_regex
from hanganalyze.analyze.signatures import builtin_dir, display_path, read_data_file
from hanganalyze.errors import SignatureError
from hanganalyze.names import basename, library_base
from hanganalyze_gdbext.model import Frame

LISTS_FOLDER = "lists"
_KINDS = ("names", "regex", "python_frames")
_KEYS = frozenset({"kind", "entries", "match", "ignore_case"})
_MATCH = {"prefix": "^(?:%s)", "search": "(?:%s)", "fullmatch": "^(?:%s)$"}


def lists_dir() -> Path:
    return builtin_dir() / LISTS_FOLDER


@lru_cache(maxsize=None)
def _load(name: str) -> Tuple[str, Dict[str, Any]]:
    """(display name, the file's mapping after its shape is checked), read as signature files are
    (``signatures.read_yaml``: one-line errors, alias bombs and deep nesting refused), from the
    parsed-data cache after the first run (``signatures.read_data_file``)."""
    path = lists_dir() / ("%s.yaml" % name)
    disp = display_path(path)
    data, _extra = read_data_file(path)
    problem = _problem(data)
    if problem:
        raise SignatureError("%s: %s" % (disp, problem))
    return disp, data


def _problem(data: Any) -> str:
    if not isinstance(data, dict):
        return "a list file is a mapping with 'kind' and 'entries'"
    extra = sorted(str(k) for k in data if k not in _KEYS)
    if extra:
        return "unknown key %r (known: %s)" % (extra[0], ", ".join(sorted(_KEYS)))
    kind, entries = data.get("kind"), data.get("entries")
    if kind not in _KINDS:
        return "kind: %r is not one of %s" % (kind, ", ".join(_KINDS))
    if not isinstance(entries, list) or not entries:
        return "entries: must be a non-empty list"
    if kind == "python_frames":
        ok = all(isinstance(e, dict) and set(e) == {"file", "function"} and all(isinstance(v, str) for v in e.values())
                 for e in entries)
        return "" if ok else "entries: each must be {file: NAME, function: NAME}"
    if not all(isinstance(e, str) and e for e in entries):
        return "entries: each must be a non-empty string"
    if kind == "regex" and data.get("match", "prefix") not in tuple(_MATCH):  # a tuple: match may be unhashable
        return "match: %r is not one of %s" % (data.get("match"), ", ".join(_MATCH))
    return ""


def _of_kind(name: str, kind: str) -> Dict[str, Any]:
    disp, data = _load(name)
    if data["kind"] != kind:
        raise SignatureError("%s: kind: %r, expected %r" % (disp, data["kind"], kind))
    return data


@lru_cache(maxsize=None)
def names(name: str) -> FrozenSet[str]:
    """A ``kind: names`` list as a set."""
    return frozenset(_of_kind(name, "names")["entries"])


@lru_cache(maxsize=None)
def python_frames(name: str) -> FrozenSet[Tuple[str, str]]:
    """A ``kind: python_frames`` list as a set of (file basename, function) pairs."""
    return frozenset((e["file"], e["function"]) for e in _of_kind(name, "python_frames")["entries"])


def in_python_frames(f: Frame, name: str) -> bool:
    """Whether a Python frame is in a ``kind: python_frames`` list: by file basename and the last
    component of its function (3.11+ report ``Thread.join``, older versions ``join``)."""
    return f.kind == "python" and (basename(f.file), (f.function or "").rsplit(".", 1)[-1]) in python_frames(name)


@lru_cache(maxsize=None)
def pattern(name: str) -> re.Pattern:
    """A ``kind: regex`` list as one compiled regex (use ``.search``; ``match: prefix`` / ``fullmatch`` anchor it)."""
    data = _of_kind(name, "regex")
    disp = _load(name)[0]
    for e in data["entries"]:  # frame names come from cores: refuse exponential shapes as signatures do
        why = risky_regex(e)
        if why:
            raise SignatureError("%s: unsafe regex %r: %s" % (disp, e[:80], why))
    body = "|".join(data["entries"])
    text = _MATCH[data.get("match", "prefix")] % body
    try:
        return rxcache.compile(text, re.IGNORECASE if data.get("ignore_case") else 0)
    except re.error as e:
        raise SignatureError("%s: bad regex %r: %s" % (disp, body[:80], e)) from None


# --------------------------------------------------------------------------------------------
# Frame classes built on the lists
# --------------------------------------------------------------------------------------------


def is_interpreter_frame(f: Frame) -> bool:
    """A native frame of CPython itself (libpython / the python executable, or a ``_Py*``/``Py*`` name)."""
    lib = library_base(f.library)
    if lib and pattern("interpreter_libraries").search(lib):
        return True
    return bool(f.function and pattern("interpreter_functions").search(f.function))


def is_runtime_frame(f: Frame) -> bool:
    """A frame of the C/C++ runtime (libc, libpthread, ld.so, libstdc++, libgcc_s, libm...)."""
    lib = library_base(f.library)
    return bool(lib and pattern("runtime_libraries").search(lib))
