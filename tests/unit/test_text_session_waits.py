"""Waits the corpus's own dumps showed and the readers missed, each on its real paste and a near miss:
a headerless pystack paste whose common indent a paste removed (its frames then had none), and the
innermost Python line that calls a collective through its module (``torch.distributed.broadcast``)."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def test_a_headerless_pystack_paste_keeps_every_frame_and_its_collective_line(db):
    text = real_text("sealed77/returnn-1621-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames[:3]] == ["eval_model", "_check_missing_eval", "train"]
    assert frames[0].source == "torch.distributed.broadcast(_has_data, src=0)"
    assert text_verdict(text, db)[1] == "collective"
    # near miss: the same stack standing on a line that asks the rank's number (no peer waits)
    near = text.replace("torch.distributed.broadcast(_has_data, src=0)", "rank = torch.distributed.get_rank()")
    assert near != text and text_verdict(near, db)[1] != "collective"


def test_a_headerless_listing_printed_innermost_first_is_read_so(db):
    """py-bt cut above its header: each caller's line calls the frame printed above it."""
    text = real_text("sealed78/dd-trace-py-4978-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].function == "on_span_start" and t.frames[0].source == "with self._lock:"
    assert text_verdict(text, db)[1] == "lock"


def test_a_headerless_traceback_printed_outermost_first_keeps_its_order():
    """Near miss: the same kind of listing as a traceback prints it (callers first): reversed."""
    text = "\n".join([
        '  File "/srv/app/main.py", line 10, in main',
        "    run_jobs(queue)",
        '  File "/srv/app/jobs.py", line 22, in run_jobs',
        "    item = fetch_next(queue)",
        '  File "/srv/app/jobs.py", line 40, in fetch_next',
        "    with self._lock:",
    ])
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames] == ["fetch_next", "run_jobs", "main"]
    # ... and printed the other way round (innermost first), the same lines say so
    flipped = "\n".join(text.splitlines()[4:6] + text.splitlines()[2:4] + text.splitlines()[0:2])
    frames = parse_text(flipped).processes[0].threads[0].frames
    assert [f.function for f in frames] == ["fetch_next", "run_jobs", "main"]


def test_a_childs_process_line_inside_the_parents_traceback_does_not_end_it(db):
    """fairseq#4619: Ctrl-C over torch's spawn; the child's "Process SpawnProcess-1:" falls between
    the parent's lines, whose innermost line is the tail of ``spawn(..., join=True)``."""
    text = real_text("sealed77/fairseq-4619-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert frames[0].function == "call_main" and frames[0].source == "join=True,"
    assert text_verdict(text, db)[1] == "child"
    # near miss: an exception line in that place ends the traceback there (one frame, no wait)
    near = text.replace("Process SpawnProcess-1:", "RuntimeError: cannot spawn")
    assert near != text and len(parse_text(near).processes[0].threads[0].frames) == 1
    assert text_verdict(near, db)[1] != "child"


def test_a_py_spy_idle_thread_in_unknown_code_is_not_said_to_run(db):
    """py-spy marks a thread idle when it is off the CPU: the triage names no wait it cannot tell,
    but does not say the thread runs (open round 77's omlx-3521)."""
    text = real_text("sealed77/omlx-3521-1.txt")
    snap, wait = text_verdict(text, db)
    tri = [f for f in snap.findings if f.signature == "triage"][0]
    assert wait == "runs" and "was idle when py-spy read it" in tri.summary and " runs;" not in tri.summary
    # near miss: the same thread on the CPU (py-spy's "active")
    near = text.replace("(idle)", "(active)")
    tri = [f for f in text_verdict(near, db)[0].findings if f.signature == "triage"][0]
    assert near != text and "idle when py-spy" not in tri.summary and " runs;" in tri.summary


def test_a_get_that_timed_out_with_queue_empty_is_the_queues_wait(db):
    """``q.get(timeout=...)`` raising queue.Empty (the paste shows the program's line, not queue.py's):
    the thread waited for the queue until it gave up, as a TimeoutError says; any other exception
    there was raised on that line (no wait)."""
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/srv/app/main.py", line 12, in <module>',
        "    consumer.run()",
        '  File "/srv/app/consumer.py", line 40, in run',
        "    item = self.jobs.get(timeout=30)",
        "_queue.Empty",
    ])
    assert text_verdict(text + "\n", db)[1] == "queue"
    near = text.replace("_queue.Empty", "ValueError: bad item")
    assert text_verdict(near + "\n", db)[1] != "queue"
