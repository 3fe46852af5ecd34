"""JSON output: the `hanganalyze/1` contract, exactly as the shared model serialises it.

Compact on purpose: ``indent=`` makes the json module fall back to its pure-Python encoder,
which took longer than unwinding a 200-thread snapshot; pipe through ``jq`` to read.  A job of
many processes references a shared stack table instead of repeating frames (``analyze/intern.py``:
``snapshot_doc``; ``expand_stacks`` gives the old shape back).
"""

from __future__ import annotations

import json

from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.stacktable import snapshot_doc


def render_json(snapshot: Snapshot) -> str:
    return json.dumps(snapshot_doc(snapshot), separators=(",", ":")) + "\n"
