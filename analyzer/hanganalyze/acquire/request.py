"""A run's acquisition: what the command line asked for (files, pids, a job, and how to read them),
checked before any slow work, planned into inputs (``many.plan_inputs``), and acquired into one
Snapshot (``many.acquire_all``, each input through ``inputs.acquire``; cores and pids through
``engine.py``, with the one ``engine.EngineRequest`` that ``prepare`` checks).

``cli.py`` turns its options into an AcquireRequest and calls ``prepare``; ``pipeline.report``
acquires it and analyzes the result.  Used as a context manager: a core that ``--coredumpctl``
dumped to a temporary file is removed when the run ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from hanganalyze.acquire import sampling
from hanganalyze.acquire.engine import choose
from hanganalyze.acquire.enginerequest import GDB, EngineRequest
from hanganalyze.acquire.inputs import acquire
from hanganalyze.acquire.many import Input, plan_inputs
from hanganalyze.acquire.sampling import acquire_sampled, check_options
from hanganalyze.acquire.sysroot import GdbOptions
from hanganalyze.deadline import check_timeout
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Snapshot

Progress = Callable[[str], None]


def _quiet(msg: str) -> None:
    """Default progress: nothing."""


@dataclass
class AcquireRequest:
    """The inputs of one run and the options every one of them is read with."""

    targets: List[str] = field(default_factory=list)
    pids: List[int] = field(default_factory=list)
    job: Optional[int] = None
    parallel: Optional[int] = None
    exe: Optional[Path] = None
    gdb: str = "gdb"
    timeout: float = 120.0
    input_format: Optional[str] = None
    engine: str = "auto"
    sysroot: Optional[str] = None
    solib_search_path: List[str] = field(default_factory=list)
    debuginfod: bool = False
    coredumpctl: Optional[str] = None
    #: Samples per live process and seconds between them (``acquire/sampling.py``); None: the
    #: default (3 over about a second; 1 through gdb, whose reads take seconds each).
    samples: Optional[int] = None
    interval: Optional[float] = None
    max_window: Optional[float] = None  # the adaptive window's bound (``--max-window``)
    #: ``--gpu-kernels``: cuda-gdb lists each live rank's GPU kernels after the stacks (``cudakernels.py``).
    gpu_kernels: bool = False
    # Filled by prepare():
    reading: Optional[EngineRequest] = None  # how every core and pid is read
    stored_core: object = None  # coredumpctl.StoredCore
    inputs: List[Input] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def prepare(self, progress: Optional[Progress] = None,
                check_target: Callable[[Optional[str]], None] = lambda target: None) -> None:
        """Check the options and plan the inputs (one-line InputError, before gdb runs for minutes).
        ``check_target`` sees each file named, or None when there is none (the report must not
        overwrite an input)."""
        progress = progress or _quiet
        self.timeout = check_timeout(self.timeout)

        check_options(self.samples, self.interval, self.max_window)
        if self.parallel is not None and not 1 <= self.parallel <= 1024:
            raise InputError("--parallel must be between 1 and 1024 (got %s)" % self.parallel)
        for t in self.targets:
            check_target(t)
        if not self.targets:
            check_target(None)

        options = GdbOptions.from_cli(self.sysroot, self.solib_search_path, self.debuginfod)
        self.reading = EngineRequest(engine=self.engine, gdb=self.gdb, timeout=self.timeout, options=options)
        if self.coredumpctl is not None:
            from hanganalyze.acquire.coredumpctl import find_stored_core  # here: only --coredumpctl (start-up time)

            self.stored_core = stored = find_stored_core(self.coredumpctl, self.timeout, progress)
            self.targets = list(self.targets) + [str(stored.path)]
            check_target(str(stored.path))
        self.inputs, self.notes = plan_inputs(self.targets, self.pids, self.job)
        if self.exe is not None and len(self.inputs) > 1 and any(i.path for i in self.inputs):
            progress("--exe applies to every core given")

    def acquire(self, progress: Optional[Progress] = None,
                gdb_busy: Optional[Callable[[], None]] = None) -> Snapshot:
        """Every input (``prepare`` planned them) in one Snapshot.  ``gdb_busy`` is called once gdb
        has its work queued (the caller's moment to do other work): by the gdb backend when there
        is one input, at once when there are several (the pool has no single gdb to wait on)."""
        progress = progress or _quiet
        reading = replace(self.reading, progress=progress)
        if len(self.inputs) == 1:
            reading = replace(reading, gdb_busy=gdb_busy)
        elif gdb_busy is not None:
            gdb_busy()

        samples, interval = self._sampling(reading)
        ras = None
        if self.pids or self.job is not None:  # NCCL's RAS counts, queried while the stacks are sampled
            from hanganalyze.acquire.raslive import sampler  # here: only a live run (start-up time)

            ras = sampler(self.inputs, samples, interval)
        try:
            snapshot = acquire_sampled(self.inputs, self._acquire_one(reading), replace(reading, gdb_busy=None),
                                       self.parallel, progress, samples, interval,
                                       sampling.DEFAULT_MAX_WINDOW if self.max_window is None else self.max_window)
        except BaseException:
            if ras is not None:
                ras.stop()
            raise
        if ras is not None:
            ras.finish(snapshot)
        if self.gpu_kernels and (self.pids or self.job is not None):
            from hanganalyze.acquire.cudakernels import read_kernels  # here: only --gpu-kernels (start-up time)

            progress("listing the GPU kernels with cuda-gdb")
            cuda_gdb = self.gdb if "cuda-gdb" in Path(self.gdb).name else "cuda-gdb"
            snapshot.warnings.extend(read_kernels(snapshot, cuda_gdb))
        snapshot.warnings.extend(self.notes)
        return snapshot

    def _sampling(self, reading: EngineRequest) -> Tuple[int, float]:
        """(samples, interval) for live inputs: the defaults of ``sampling.py``, or one sample when
        gdb reads them (seconds per read) and ``--samples`` was not given."""
        interval = sampling.DEFAULT_INTERVAL if self.interval is None else self.interval
        if self.samples is not None:
            return self.samples, interval
        if (self.pids or self.job is not None) and choose(reading) == GDB:
            return 1, interval
        return sampling.DEFAULT_SAMPLES, interval

    def _acquire_one(self, reading: EngineRequest) -> Callable[[Input], Snapshot]:
        """How one input (a pid or a path) becomes a Snapshot, with this run's options."""
        def one(inp: Input) -> Snapshot:
            return acquire(inp.path, inp.pid, reading, self.exe, self.input_format)

        if self.stored_core is not None:  # --coredumpctl: the stored core gets coredumpctl's metadata
            return self.stored_core.wrap(one)
        return one

    def cleanup(self) -> None:
        if self.stored_core is not None:
            self.stored_core.cleanup()  # a core coredumpctl dumped to a temporary file

    def __enter__(self) -> AcquireRequest:
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()
