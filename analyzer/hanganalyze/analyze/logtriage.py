"""The triage of a process whose input holds no stack, only log lines: which wait (or crash) its
lines name, and the sentence that says so.

Why apart from ``triage.py``: a log's answer comes from its lines alone (a crash line, a timeout that
names its wait, a build's lock file, asyncio's task list, an exception line), never from frames; the
frames' triage only builds the finding around it.

The last resort is a Python exception line and nothing else (``ValueError: ...``, a paste cut above
its traceback's frames): the program raised it; a text that holds only that is no healthy log, and
refusing it told the user nothing.  It is read as an exception nothing caught, at a lower confidence:
a program may log an exception it caught.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

from hanganalyze.analyze.crashframes import own_raise
from hanganalyze.analyze.extbuild import build_lock_wait
from hanganalyze.analyze.logwait import message_category, timed_out
from hanganalyze.analyze.taskwait import tasks_wait
from hanganalyze.analyze.triagetable import Category, table
from hanganalyze.loglines import exception_line, known_lines
from hanganalyze_gdbext.model import Process

#: The confidence of an answer read from a lone exception line (the log's other answers have 0.4).
EXCEPTION_ONLY_CONFIDENCE = 0.3


class LogAnswer(NamedTuple):
    category: Category
    message: Optional[int]  # the index of the line that says it (None: no one line)
    summary: str
    confidence: float


def _exception(messages: List[str]) -> Tuple[Optional[int], bool]:
    """(the index of the first exception line, whether it is a crash of its own: not a Ctrl-C, an exit
    or a timeout)."""
    i = exception_line(messages)
    if i is None:
        return None, False
    return i, own_raise(messages[i].strip().split("]: ", 1)[-1].lstrip("E \t"))


def log_answer(proc: Process, known_crash: bool) -> Optional[LogAnswer]:
    """The answer for a process with no stack; None for a log that names no wait, crash or hang.
    ``known_crash``: a known bug of severity crash or error matched it (an OOM, an NCCL error)."""
    tab = table()
    timeout = timed_out(proc.messages)
    cat, msg = message_category(proc)
    if cat is not None and cat is not tab.crashed and timeout[0] is None:
        ended = message_category(proc, [tab.crashed])  # the log's end outranks a wait no timeout names
        cat, msg = ended if ended[0] is not None else (cat, msg)
    if cat is None or (cat is tab.crashed and timeout[0] is not None):  # a watchdog's abort: its timeout's
        cat, msg = timeout if timeout[0] is not None else (cat, msg)
    if cat is None:  # a JIT extension build stopped before its build: its lock file (extbuild.py)
        cat, msg = build_lock_wait(proc.messages)
    if cat is None and known_crash:
        cat = tab.crashed
    tasks: Optional[Tuple[Category, str]] = tasks_wait(proc) if cat is None else None  # asyncio's tasks
    exc, raised = _exception(proc.messages) if cat is None and tasks is None else (None, False)
    if exc is not None:
        line = proc.messages[exc].strip()[:160]
        if raised:
            return LogAnswer(tab.crashed, exc, "the log's one error is an exception (%s) and it holds no stack: "
                             "the program raised it, and ended there unless it caught it" % line,
                             EXCEPTION_ONLY_CONFIDENCE)
        return LogAnswer(tab.runs, exc, "the log's one error is an interrupt, an exit or a timeout (%s) and it "
                         "holds no stack: a Ctrl-C or a timeout ends a wait that did not finish, and the line does "
                         "not say which wait" % line, EXCEPTION_ONLY_CONFIDENCE)
    if cat is None and tasks is None and not known_lines(proc.messages):
        return None  # a healthy log: nothing to say
    cat = cat or (tasks[0] if tasks else tab.runs)
    summary = "the log says this process waits for %s (no stack in the input)" % cat.label
    if tasks is not None:
        summary = tasks[1]
    elif cat is tab.crashed:
        summary = "the log says this process crashed (no stack in the input)"
    elif cat is tab.runs:
        summary = "the log names no wait and holds no stack"
    return LogAnswer(cat, msg, summary, 0.4)
