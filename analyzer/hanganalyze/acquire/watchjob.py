"""``hanganalyze watch``'s process plumbing: the launcher run as a child, its output passed
through and scanned, the counters of its ranks, the flight-recorder folder, and the end of the job.

Nothing here stops a process: the ranks are read through ``/proc`` only (``procfs``); the stack
samples that confirm a hang are the ordinary capture (``pipeline.report``), run by ``watch.py``.

Output pass-through: the launcher's stdout and stderr are pipes; one thread per pipe reads a line
and writes it at once to our own stdout or stderr (so the order within each stream is the
launcher's, and a line is never split), scans it for the job's own alarms, and keeps the last
``TAIL_LINES`` lines for the report.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Deque, Dict, List, Optional, Sequence, Tuple

from hanganalyze.acquire.jobtree import descendants, job_processes
from hanganalyze.acquire.procfs import read_proc, thread_stats
from hanganalyze.errors import HangAnalyzeError

#: Lines of the job's output kept for the report.
TAIL_LINES = 200
#: The job's own word that it is stuck (from ``loglines.KNOWN_PATTERNS``, only the lines a hang
#: writes: not NCCL's INFO lines, which a healthy job prints too).
ALARMS = re.compile("|".join((
    r"Watchdog caught collective operation timeout",
    r"ProcessGroupNCCL'?s? watchdog (got stuck|timed out|thread)",
    r"\[PG [^\]]{0,120}Rank \d+\].{0,400}(Timeout|timeout|heartbeat)",
    r"Timeout at NCCL work",
    r"subset of ranks are waiting for remainder of ranks",
    r"This thread has been waiting for \d+",
    r"[Rr]endezvous\b.*\bmay be stuck",
)))
#: The flight recorder's settings (PyTorch's documented names, the older ones after them): dump
#: on a timeout, keep this many entries, write the dumps with this path prefix (one file a rank).
FR_DUMP_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
FR_BUFFER = "2000"


def flight_recorder_env(env: Dict[str, str], folder: Path) -> Tuple[Dict[str, str], str]:
    """``env`` with the flight recorder switched on and dumping into ``folder``, unless the user
    set it already (then their prefix is kept); and the dump path prefix to watch."""
    out = dict(env)
    prefix = next((env[v] for v in FR_DUMP_VARS if env.get(v)), None)
    if prefix is None:
        prefix = str(folder / "nccl_trace_rank_")
        out["TORCH_FR_DUMP_TEMP_FILE"] = out["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = prefix
    if not env.get("TORCH_FR_BUFFER_SIZE") and not env.get("TORCH_NCCL_TRACE_BUFFER_SIZE"):
        out["TORCH_FR_BUFFER_SIZE"] = out["TORCH_NCCL_TRACE_BUFFER_SIZE"] = FR_BUFFER
    out.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    return out, prefix


def flight_recorder_dumps(prefix: Optional[str]) -> List[str]:
    """The dump files written so far with path prefix ``prefix`` (one per rank), complete ones only
    (PyTorch writes a temporary file and renames it)."""
    if not prefix:
        return []
    folder, base = os.path.split(prefix)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names
                  if n.startswith(base) and not n.endswith((".tmp", ".lock")) and not n.startswith("."))


class OutputPump:
    """Passes one pipe through to ``sink`` line by line, keeping the tail and the first alarm."""

    def __init__(self, source: IO[bytes], sink: IO[bytes], tail: Deque[str], lock: threading.Lock) -> None:
        self.source, self.sink, self.tail, self.lock = source, sink, tail, lock
        self.alarm: Optional[str] = None
        self.thread = threading.Thread(target=self._run, name="watch-output", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for line in iter(self.source.readline, b""):
            try:
                self.sink.write(line)
                self.sink.flush()
            except (OSError, ValueError):  # our own output is gone: keep reading, the job must not block
                pass
            text = line.decode("utf-8", "replace").rstrip("\n")
            with self.lock:
                self.tail.append(text)
                if self.alarm is None and ALARMS.search(text):
                    self.alarm = text.strip()
        self.source.close()


class Launched:
    """The launcher run as our child in its own process group (``--then kill`` ends the group,
    never us), its output passed through, SIGINT and SIGTERM forwarded to it."""

    def __init__(self, argv: Sequence[str], env: Dict[str, str]) -> None:
        try:
            self.proc = subprocess.Popen(list(argv), stdin=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env, start_new_session=True)
        except OSError as e:
            raise HangAnalyzeError("cannot start %s: %s" % (argv[0], e.strerror or e)) from None
        self.pid = self.proc.pid
        self._old: Dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():  # before any output: a caller that
            for sig in (signal.SIGINT, signal.SIGTERM):  # saw the job's first line may signal us
                self._old[sig] = signal.signal(sig, self._forward)
        self.tail: Deque[str] = deque(maxlen=TAIL_LINES)
        lock = threading.Lock()
        self.pumps = [OutputPump(self.proc.stdout, _binary(sys.stdout), self.tail, lock),
                      OutputPump(self.proc.stderr, _binary(sys.stderr), self.tail, lock)]

    def _forward(self, signum: int, _frame: object) -> None:
        try:
            os.kill(self.pid, signum)
        except OSError:
            pass

    def alarm(self) -> Optional[str]:
        return next((p.alarm for p in self.pumps if p.alarm), None)

    def poll(self) -> Optional[int]:
        return self.proc.poll()

    def finish(self) -> int:
        """Wait for the launcher and the end of its output; the signal handlers put back."""
        rc = self.proc.wait()
        for p in self.pumps:
            p.thread.join(timeout=5)
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]
        return rc if rc >= 0 else 128 - rc  # killed by a signal: the shell's 128+N


def _binary(stream: IO[str]) -> IO[bytes]:
    stream.flush()
    return getattr(stream, "buffer", stream)  # type: ignore[return-value]


def alive(pid: int) -> bool:
    """Running, not a zombie."""
    raw = read_proc(pid, "stat", 512)
    if not raw:
        return False
    close = raw.rfind(b")")
    return close >= 0 and raw[close + 2:close + 3] not in (b"Z", b"X")


def workers(launcher: int) -> Tuple[List[int], List[int]]:
    """(the ranks' pids, their children's pids) as ``--job`` finds them; empty while the launcher
    has started no Python worker yet."""
    try:
        job = job_processes(launcher)
    except HangAnalyzeError:
        return [], []
    return list(job.pids), sorted(job.children)  # a lone ``python train.py`` is its own worker


def rank_counters(pid: int) -> Optional[Tuple[float, Optional[int]]]:
    """(CPU seconds of all threads, voluntary switches of the main thread) of a live rank; None when gone."""
    stats = thread_stats(pid)
    if not stats:
        return None
    main = stats.get(pid)
    return sum(s.cpu_s for s in stats.values()), main.switches if main is not None else None


def end_job(launcher: int, grace: float = 10.0) -> None:
    """SIGTERM to the launcher's process group and every process below it (torchrun starts each
    rank in a session of its own), then SIGKILL to whatever is left after ``grace`` seconds."""
    below = descendants(launcher)
    try:
        group = os.getpgid(launcher) == launcher and launcher != os.getpgrp()  # never our own group
    except OSError:
        group = False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        targets = [] if group else [launcher]
        if group:
            try:
                os.killpg(launcher, sig)
            except OSError:
                pass
        for pid in targets + below:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(alive(p) for p in [launcher] + below):
            time.sleep(0.1)
        if not any(alive(p) for p in [launcher] + below):
            return
