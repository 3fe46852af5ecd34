"""Plain log text with no stack dump (``--input-format log``): every line becomes a message.

Never auto-detected: any text is a "log", so detection would turn garbage into an empty analysis
instead of the clear "not a known format" error.  Asked for explicitly, it lets message-level
signatures (NCCL watchdog timeouts, TensorFlow errors, fork warnings) run on a job's log.
"""

from __future__ import annotations

from typing import List

from hanganalyze_gdbext.model import Process

from .common import cap_messages

NAME = "log"


def score(lines: List[str]) -> float:
    return 0.0


def parse(lines: List[str], proc: Process) -> None:
    proc.messages.extend(cap_messages([line.strip() for line in lines if line.strip()], proc.notes))
