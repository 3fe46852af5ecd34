"""Which dump format is this text?  Each parser of the registry (``formats.py``) scores the lines;
the best score wins.

Scores are counts of lines only that format prints (gdb's ``#N`` frames, py-spy's
``Thread 0x.. (idle)``, faulthandler's ``File "..", line N in f``), weighted by how
distinctive they are.  A score of 0 means "not this format".
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from hanganalyze.errors import InputError
from hanganalyze.loglines import data_known_lines, exception_line
from hanganalyze_gdbext.model import Process

from . import log
from .formats import FORMATS, PARSERS, SPELLINGS, TextParser

FORMAT_NAMES = tuple(PARSERS) + ("auto",)

UNRECOGNISED = (
    "could not recognise the text as any known dump format (gdb backtrace, py-bt, py-spy dump, "
    "py-spy --json, pystack, faulthandler, Python traceback, IPython traceback, lldb bt, pytest-timeout, "
    "pytest report, stack dumper, abseil deadlock report, PyTorch C++ frames, backtrace_symbols, WinDbg or "
    "Visual Studio call stack, macOS crash report or sample, IDE debugger thread view, JVM thread dump, "
    "Go goroutine dump, oslo Guru Meditation report, python -m asyncio ps/pstree) or hang log: "
    "no stack frame and no known log line found; while the process hangs, capture its stacks (hanganalyze "
    "--pid PID, or py-spy dump --native --pid PID) and give those; or use --input-format, or --input-format "
    "log for a plain log"
)

#: A log (most lines are records: a timestamp, a level, a process tag) with no frame and no line a hang
#: leaves: what it lacks, and what to capture instead.
LOG_WITHOUT_KNOWN_LINE = (
    "the text is a log with no stack frame and no line a hang or crash leaves (a timeout, a watchdog, an "
    "NCCL error, a launcher's exit code, a stall report), so it cannot say where the process waits; while "
    "it hangs, capture the stacks (hanganalyze --pid PID, or py-spy dump --native --pid PID; every rank of "
    "a torchrun job: hanganalyze --job TORCHRUN_PID; or faulthandler.dump_traceback_later in the program); "
    "for a distributed job, run it with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 so a "
    "timeout writes each rank's flight-recorder dump; give those, or use --input-format log to read this "
    "log anyway"
)


#: A profiler's table (py-spy top's ``%Own %Total OwnTime TotalTime Function (filename)`` rows, cProfile's
#: ``ncalls tottime percall cumtime percall filename:lineno(function)``): time per function, no stack.
PROFILE_TABLE = (
    "the text is a profiler's table (time per function: py-spy top, cProfile), not the stacks of a hang: "
    "it cannot say where each thread waits; while the process hangs, capture its stacks (py-spy dump "
    "--native --pid PID, or hanganalyze --pid PID) and give those"
)
_PROFILE_ROW = re.compile(r"^\s{0,8}\d{1,3}\.\d\d%\s+\d{1,3}\.\d\d%\s+\d+\.\d+s\s+\d+\.\d+s\s+\S"
                          r"|^\s{0,8}\d+(?:/\d+)?\s+\d+\.\d{3}\s+\d+\.\d{3}\s+\d+\.\d{3}\s+\d+\.\d{3}\s+\S.{0,500}\(\S")


def profile_table(lines: List[str]) -> bool:
    """Most non-blank lines are a profiler's rows (``PROFILE_TABLE``), at least three."""
    rows = [x for x in lines[:2000] if x.strip()]
    hits = sum(1 for x in rows if _PROFILE_ROW.match(x))
    return hits >= 3 and hits * 2 >= len(rows)


def parser_for(input_format: Optional[str]) -> Optional[TextParser]:
    """The parser forced by --input-format (None for auto); InputError for an unknown name."""
    if input_format is None or input_format == "auto":
        return None
    key = input_format.strip().lower().replace("_", "-")
    key = SPELLINGS.get(key, key)
    if key not in PARSERS:
        raise InputError(
            "unknown --input-format %r; use one of: %s" % (input_format, ", ".join(FORMAT_NAMES))
        )
    return PARSERS[key]


#: Lines scored from each end of a long text: enough to recognise any dump, bounded work.
SCORE_LINES = 10000


def scores(lines: List[str]) -> List[Tuple[float, str]]:
    """(score, name) for every format, best first (a long text is scored on its two ends)."""
    if len(lines) > 2 * SCORE_LINES:
        lines = lines[:SCORE_LINES] + lines[-SCORE_LINES:]
    out = [(f.parser.score(lines), f.name) for f in FORMATS]
    order = {f.name: i for i, f in enumerate(FORMATS)}
    out.sort(key=lambda x: (-x[0], order[x[1]]))
    return out


def detect(lines: List[str]) -> TextParser:
    """The best-scoring parser; the log reader when no dump format scores but the text holds known
    log lines (a watchdog timeout, a stall report: no frames, still an answer); InputError with the
    list of formats when neither."""
    best_score, best = scores(lines)[0]
    if best_score <= 0:
        ends = lines[:SCORE_LINES] + lines[-SCORE_LINES:]
        if log.known_lines(ends) or data_known_lines(ends) or exception_line(ends) is not None:
            return log
        raise InputError(UNRECOGNISED)
    return PARSERS[best]


def parses_a_frame(lines: List[str]) -> Optional[TextParser]:
    """The format whose parser reads the most frames from a text no format scored: a single frame
    line (``wait (threading.py:320)``, ``ntdll!NtWaitForSingleObject+0xa``) is too little for a
    score, which counts what is distinctive, but a text with a frame is never refused.  Called once
    per text on the refusal path only, each parser once, on at most ``SCORE_LINES`` from each end."""
    if len(lines) > 2 * SCORE_LINES:
        lines = lines[:SCORE_LINES] + lines[-SCORE_LINES:]
    best: Optional[TextParser] = None
    most = 0
    for f in FORMATS:
        if not f.leftover:
            continue  # whole-document formats (JSON, asyncio tables) and the log reader
        proc = Process(source="text")
        try:
            f.parser.parse(lines, proc)
        except InputError:
            continue
        n = sum(len(t.frames) for t in proc.threads)
        if n > most:
            best, most = f.parser, n
    return best
