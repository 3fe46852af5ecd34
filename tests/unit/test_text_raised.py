"""A traceback that names no wait is an exception's story, not a run: the triage says the thread
raised (an exception whose line the paste kept, or one the cut took), never "it runs", when no thread
of the text waits.  Real pastes from the corpus, each with its near miss."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.common import split_ranks
from hanganalyze.errors import InputError


def _triage(snap):
    return next(f for f in snap.findings if f.signature == "triage")


def test_a_traceback_cut_before_its_exception_line_raised(db):
    # loguru's handler: Python's own header, frames down to a `raise RuntimeError(` the cut ended
    text = real_text("loguru/loguru-1091-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    assert "exception whose line is cut" in _triage(snap).summary
    # near miss: the same frames after a Ctrl-C's echo are where a hang stood, no exception's story
    snap, wait = text_verdict("^C\n" + text, db)
    assert wait != "crashed"
    # near miss: the same frames with no header are a stack a program printed (format_stack)
    headless = text.replace("Traceback (most recent call last):\n", "")
    assert headless != text
    assert text_verdict(headless, db)[1] != "crashed"


def test_an_exception_a_framework_printed_is_raised_not_run(db):
    # gunicorn's arbiter: INFO records around the traceback, so it may have been caught; still no run
    text = real_text("gunicorn/gunicorn-2-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    assert "raised an exception (RuntimeError: dictionary changed size" in _triage(snap).summary
    # near miss: a Ctrl-C's KeyboardInterrupt is the end of a wait, not a raise of the thread's own
    near = text.replace("RuntimeError: dictionary changed size during iteration", "KeyboardInterrupt")
    assert near != text
    assert text_verdict(near, db)[1] != "crashed"


def test_an_exception_whose_message_is_a_workers_traceback_ends_the_first_one():
    # torch's DataLoader re-raised a worker's error as "RuntimeError: Traceback (most recent call last):"
    procs = parse_text(real_text("sealed91/pytorch_geometric-499-1.txt")).processes
    first, worker = procs[0].threads
    assert "exception: RuntimeError: Traceback (most recent call last):" in first.notes
    assert not any(n.startswith("exception: ") for n in worker.notes)
    # near miss: a log prefix glued to a header is no exception line of the traceback above it
    glued = parse_text("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\n"
                       "ERROR: Traceback (most recent call last):\n  File \"b.py\", line 2, in g\n    h()\n"
                       "ValueError: x\n").processes[0]
    assert not any(n.startswith("exception: ") for n in glued.threads[0].notes)


def test_an_exception_cpython_ignored_ends_nothing(db):
    # a finalizer's tkinter call off its thread: "Exception ignored in" over the traceback
    text = real_text("openclga/openclga-23-1.txt").replace(
        "Tcl_AsyncDelete: async handler deleted by the wrong thread", "")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed" and "that CPython ignored" in _triage(snap).summary
    assert _triage(snap).title == "Triage: an exception was raised, and no thread waits"
    # near miss: the same traceback without CPython's header is not told as ignored
    plain = "\n".join(x for x in text.splitlines() if not x.startswith("Exception ignored in")) + "\n"
    assert plain != text and "that CPython ignored" not in _triage(text_verdict(plain, db)[0]).summary


def test_a_traceback_beside_a_native_stack_that_names_no_wait_is_the_subject(db):
    # Ray's worker: an abseil stack of a socket's completion handler, then the task's cut traceback
    snap, wait = text_verdict(real_text("ray/ray-9044-1.txt"), db)
    assert wait == "crashed" and "exception whose line is cut" in _triage(snap).summary
    # near miss: the same native stack alone names no exception
    native = "\n".join(x for x in real_text("ray/ray-9044-1.txt").splitlines()
                       if "File " not in x and "Traceback" not in x)
    try:
        assert text_verdict(native + "\n", db)[1] != "crashed"
    except InputError:
        pass


def test_a_rank_tag_the_chunk_cut_into_at_its_first_line():
    text = real_text("bitsandbytes/bitsandbytes-1252-1.txt")
    assert text.startswith("rank1]: Traceback")
    t = parse_text(text).processes[0].threads[0]
    assert t.notes[0] == "Python traceback" and len(t.frames) >= 5
    # near miss: only the first line can have lost its tag's start: a later "rank1]: " line is untagged
    segs = split_ranks(["[rank1]: a", "rank1]: b"])
    assert [(x.label, x.lines) for x in segs] == [(None, ["rank1]: b"]), ("rank1", ["a"])]
    assert [(x.label, x.lines) for x in split_ranks(["rank1]: b", "[rank1]: a"])] == [("rank1", ["b", "a"])]
