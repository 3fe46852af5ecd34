"""pyspy output (parser still to come)."""

from __future__ import annotations

from typing import List

from hanganalyze.gdbext.model import Process

NAME = "pyspy"


def score(lines: List[str]) -> float:
    return 0.0


def parse(lines: List[str], proc: Process) -> None:
    return None
