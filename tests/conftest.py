from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import Hung, start_hung  # noqa: E402


@pytest.fixture
def hung():
    """Start hung fixtures with hung(argv, ready=...); every one is killed at teardown."""
    started = []

    def _start(argv, **kw) -> Hung:
        h = start_hung(argv, **kw)
        started.append(h)
        return h

    yield _start
    for h in started:
        h.kill()
