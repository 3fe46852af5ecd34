"""The same real dump, pasted the ways pages and CI logs mangle it, keeps its answer: every line's
indentation lost (a rendered page's copy), a CI runner's timestamp on every line.  Each on real
corpus pastes, with a near miss (scripts/paste_mangling.py runs the same transforms over the whole
corpus and counts the answers each one loses)."""

from __future__ import annotations

from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def flush_left(text: str) -> str:
    return "\n".join(line.lstrip() for line in text.split("\n"))


def ci_stamped(text: str) -> str:
    return "\n".join("2024-03-01T12:00:%02d.1234567Z %s" % (i % 60, line) for i, line in enumerate(text.split("\n")))


def test_a_flush_left_traceback_keeps_its_source_lines(db):
    text = flush_left(real_text("acodet/acodet-47-1.txt"))
    frames = parse_text(text).processes[0].threads[0].frames
    assert all(f.source for f in frames[:3]), [(f.function, f.source) for f in frames[:3]]
    assert text_verdict(text, db)[1] == "queue"
    # near miss: a banner between two flush-left stacks is no source line: the crash it says stays
    vllm = flush_left(real_text("vllm/vllm-44780-1.txt"))
    proc = parse_text(vllm).processes[0]
    assert any("Segfault encountered" in m for m in proc.messages)
    assert text_verdict(vllm, db)[1] == "crashed"


def test_a_flush_left_py_bt_keeps_its_source_lines(db):
    text = flush_left(real_text("celery/celery-pr6969-1.txt"))
    frames = [f for f in parse_text(text).processes[0].threads[0].frames if f.file]
    assert frames[0].source == "with self._lock:"
    assert text_verdict(text, db)[1] == "lock"


def test_a_flush_left_file_line_is_not_joined_with_its_source(db):
    """A File line whose length happens to be a terminal's width, then its source flush left: the
    source is no piece of the line the terminal cut."""
    text = flush_left(real_text("porcupine/porcupine-379-1.txt"))
    funcs = [f.function for f in parse_text(text).processes[0].threads[0].frames]
    assert "_python_exit" in funcs, funcs
    assert "python-shutdown-nondaemon-threads" in [f.signature for f in text_verdict(text, db)[0].findings]


def test_flush_left_py_spy_frames_of_an_import(db):
    text = flush_left(real_text("holidays/holidays-1514-1.txt"))
    frames = parse_text(text).processes[0].threads[0].frames
    assert frames[0].function == "_get_module_lock" and frames[0].file == "<frozen importlib._bootstrap>"
    assert text_verdict(text, db)[1] == "lock"


def test_a_ci_timestamp_on_every_line_of_a_log(db):
    # a glog fatal record (its pattern anchored at the line's start) under the runner's timestamp
    assert text_verdict(ci_stamped(real_text("jax/jax-7247-1.txt")), db)[1] == "crashed"
    # an exception line under vLLM's record under the runner's timestamp: two prefixes
    assert text_verdict(ci_stamped(real_text("sealed81/vllm-5094-1.txt")), db)[1] == "crashed"
    # near miss: a log whose lines are known with or without the stamps keeps them (its times are
    # the log's, and the report shows its lines as they came)
    log = ci_stamped("[rank0]:[E ProcessGroupNCCL.cpp:523] [Rank 0] Watchdog caught collective operation timeout: "
                     "WorkNCCL(SeqNum=6207, OpType=ALLGATHER, NumelIn=1, NumelOut=4, Timeout(ms)=1800000) ran for "
                     "1800838 milliseconds before timing out.")
    assert parse_text(log).processes[0].messages[0].startswith("2024-03-01T12:00:00")


def test_a_writers_sentences_around_an_uncaught_traceback(db):
    text = real_text("deepspeed/deepspeed-618-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    wrapped = "Here is the stack I got when it hung, any idea?\n\n" + text + "\n\nThanks in advance!"
    assert text_verdict(wrapped, db)[1] == "crashed"
    # near miss: a framework's line over it says it caught and printed the exception
    caught = "Exception happened during processing of request from ('127.0.0.1', 5000)\n" + text
    assert not crash_said(caught, db)


def test_flush_left_chunks_keep_their_innermost_source_line(db):
    # the chunk ends on the innermost frame's source (`with self.conn_lock:`): a statement, no exception line
    text = flush_left(real_text("stratospherelinuxips/stratospherelinuxips-1836-1.txt"))
    assert text.rstrip().endswith("with self.conn_lock:")
    assert text_verdict(text, db)[1] == "lock"
    # an annotated assignment over its caret line is a frame's source, not "Name: message"
    assert text_verdict(flush_left(real_text("sealed82/prefect-14901-1.txt")), db)[1] == "queue"
    # near miss: a flush-left last line that is an exception's stays the exception
    raised = parse_text(text + "\nRuntimeError: database is closed\n").processes[0].threads[0]
    assert "exception: RuntimeError: database is closed" in raised.notes


def test_a_file_line_a_terminal_spread_with_spaces(db):
    text = real_text("bigjob/bigjob-26-1.txt")
    assert '",     line 216, in wait' in text
    frames = parse_text(text).processes[0].threads[0].frames
    assert any(f.function == "wait" and f.line == 216 for f in frames)
    # near miss: a path with no quotes is no File line of a traceback
    near = parse_text(text.replace('pilot_manager.py",     line 216', "pilot_manager.py      line 216"))
    assert not any(f.line == 216 for p in near.processes for t in p.threads for f in t.frames)


def test_gdbs_from_lib_line_flush_left_is_the_frames_library(db):
    text = flush_left(real_text("xla/xla-7155-1.txt"))
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].library and t.frames[0].library.endswith("xla_extension.so")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a writer's sentence starting with "from" is no frame's place
    near = text.replace("from /home/phawkins/myenv/lib/python3.10/site-packages/jaxlib/xla_extension.so",
                        "from the same build as before", 1)
    t = parse_text(near).processes[0].threads[0]
    assert not t.frames[0].library
