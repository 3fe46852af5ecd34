"""Fixes from open dev round 44 (manifest-blind44.yaml), each on the round's real paste and a near miss:
nccl-tests' host thread polling its streams is the GPU's wait; a watchdog's abort after its collective
timeout in a rank's log with no stack is the collective's wait; a traceback that lost its indentation
keeps its source line apart from its exception line; a bare uncaught exception (nothing in the text but
the traceback: no framework's or logger's header over it) ended the process."""

from __future__ import annotations

from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def test_nccl_tests_polling_its_streams_waits_for_the_gpu(db):
    text = real_text("nccl/nccl-606-1.txt")
    assert text_verdict(text, db)[1] == "gpu"
    # near miss: the same yield under the program's own poll loop names no wait
    own = text.replace("testStreamSynchronize", "poll_queue").replace("completeColl", "drain").replace(
        "TimeTest", "serve")
    assert text_verdict(own, db)[1] != "gpu"


def test_a_watchdogs_abort_in_a_log_without_stack_is_the_collectives(db):
    text = real_text("determined/determined-8915-1.txt")
    assert text_verdict(text, db)[1] == "collective"
    # near miss: the same abort without the watchdog's timeout line is a crash
    cut = "\n".join(line for line in text.splitlines() if "Watchdog caught" not in line)
    assert text_verdict(cut, db)[1] == "crashed"


def test_a_traceback_without_indentation_keeps_its_source_line_apart(db):
    text = real_text("fairseq/fairseq-1088-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].source.startswith("'Unable to unpickle data")
    assert any(n.startswith("exception: Exception: Unable to unpickle") for n in t.notes)


def test_a_bare_uncaught_exception_ended_the_process(db):
    text = real_text("fairseq/fairseq-1088-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    assert "nothing caught" in next(f for f in snap.findings if f.signature == "triage").summary
    # near misses: a framework's header over the traceback says it caught and printed the exception
    # (socketserver), as a logger's record does (gunicorn's arbiter, open round 29)
    served = "Exception happened during processing of request from ('10.0.0.1', 13787)\n" + text
    assert not crash_said(served, db)
    assert not crash_said(real_text("gunicorn/gunicorn-2-1.txt"), db)
