"""JSON output: the `hanganalyze/1` contract, exactly as the shared model serialises it.

Compact on purpose: ``indent=`` makes the json module fall back to its pure-Python encoder,
which took longer than unwinding a 200-thread snapshot; pipe through ``jq`` to read.
"""

from __future__ import annotations

import json

from hanganalyze_gdbext.model import Snapshot


def render_json(snapshot: Snapshot) -> str:
    return json.dumps(snapshot.to_dict(), separators=(",", ":")) + "\n"
