"""A ``hanganalyze/1`` JSON document (``hang-dump`` output) as input: no parsing, no gdb.

This is how ``hang-analyze`` inside gdb hands the snapshot it collected to the installed
analyzer (gdb's Python has no PyYAML, and there must be one matcher only), and it lets users
re-analyze a saved dump with newer or extra signatures.

Such a file is input like any other (edited by hand, truncated, or crafted), so it is checked
before the pipeline sees it: every field must have the model's type (a number where a name is
expected would otherwise surface as a traceback deep in matching or rendering), there must be a
thread to analyze, and log messages are capped as for pasted text (a megabyte-long line makes
signature regexes slow).  What the pipeline recomputes (findings, wait-for graphs, bucket, tool)
is dropped, so a crafted value there cannot matter.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import typing
from typing import Any, Dict

from hanganalyze.acquire.text.common import MAX_LINE, cap_messages
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import SCHEMA, Snapshot
from hanganalyze_gdbext.model.stacktable import attach_stacks

FORMAT_NAME = "snapshot-json"

_HEAD = re.compile(r'^\s*\{\s*"schema"\s*:\s*"hanganalyze/')


class _Invalid(Exception):
    """A field of the wrong type: message is ``path: problem``."""


def looks_like_snapshot(text: str) -> bool:
    """True for hang-dump's output, which always starts with its "schema" key."""
    return bool(_HEAD.match(text[:200]))


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check_value(value: Any, hint: Any, path: str) -> None:
    """Raise _Invalid unless `value` fits the type hint (the model's annotations)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return
    if origin is typing.Union:
        if value is None and type(None) in args:
            return
        inner = [a for a in args if a is not type(None)]
        _check_value(value, inner[0] if len(inner) == 1 else Any, path)
        return
    if origin is list:
        if not isinstance(value, list):
            raise _Invalid("%s: expected a list, got %s" % (path, _type_name(value)))
        for i, item in enumerate(value):
            _check_value(item, args[0] if args else Any, "%s[%d]" % (path, i))
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise _Invalid("%s: expected an object, got %s" % (path, _type_name(value)))
        if len(args) == 2 and args[1] is not Any:  # typed values (Collectives.groups)
            for key, item in value.items():
                _check_value(item, args[1], "%s[%s]" % (path, json.dumps(key)[:80]))
        return
    if dataclasses.is_dataclass(hint):
        _check_object(value, hint, path)
        return
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    else:
        ok = isinstance(value, hint)
    if not ok:
        raise _Invalid("%s: expected %s, got %s" % (path, getattr(hint, "__name__", hint), _type_name(value)))


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    """The type hints of ``cls``'s written fields (its TRANSIENT ones are never read from a file)."""
    if cls not in _HINTS:
        names = {f.name for f in dataclasses.fields(cls)} - set(getattr(cls, "TRANSIENT", ()))
        _HINTS[cls] = {k: v for k, v in typing.get_type_hints(cls).items() if k in names}
    return _HINTS[cls]


def _check_object(obj: Any, cls: type, path: str) -> None:
    for name, hint in _hints(cls).items():
        key = name[:-1] if name.endswith("_") else name  # ``from_`` is the key "from"
        _check_value(getattr(obj, name), hint, "%s.%s" % (path, key) if path else key)


def _cap_strings(snap: Snapshot) -> None:
    """Messages as pasted text gets them: lines cut at MAX_LINE, at most MAX_MESSAGES kept."""
    for p in snap.processes:
        p.messages = cap_messages([m[:MAX_LINE] for m in p.messages], p.notes)


def read_snapshot(text: str) -> Snapshot:
    """The Snapshot in a hanganalyze/1 document; a one-line InputError when it is not one."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InputError("not a %s snapshot: invalid JSON (%s)" % (SCHEMA, e)) from None
    except RecursionError:
        raise InputError("not a usable %s snapshot: JSON nested too deeply" % SCHEMA) from None
    if not isinstance(data, dict):
        raise InputError("not a %s snapshot: the JSON is not an object" % SCHEMA)
    raw = data
    # Recomputed by the pipeline: a stale or crafted value must not reach it (nor fail parsing).
    data = {k: v for k, v in data.items() if k not in ("findings", "bucket", "tool", "stacks")}
    stacks = raw.get("stacks")  # a large job's shared stack table (analyze/intern.py)
    procs = data.get("processes")
    if isinstance(procs, list):
        data["processes"] = [
            {k: v for k, v in p.items() if k != "waitgraph"} if isinstance(p, dict) else p for p in procs
        ]
    try:
        snap = Snapshot.from_dict(data)
        if stacks is not None:
            attach_stacks(snap, data, stacks)
        _check_object(snap, Snapshot, "")
    except _Invalid as e:
        raise InputError("not a usable %s snapshot: %s" % (SCHEMA, e)) from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError("not a usable %s snapshot: %s" % (SCHEMA, e)) from None
    if not any(p.threads for p in snap.processes) and not (snap.nccl_ras and snap.nccl_ras.queries):
        raise InputError("the %s snapshot has no thread to analyze" % SCHEMA)  # (NCCL RAS queries alone are)
    snap.findings = []  # findings are recomputed by this analyzer's signatures
    _cap_strings(snap)
    return snap
