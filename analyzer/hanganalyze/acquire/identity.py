"""Who a process is in its job, decided in one place from what its input gave: the environment
(read by the acquirer), a text's ``[rankN]`` label, the file's name, a watchdog log line.

Apart from ``ranks.py``, which reads each of those facts and is imported by the readers
(``procfacts``, the text parsers, flight-recorder dumps): deciding needs the watchdog reader of the
text package, which itself reads ranks with ``ranks.py``.
"""

from __future__ import annotations

from typing import Optional

from hanganalyze.acquire.ranks import rank_from_label, rank_from_name
from hanganalyze_gdbext.model import Process


def identify(proc: Process, path: Optional[str], only_process: bool) -> None:
    """Fill ``proc.rank`` (and ``dist["from"]``) from what the input gave, strongest first.

    The environment (live, core) was read by the acquirer and is kept; then the text's
    ``[rankN]`` label; then the file's name, when the file holds one process (a folder of
    per-rank files); then the rank a watchdog log line names (``[Rank 3]``).  Collective facts of
    watchdog lines are read here too, since they are one of the rank's sources.
    """
    if proc.rank is None:
        r = rank_from_label(proc.label)
        if r is not None:
            proc.rank, proc.dist = r, dict(proc.dist or {}, **{"from": "torchrun [rank%d] prefix" % r})
    if proc.rank is None and only_process and path not in (None, "-"):
        r = rank_from_name(str(path))
        if r is not None:
            proc.rank, proc.dist = r, dict(proc.dist or {}, **{"from": "file name"})
    if proc.collectives is None and proc.messages:
        from hanganalyze.acquire.text import watchdog  # here: a live run never imports the text parsers

        proc.collectives = watchdog.collectives_from_messages(proc.messages)
        if proc.collectives is not None and proc.rank is None and proc.collectives.rank is not None:
            proc.rank = proc.collectives.rank
            proc.dist = dict(proc.dist or {}, **{"from": "watchdog log line"})
    if proc.rank is not None and not proc.label:
        proc.label = "rank %d" % proc.rank
