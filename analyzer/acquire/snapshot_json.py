"""A ``hanganalyze/1`` JSON document (``hang-dump`` output) as input: no parsing, no gdb.

This is how ``hang-analyze`` inside gdb hands the snapshot it collected to the installed
analyzer (gdb's Python has no PyYAML, and there must be one matcher only), and it lets users
re-analyse a saved dump with newer or extra signatures.
"""

from __future__ import annotations

import json
import re

from hanganalyze.errors import InputError
from hanganalyze.gdbext.model import SCHEMA, Snapshot

FORMAT_NAME = "snapshot-json"

_HEAD = re.compile(r'^\s*\{\s*"schema"\s*:\s*"hanganalyze/')


def looks_like_snapshot(text: str) -> bool:
    """True for hang-dump's output, which always starts with its "schema" key."""
    return bool(_HEAD.match(text[:200]))


def read_snapshot(text: str) -> Snapshot:
    """The Snapshot in a hanganalyze/1 document; a one-line InputError when it is not one."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InputError("not a %s snapshot: invalid JSON (%s)" % (SCHEMA, e)) from None
    if not isinstance(data, dict):
        raise InputError("not a %s snapshot: the JSON is not an object" % SCHEMA)
    try:
        snap = Snapshot.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError("not a usable %s snapshot: %s" % (SCHEMA, e)) from None
    snap.findings = []  # findings are recomputed by this analyzer's signatures
    return snap
