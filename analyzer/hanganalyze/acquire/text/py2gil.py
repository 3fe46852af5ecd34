"""py-bt's "Waiting for the GIL" over a Python 2 lock acquire: the lock is the wait, not the GIL.

Why: Python 2 has no ``take_gil``.  Its GIL is a plain ``PyThread`` lock, taken with the same
``sem_wait`` (or condition-variable wait) as every ``thread.lock.acquire``, so libpython's marker
(a guess from the name of the C frame it stands in) cannot tell a thread blocked in a lock's
acquire from one waiting to re-take the GIL after it.  The Python line can: a thread whose innermost
Python frame stands on a lock's ``.acquire(`` call waits for that lock (a thread that got it and
only waits for the GIL moves on at the next switch interval; a hung one does not).  Python 3's
marker is read from ``take_gil`` itself and is kept.
"""

from __future__ import annotations

import re
from typing import Sequence

from hanganalyze_gdbext.model import Frame

#: A Python 2 library path (``/usr/lib/python2.7/threading.py``).
_PY2 = re.compile(r"/python2\.\d{1,2}/")
#: The call of a lock's acquire on a source line (``rc = self.__block.acquire(blocking)``).
_ACQUIRE = re.compile(r"\.acquire\(")
NOTE = "py-bt's 'Waiting for the GIL' over a Python 2 lock acquire: read as the lock's wait"


def lock_not_gil(frames: Sequence[Frame]) -> bool:
    """The innermost Python frame calls a lock's ``acquire`` and the stack is Python 2's."""
    py = [f for f in frames if f.kind == "python" and not f.marker]
    if py and (py[0].note or "").startswith("built-in") and py[0].function == "acquire" and "lock" in py[0].note:
        return any(_PY2.search(f.file or "") for f in py)  # py-bt's <built-in method acquire of thread.lock>
    if not py or not py[0].source or _ACQUIRE.search(py[0].source) is None:
        return False
    return any(_PY2.search(f.file or "") for f in py)
