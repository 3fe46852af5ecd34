"""How a report names a process (``rank 3 · python3 · pid 812``): one function, used by the
report's view (``view.py``) and by its job part (``jobview.py``), which ``view.build_view`` calls."""

from __future__ import annotations

from hanganalyze_gdbext.model import Process


def process_title(i: int, p: Process) -> str:
    """The process's label (or rank, or its place among the inputs), executable and pid."""
    exe = (p.executable or "").rsplit("/", 1)[-1]
    label = p.label or ("rank %d" % p.rank if p.rank is not None else "Process %d" % i)
    bits = ["%s" % label]
    if exe:
        bits.append(exe)
    if p.pid is not None:
        bits.append("pid %s" % p.pid)
    return " · ".join(bits)
