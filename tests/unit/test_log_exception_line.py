"""A text whose only error is a Python exception line (a traceback cut above its frames, a program's
own print of the error) is answered, not refused (analyze/logtriage.py): an uncaught exception at a
lower confidence; an interrupt, an exit or a timeout is no crash of its own."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.logtriage import EXCEPTION_ONLY_CONFIDENCE
from hanganalyze.errors import InputError
from hanganalyze.loglines import exception_line


def _line(path: str, start: str) -> str:
    return next(x for x in real_text(path).splitlines() if x.startswith(start))


def test_a_real_exception_line_alone_is_an_uncaught_exception(db):
    line = _line("matplotlib/matplotlib-27713-1.txt", "RuntimeError: ")
    snap, wait = text_verdict(line + "\n", db)
    tri = [f for f in snap.findings if f.signature == "triage"][0]
    assert wait == "crashed" and tri.confidence == EXCEPTION_ONLY_CONFIDENCE
    assert line.strip()[:60] in tri.summary


@pytest.mark.parametrize("text, wait", [
    ("[rank1]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.", "crashed"),
    ("E       ValueError: too many values to unpack (expected 2)", "crashed"),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "crashed"),  # torchrun's, message cut
    ("KeyboardInterrupt", "runs"),  # a Ctrl-C: no crash of its own
    ("TimeoutError: timed out waiting for rank 3", "runs"),
    ("_queue.Empty", "runs"),  # a get(timeout=...) that gave up
])
def test_exception_lines_and_what_they_say(db, text, wait):
    assert text_verdict(text + "\n", db)[1] == wait


@pytest.mark.parametrize("text", [
    "Error: something went wrong",       # no exception class
    "the job hangs after epoch 3",       # prose
    "see the ValueError: above",         # an exception named inside a sentence
])
def test_near_misses_are_still_refused(text):
    assert exception_line([text]) is None
    with pytest.raises(InputError):
        parse_text(text + "\n")
