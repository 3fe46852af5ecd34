"""The one place that decides "this took too long": a checked ``--timeout``, and a Deadline.

Every wait of the tool (a gdb step, a pipe nobody writes to, a FIFO nobody reads, a thread that
does not stop under ptrace) counts on the monotonic clock against a Deadline and asks it how much
time is ``left()``; ``check_timeout`` refuses a limit that could never expire (NaN compares false
with everything, so a NaN deadline would be an endless wait).
"""

from __future__ import annotations

import math
import time

from hanganalyze.errors import InputError


def check_timeout(timeout, option: str = "--timeout") -> float:
    """``timeout`` as seconds; one-line InputError unless it is a positive, finite number."""
    try:
        seconds = float(timeout)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError("%s must be a positive number of seconds (got %s)" % (option, timeout))
    return seconds


class Deadline:
    """``seconds`` from now (or from the last ``restart()``), on the monotonic clock."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = 0.0
        self.restart()

    def restart(self) -> None:
        """Count the full ``seconds`` again from now (a pipe that delivered data gets a new wait)."""
        self.end = time.monotonic() + self.seconds

    def left(self) -> float:
        """Seconds until the deadline; zero or less once it has passed."""
        return self.end - time.monotonic()

    def passed(self) -> bool:
        return self.left() <= 0
