"""JSON output: the `hanganalyze/1` contract, exactly as the shared model serialises it."""

from __future__ import annotations

import json

from hanganalyze.gdbext.model import Snapshot


def render_json(snapshot: Snapshot) -> str:
    return json.dumps(snapshot.to_dict(), indent=2, sort_keys=False) + "\n"
