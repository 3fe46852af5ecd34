"""Many inputs, one Snapshot: several cores, pids, texts, snapshot JSONs, flight-recorder dumps, a
folder of them, or the workers of a launcher (``--job``).

A job's hang is read from every rank at once, so acquisition runs in a bounded pool: each input
is acquired on its own (gdb per core or pid, with its own per-step timeouts), and an input that
fails becomes a process with ``error`` set instead of ending the run: one rank whose gdb timed
out must not hide the other 4,095.  Live targets are detached by the driver whatever happens.

The pool's default size is what the machine allows: one gdb per CPU, and no more than the free
memory holds at about 1.3 GB per gdb (what gdb peaks at on a real PyTorch process today).

Processes keep the order of the inputs; rank identity (``ranks.py``) and collective facts from
watchdog log lines are filled in here, where the input's name and kind are still known.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from hanganalyze.acquire.gpustate import merge as merge_gpu
from hanganalyze.acquire.ranks import identity_from_environ, rank_from_label, rank_from_name, read_proc_environ, said
from hanganalyze.corefile import compressed_kind
from hanganalyze.elf import is_elf
from hanganalyze.errors import HangAnalyzeError, InputError
from hanganalyze.loglines import CHILDREN_NOTE
from hanganalyze_gdbext.model import DistIdentity, Process, Snapshot
from hanganalyze_gdbext.model.stacktable import StackTable, set_table

Progress = Optional[Callable[[str], None]]

#: Peak memory of one gdb on a real PyTorch process (issue 11's measurement), for the pool size.
GDB_PEAK_BYTES = 1300 * 1024 * 1024
#: Files taken from one folder: a folder of 4,096 rank snapshots is normal, a whole disk is not.
MAX_FOLDER_FILES = 65536


@dataclass(frozen=True)
class Input:
    """One thing to acquire: a pid (live) or a path ("-" is stdin)."""

    pid: Optional[int] = None
    path: Optional[str] = None
    #: ``--job``: the launcher whose workers these are.  Its descendants are every process of the job
    #: on this host, so a local rank that is not among them is gone (``job.py``'s rank-missing).
    launcher_pid: Optional[int] = None
    #: ``--job``: the pid of the rank this input is a child of (a DataLoader worker ...): it is
    #: captured as part of that rank (``acquire/children.py``), never as a rank of its own.
    parent_pid: Optional[int] = None

    def describe(self) -> str:
        return "pid %d" % self.pid if self.pid is not None else ("stdin" if self.path == "-" else str(self.path))

    @property
    def uses_gdb(self) -> bool:
        """Pids always; paths are guessed (a core is large and binary, a text is not): for the pool size only."""
        return self.pid is not None or (self.path not in (None, "-") and _looks_elf(self.path))


def _looks_elf(path: Optional[str]) -> bool:
    """An ELF core, or a compressed file (a compressed core is decompressed and then goes to gdb)."""
    try:
        with open(str(path), "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return is_elf(head) or compressed_kind(head) is not None


_NUM = re.compile(r"(\d+)")


def _natural(name: str) -> List[Union[int, str]]:
    """``rank2`` before ``rank10``."""
    return [int(part) if part.isdigit() else part for part in _NUM.split(name)]


def folder_inputs(folder: Path) -> List[Input]:
    """The regular, non-hidden files of a folder, in natural order (``rank2`` before ``rank10``)."""
    try:
        names = sorted((e.name for e in os.scandir(str(folder)) if not e.name.startswith(".") and e.is_file()),
                       key=_natural)
    except OSError as e:
        raise InputError("cannot read folder %s: %s" % (folder, e.strerror or e)) from None
    if not names:
        raise InputError("%s is a folder with no file to analyze" % folder)
    if len(names) > MAX_FOLDER_FILES:
        raise InputError("%s holds %d files: give at most %d" % (folder, len(names), MAX_FOLDER_FILES))
    return [Input(path=str(folder / n)) for n in names]


def plan_inputs(targets: Sequence[str], pids: Sequence[int], job: Optional[int]) -> Tuple[List[Input], List[str]]:
    """Every input named on the command line, folders and ``--job`` expanded, duplicates dropped."""
    notes: List[str] = []
    out: List[Input] = []
    for t in targets:
        if t != "-" and not os.path.lexists(t):
            raise InputError("%s: no such file" % t)  # a typo, not a rank that failed: say so before any work
        if t != "-" and Path(t).is_dir():
            out.extend(folder_inputs(Path(t)))
        else:
            out.append(Input(path=t))
    out.extend(Input(pid=p) for p in pids)
    if job is not None:
        from hanganalyze.acquire.jobtree import job_processes  # here: only --job (start-up time of a live run)

        found = job_processes(job)
        notes.extend(found.notes)
        out.extend(Input(pid=p, launcher_pid=job) for p in found.pids)
        out.extend(Input(pid=c, launcher_pid=job, parent_pid=r) for c, r in sorted(found.children.items()))
    if sum(1 for i in out if i.path == "-") > 1:
        raise InputError("stdin ('-') can be read only once")
    seen = set()
    unique = []
    for i in out:
        key = ("pid", i.pid) if i.pid is not None else ("path", os.path.realpath(i.path) if i.path != "-" else "-")
        if key not in seen:
            seen.add(key)
            unique.append(i)
    if not unique:
        raise InputError("nothing to analyze: give a core file, a text file ('-' for stdin), --pid PID or --job PID")
    return unique, notes


def _mem_available() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_parallel(inputs: Sequence[Input]) -> int:
    """What the machine allows: a gdb per CPU, within free memory; texts are cheap (CPU only)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = max(1, min(len(inputs), cpus))
    if any(i.uses_gdb for i in inputs):
        mem = _mem_available()
        if mem is not None:
            n = max(1, min(n, mem // GDB_PEAK_BYTES))
    return n


def identify(proc: Process, path: Optional[str], only_process: bool) -> None:
    """Fill ``proc.rank`` (and ``dist.from_``) from what the input gave, strongest first.

    The environment (live, core) was read by the acquirer and is kept; then the text's
    ``[rankN]`` label; then the file's name, when the file holds one process (a folder of
    per-rank files); then the rank a watchdog log line names (``[Rank 3]``).  Collective facts of
    watchdog lines are read here too, since they are one of the rank's sources.
    """
    if proc.rank is None:
        r = rank_from_label(proc.label)
        if r is not None:
            proc.rank, proc.dist = r, said(proc.dist, "torchrun [rank%d] prefix" % r)
    if proc.rank is None and only_process and path not in (None, "-"):
        r = rank_from_name(str(path))
        if r is not None:
            proc.rank, proc.dist = r, said(proc.dist, "file name")
    if proc.collectives is None and proc.messages:
        from hanganalyze.acquire.text import watchdog  # here: a live run never imports the text parsers

        proc.collectives = watchdog.collectives_from_messages(proc.messages)
        if proc.collectives is not None and proc.rank is None and proc.collectives.rank is not None:
            proc.rank = proc.collectives.rank
            proc.dist = said(proc.dist, "watchdog log line")
    if proc.rank is not None and not proc.label:
        proc.label = "rank %d" % proc.rank


def note_children(proc: Process, pid: int) -> None:
    """``--pid`` of a parent (a multiprocessing pool, a launcher): its child processes named in a
    note with the option that reads them too, as the report covers this process only (issue 30)."""
    from hanganalyze.acquire.jobtree import children  # here: only a live read (start-up time of a core's)

    kids = children(pid)
    if kids:
        shown = ", ".join("%d (%s)" % k for k in kids[:8]) + (", ..." if len(kids) > 8 else "")
        proc.notes.append("%s%s (%d); hanganalyze --job %d reads this process and its children together"
                          % (CHILDREN_NOTE, shown, len(kids), pid))


def fill_identity(proc: Process, inp: Input, only_process: bool) -> None:
    """Rank identity of one acquired process: decided in ``identify``, the one place.  The
    input's file is kept on the process (``input_file``: not serialised) for node summaries
    (``render/node.py``)."""
    identify(proc, inp.path, only_process)
    if inp.launcher_pid is not None and proc.dist is not None:
        proc.dist.launcher_pid = inp.launcher_pid
    if inp.pid is not None and inp.launcher_pid is None and proc.source == "live":
        note_children(proc, inp.pid)
    if inp.launcher_pid is not None and proc.rank is None and not proc.label:
        # a process tree with no rank facts (multiprocessing, concurrent.futures): the report speaks
        # of the parent and its workers (render/jobview.py's job_words), not of ranks
        proc.label = "parent" if proc.pid == inp.launcher_pid else "worker"
    if inp.path and inp.path != "-":
        proc.input_file = os.path.abspath(inp.path)


def _failed(inp: Input, err: BaseException) -> Process:
    """The place of an input that could not be read: its error in one line, its rank if known."""
    msg = " ".join(str(err).split()) or type(err).__name__
    proc = Process(source="live" if inp.pid is not None else "file", pid=inp.pid, error=msg)
    if inp.pid is not None:
        proc.rank, proc.dist = identity_from_environ(read_proc_environ(inp.pid), "environ")
    elif inp.path not in (None, "-"):
        proc.executable = None
        proc.label = os.path.basename(str(inp.path))
        r = rank_from_name(str(inp.path))
        if r is not None:
            proc.rank, proc.dist = r, DistIdentity(from_="file name")
    if proc.rank is not None:
        proc.label = "rank %d" % proc.rank
    return proc


class _NvmlRead:
    """This host's GPU state read through NVML on a thread of its own while the ranks' stacks are
    sampled: importing the binding, nvmlInit and every GPU's fields take ~0.1-0.14 s (2x H200),
    which the samples' own sleeps hide (the GPU columns' goal: <= 0.1 s on ``--job``)."""

    def __init__(self) -> None:
        self._got: Tuple[Any, Optional[str]] = (None, "GPU state: not read (NVML: the read did not finish)")
        self._thread = threading.Thread(target=self._read, name="nvml", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        from hanganalyze.acquire import nvml  # here: only a live --job reads the GPUs (attribute looked up late)

        try:
            self._got = nvml.read_nvml()
        except Exception as e:  # noqa: BLE001 - NVML is optional: a note, never an error
            self._got = (None, "GPU state: not read (NVML: %s)" % (" ".join(str(e).split()) or type(e).__name__))

    def result(self, timeout: float = 30.0) -> Tuple[Any, Optional[str]]:
        """(GPU state or None, the one-line note or None); a read still under way after ``timeout``
        is given up (a hung driver call must not hold the report)."""
        self._thread.join(timeout)
        return self._got


def acquire_all(
    inputs: Sequence[Input],
    acquire_one: Callable[[Input], Snapshot],
    parallel: Optional[int] = None,
    progress: Progress = None,
) -> Snapshot:
    """One Snapshot holding every input's processes, in input order.

    With one input its error ends the run (exactly as before the job view); with several, a
    failed input becomes a process with ``error`` set, and only when every input failed does the
    run end, with the first error.
    """
    if len(inputs) == 1:
        snap = acquire_one(inputs[0])
        for p in snap.processes:
            fill_identity(p, inputs[0], len(snap.processes) == 1)
        return snap
    n = parallel or default_parallel(inputs)
    if progress:
        progress("acquiring %d inputs, %d at a time" % (len(inputs), n))

    # inputs' equal stacks share one list of frames as they come in (model/stacktable.py): a
    # 4,096-rank job holds a few hundred distinct stacks, not 2.4 million frames
    table = StackTable()
    table_lock = threading.Lock()

    def work(inp: Input) -> Union[Snapshot, BaseException]:
        try:
            snap = acquire_one(inp)
            with table_lock:
                for p in snap.processes:
                    for t in p.threads:
                        table.intern(t)
            return snap
        except HangAnalyzeError as e:
            return e
        except Exception as e:  # noqa: BLE001 - one broken input must not end a job's analysis
            return e

    from concurrent.futures import ThreadPoolExecutor  # here: one input needs no pool (start-up time, issue 21)

    nvml = _NvmlRead() if any(i.launcher_pid is not None for i in inputs) else None
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="acquire")
    try:
        results = list(pool.map(work, inputs))
    except BaseException:
        # Ctrl-C: start no further input; the ones under way finish their step and detach (the
        # driver's finally), so no live rank is left stopped or traced.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    out = Snapshot()
    errors: List[BaseException] = []
    parents: List[Optional[int]] = []  # per process of ``out``: the rank it is a child of
    for inp, res in zip(inputs, results):
        if isinstance(res, BaseException) and inp.parent_pid is not None:
            # a child that could not be read: its rank is still the answer, the loss is said
            out.warnings.append("%s (a child of pid %d): not read: %s" % (inp.describe(), inp.parent_pid,
                                                                           " ".join(str(res).split())))
            continue
        if isinstance(res, BaseException):
            errors.append(res)
            parents.append(None)
            out.processes.append(_failed(inp, res))
            out.warnings.append("%s: not analyzed: %s" % (inp.describe(), " ".join(str(res).split())))
            continue
        for p in res.processes:
            fill_identity(p, inp, len(res.processes) == 1)
        out.processes.extend(res.processes)
        parents.extend([inp.parent_pid] * len(res.processes))
        out.warnings.extend("%s: %s" % (inp.describe(), w) for w in res.warnings)
    if any(r.gpu is not None for r in results if isinstance(r, Snapshot)):  # GPU-state inputs: one record
        out.gpu = merge_gpu(r.gpu for r in results if isinstance(r, Snapshot))
    elif nvml is not None:  # a live --job and no saved GPU state: NVML, read beside the stacks
        out.gpu, note = nvml.result()
        if note:  # no binding, no driver, no GPU: one line, never an error
            out.warnings.append(note)
    if any(p is not None for p in parents):
        from hanganalyze.acquire.children import attach_children  # here: only --job with children

        out.processes = attach_children(out.processes, parents)
    set_table(out, table)
    _join_ras(out, results)
    if errors and len(errors) == sum(1 for i in inputs if i.parent_pid is None):
        first = errors[0]
        if isinstance(first, HangAnalyzeError):
            raise type(first)("every input failed; the first: %s" % first)
        raise InputError("every input failed; the first: %s" % first)
    return out


def _join_ras(out: Snapshot, results: Sequence[object]) -> None:
    """Saved NCCL RAS queries of several inputs (one file per query): one series of the job."""
    parts = [r.nccl_ras for r in results if isinstance(r, Snapshot) and r.nccl_ras is not None]
    if parts:
        from hanganalyze.acquire.ncclras import merge_series  # here: only RAS inputs (start-up time)

        out.nccl_ras = merge_series(parts)
