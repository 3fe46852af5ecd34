"""``hanganalyze watch``: watch a job until it hangs, and capture every rank while it still hangs.

By the time a person attaches to a hung job, the NCCL watchdog has usually killed it (PyTorch's
default collective timeout is 10 minutes) and the scheduler has restarted it.  The watcher sits
beside the job from the start, for the cost of reading ``/proc`` once a ``--poll``:

1. ``acquire/watchjob.py`` runs the launcher (or finds a running one, ``--job``), passes its output
   through, and reads each rank's counters; ``analyze/stall.py`` decides from them.
2. A trigger: the job's own alarm line (a watchdog / collective-timeout message), a flight-recorder
   dump appearing, or ``--stall`` seconds in which no rank's main thread woke (a candidate).
3. The capture: every rank through the ``--job`` pipeline (several samples, children included),
   the flight-recorder dumps beside them.  A candidate the samples show moving is no hang: the
   watcher keeps watching (``StallDetector.backoff``).  A hang is written (``-o`` and its JSON
   beside it, the log tail in ``REPORT.tail.log``) before ``--then kill`` ends the job.

With ``--then keep`` (the default) the job is left alone after the capture; in wrapper mode the
watcher passes its output through until it ends (its watchdog or scheduler decides), then exits 3.

Exit codes: 3 a hang was captured; the job's own exit code when it ended (wrapper mode; 0 with
``--job``); 2 usage; 4 the capture failed.  The capture runs in a thread with a deadline, so the
watcher cannot hang on a rank it cannot read.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from hanganalyze import pipeline
from hanganalyze.acquire import watchjob
from hanganalyze.analyze.scrub import scrub_lines
from hanganalyze.analyze.stall import RankCounters, StallDetector
from hanganalyze.analyze.threadchoice import helper_order
from hanganalyze.errors import EXIT_HANG, EXIT_INPUT, EXIT_OK, EXIT_TOOL, HangAnalyzeError, InputError
from hanganalyze.output import check_output, write_output

#: Seconds one capture (all ranks, all samples, the analysis) may take before the watcher gives up
#: on it: a rank that cannot be read must not hang the watcher.
CAPTURE_LIMIT = 120.0
THEN = ("keep", "kill")
#: Seconds between two searches for the job's workers (a scan of every process's /proc/PID/stat,
#: ~1.6 ms with 90 processes, more on a busy node); a rank that ends starts one at once.
RESCAN = 10.0


@dataclass
class WatchOptions:
    command: List[str]
    job: Optional[int] = None
    stall: float = 120.0
    poll: float = 1.0
    then: str = "keep"
    output: Optional[Path] = None
    fmt: str = "html"
    node_summary: Optional[Path] = None
    samples: Optional[int] = None
    interval: Optional[float] = None
    signature_dirs: List[Path] = field(default_factory=list)


def check(opts: WatchOptions) -> None:
    """A usage error as one line (InputError, exit 2) before anything starts."""
    if (opts.job is None) == (not opts.command):
        raise InputError("watch needs either --job PID or -- COMMAND ... (not both)")
    if opts.stall <= 0 or opts.poll <= 0:
        raise InputError("--stall and --poll must be positive")
    if opts.then not in THEN:
        raise InputError("--then %s: one of %s" % (opts.then, "|".join(THEN)))
    for path in (opts.output, opts.node_summary):
        check_output(path, None)


def _say(msg: str) -> None:
    """The one line the watcher writes: what it captured and where (stderr, always)."""
    sys.stderr.write("hanganalyze: watch: %s\n" % msg)
    sys.stderr.flush()


def _moved(progress) -> bool:
    """A thread's frames or Python locals changed over the samples.  Waking many times in the same
    place is no move here: gloo's ``gloo_tcp_loop`` and NCCL's watchdog wake tens of times a second
    in a hung job too (the main thread's wake-ups are the counters' evidence, ``stall.py``)."""
    if progress is None or progress.state != "progressing":
        return False
    return not progress.changed or any(not c.startswith("woke ") for c in progress.changed)


#: Findings that say, from NCCL's own counters over time, that the communicators move.
RAS_MOVING = ("nccl-ras-progressing", "nccl-ras-slow-rank")


def progressing(snapshot) -> List[int]:
    """Pids whose job moved over the samples: a candidate they are in is no hang.

    A move is a thread of the program's own that moved (the main thread, a thread in the program's
    code, or one no list names), or NCCL RAS counts that moved.  A runtime's helper thread
    (``threadchoice.helper_order``: NCCL's watchdog and heartbeat, gloo's loops, pools) moving is no
    progress of the job: on a real GPU job whose stopped rank's peer spins in the device sync, the
    NCCL watchdog's frames differed between samples in most captures, and the watcher dismissed the
    hang again and again (captured 84 s after it began, against 13 s in the run where they held)."""
    moving = {p.pid for p in snapshot.processes if p.pid is not None
              for t in p.threads if _moved(t.progress) and helper_order(t, p) != 2}
    if any(f.signature in RAS_MOVING for f in snapshot.findings):
        moving.update(p.pid for p in snapshot.processes if p.pid is not None)
    return sorted(moving)


def capture(opts: WatchOptions, launcher: int, dumps: List[str]):
    """Every rank of ``launcher`` read (the ``--job`` path) with the flight-recorder dumps, analyzed;
    None when it did not finish within ``CAPTURE_LIMIT``."""
    from hanganalyze.acquire.request import AcquireRequest  # on first capture only

    box: Dict[str, object] = {}

    def one(targets: List[str]):
        request = AcquireRequest(targets=targets, job=launcher, samples=opts.samples, interval=opts.interval,
                                 timeout=min(60.0, CAPTURE_LIMIT / 2))
        with request:
            request.prepare()
            return pipeline.report(request, opts.signature_dirs, node_summary=opts.node_summary is not None)

    def work() -> None:
        try:
            try:
                box["snapshot"] = one(list(dumps))
            except HangAnalyzeError as e:
                if not dumps:
                    raise
                # a dump still being written, or not one: the ranks come first
                snapshot = one([])
                snapshot.warnings.append("flight-recorder dumps left out (%s): %s" % (", ".join(dumps), e))
                box["snapshot"] = snapshot
        except BaseException as e:  # noqa: BLE001 - handed to the watcher as is
            box["error"] = e

    t = threading.Thread(target=work, name="watch-capture", daemon=True)
    t.start()
    try:
        t.join(CAPTURE_LIMIT)
    except KeyboardInterrupt:  # Ctrl-C (--job mode): the reads end first, so no rank is left stopped
        t.join(CAPTURE_LIMIT)
        raise
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("snapshot")


def write_report(opts: WatchOptions, snapshot, launcher: int, tail: List[str]) -> List[Path]:
    """The report (``-o``, by default ``hanganalyze-watch-PID.html``), its JSON beside it, the node
    summary when asked, and the log tail; the paths written."""
    from hanganalyze.render import render  # on capture only

    out = opts.output or Path("hanganalyze-watch-%d.html" % launcher)
    written = [out]
    write_output(render(snapshot, opts.fmt), out)
    if opts.fmt != "json":
        write_output(render(snapshot, "json"), out.with_suffix(".json"))
        written.append(out.with_suffix(".json"))
    if opts.node_summary is not None:
        write_output(render(snapshot, "node"), opts.node_summary)
        written.append(opts.node_summary)
    if tail:
        write_output("\n".join(scrub_lines(tail)), out.with_suffix(".tail.log"))  # secrets: as the report
        written.append(out.with_suffix(".tail.log"))
    return written


def watch(opts: WatchOptions, progress: Callable[[str], None] = lambda m: None) -> int:
    """Run (or find) the job and watch it until it ends or hangs (see the module doc)."""
    try:
        check(opts)
    except HangAnalyzeError as e:
        _say("error: %s" % e)
        return EXIT_INPUT
    launched = None
    fr_prefix = None
    private = None
    if opts.command:
        private = tempfile.TemporaryDirectory(prefix="hanganalyze-watch-")
        env, fr_prefix = watchjob.flight_recorder_env(dict(os.environ), Path(private.name))
        try:
            launched = watchjob.Launched(opts.command, env)
        except HangAnalyzeError as e:
            _say("error: %s" % e)
            return EXIT_INPUT
        launcher = launched.pid
    else:
        launcher = int(opts.job)  # type: ignore[arg-type]
        if not watchjob.alive(launcher):
            _say("error: --job %d: no such process" % launcher)
            return EXIT_INPUT
    try:
        return _loop(opts, launcher, launched, fr_prefix, progress)
    except KeyboardInterrupt:
        _say("interrupted; the job was left as it was")
        return launched.finish() if launched is not None else EXIT_TOOL
    finally:
        if private is not None:
            private.cleanup()


def _loop(opts: WatchOptions, launcher: int, launched, fr_prefix: Optional[str],
          progress: Callable[[str], None]) -> int:
    detector = StallDetector(opts.stall)
    started = time.monotonic()
    ranks: List[int] = []
    rescan = started
    while True:
        now_poll = time.monotonic()
        if launched is not None and launched.poll() is not None:
            rc = launched.finish()
            progress("the job ended (exit %d) after %.0f s: nothing captured" % (rc, time.monotonic() - started))
            return rc
        if launched is None and not watchjob.alive(launcher):
            _say("the job %d ended: nothing captured" % launcher)
            return EXIT_OK
        # the launcher among its workers: no rank found yet (torchrun before it starts them), or a
        # lone ``python train.py``: searched every poll, so the ranks are watched as soon as they run
        if not ranks or launcher in ranks or now_poll >= rescan or not all(watchjob.alive(p) for p in ranks):
            ranks, _children = watchjob.workers(launcher)  # reads every /proc/PID/stat: not every poll
            rescan = now_poll + RESCAN
        if launched is None and not ranks and time.monotonic() - started < opts.poll / 2:
            _say("error: --job %d: found no Python worker below it (not a launcher?)" % launcher)
            return EXIT_INPUT  # a running job has its workers: no reason to wait for them
        now = time.monotonic()
        counters = {}
        for pid in ranks:
            c = watchjob.rank_counters(pid)
            if c is not None:
                counters[pid] = RankCounters(*c)
        detector.observe(now, counters)
        alarm = launched.alarm() if launched is not None else None
        dumps = watchjob.flight_recorder_dumps(fr_prefix)
        decision = detector.decide()
        trigger = ("the job wrote: %s" % alarm[:200] if alarm else
                   "a flight-recorder dump appeared (%s)" % dumps[0] if dumps else
                   decision.reason if decision.candidate and counters else None)
        if trigger is not None:
            rc = _confirm_and_capture(opts, launcher, launched, trigger, bool(alarm or dumps), dumps, detector, now,
                                      progress)
            if rc is not None:
                return rc
        time.sleep(opts.poll)


def _confirm_and_capture(opts: WatchOptions, launcher: int, launched, trigger: str, alarmed: bool,
                         dumps: List[str], detector: StallDetector, now: float,
                         progress: Callable[[str], None]) -> Optional[int]:
    """The capture; the exit code when it is a hang, None when the samples saw the job move."""
    t0 = time.monotonic()
    try:
        snapshot = capture(opts, launcher, dumps)
    except HangAnalyzeError as e:
        if launched is not None and launched.poll() is not None:
            return None  # the job ended while it was read: the loop reports its exit
        _say("capture failed: %s" % e)
        return EXIT_TOOL
    if snapshot is None:
        _say("capture did not finish within %.0f s; the job was left as it was" % CAPTURE_LIMIT)
        return EXIT_TOOL
    moving = progressing(snapshot)
    if moving and not alarmed:
        detector.backoff(now)  # in doubt, keep watching: no new candidate for a whole window
        progress("%s, but the samples saw pid %s move: watching on" % (trigger, ", ".join(map(str, moving))))
        return None
    snapshot.warnings.insert(0, "hanganalyze watch: hang detected: %s; %s over the samples (capture %.1f s)"
                             % (trigger, "no rank progressed" if not moving else "pid %s still progressed"
                                % ", ".join(map(str, moving)), time.monotonic() - t0))
    tail = list(launched.tail) if launched is not None else []
    written = write_report(opts, snapshot, launcher, tail)
    _say("hang captured (%s): %d process(es), report %s" % (trigger, len(snapshot.processes),
                                                               ", ".join(map(str, written))))
    if opts.then == "kill":
        watchjob.end_job(launcher)
        _say("ended the job (--then kill)")
    if launched is not None:  # keep: the job goes on (its watchdog, its scheduler), its output too
        launched.finish()
    return EXIT_HANG
