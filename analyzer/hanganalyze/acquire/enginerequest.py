"""How every process of a run is read (``EngineRequest``) and the names of the readers: the one
piece the chooser (``engine.py``) and its backends (``directengine.py``, ``gdbcore.py``,
``gdblive.py``) share, kept apart so that the backends need not import the module that calls them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from hanganalyze.acquire.sysroot import GdbOptions
from hanganalyze.errors import InputError

ENGINES = ("auto", "direct", "gdb")
DIRECT, GDB = "direct", "gdb"


def _quiet(msg: str) -> None:
    """Default progress: nothing."""


@dataclass(frozen=True)
class EngineRequest:
    """How every process of a run is read.  Checked when made (a one-line InputError before any
    slow work), and frozen: the job pool's threads and repeated samples share one.

    ``timeout`` bounds each gdb step, and the direct reader's wait for the threads of a live
    process to stop (at most 30 s of it).  ``gdb_busy`` is called once gdb has its work queued,
    the caller's moment to do other work while gdb runs (the signature database loads then); only
    the gdb backends call it, and a run of several inputs leaves it unset."""

    engine: str = "auto"
    gdb: str = "gdb"
    timeout: float = 120.0
    options: GdbOptions = field(default_factory=GdbOptions)  # --sysroot, --solib-search-path, --debuginfod
    progress: Callable[[str], None] = _quiet
    gdb_busy: Optional[Callable[[], None]] = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InputError("--engine must be one of %s (got %r)" % (", ".join(ENGINES), self.engine))
        if self.engine == DIRECT and (self.options.elsewhere or self.options.debuginfod):
            raise InputError("--sysroot, --solib-search-path and --debuginfod are gdb's settings: "
                             "use them without --engine direct")
