"""Fixes from open dev round 45 (manifest-blind45.yaml), each on the round's real paste and a near miss:
a stack a program printed under its own heading (gevent's monitor's "Blocked Stack (...):") takes no
exception line after it; a message broker's client (pika's adapters, pyzmq's socket calls) waits on the
network; a dumper's ``path.py: func: LINE`` rows are a stack; execnet's worker pool's waitall joins its
workers; pexpect's expect loop reads its child's pty."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.traceback import LOGGED_STACK
from hanganalyze.errors import InputError


def test_a_stack_under_its_own_heading_takes_no_exception_line(db):
    text = real_text("gevent/gevent-1577-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.notes == [LOGGED_STACK] and t.frames[0].function == "poll"
    assert text_verdict(text, db)[1] == "network"  # pika's I/O loop waiting for the broker
    # near miss: the same frames under a line that heads no stack read as a traceback cut above its header
    other = text.replace("Blocked Stack (for thread id 0x7f068d3b7740):", "Greenlet report follows")
    assert parse_text(other).processes[0].threads[0].notes != [LOGGED_STACK]


def test_pyzmqs_socket_recv_waits_on_the_network(db):
    text = real_text("pyzmq/pyzmq-1035-1.txt")
    assert text_verdict(text, db)[1] == "network"
    # near miss: the same Cython frames of another package are no socket of ZeroMQ's
    other = text.replace("zmq/backend/cython/", "mylib/_speedups/").replace("zmq.backend.cython.", "mylib._speedups.")
    assert text_verdict(other, db)[1] != "network"


def test_a_dumpers_colon_rows_are_a_stack_innermost_first(db):
    text = real_text("execnet/execnet-43-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert [f.function for f in t.frames] == ["wait", "wait", "waitall", "safe_terminate"]
    assert text_verdict(text, db)[1] == "join"  # the pool's waitall for its worker threads
    # near miss: rows whose last field is no line number are no stack (a config's "file.py: key: value")
    with pytest.raises(InputError):
        parse_text(text.replace(": 309", ": on").replace(": 603", ": off").replace(": 292", ": x").replace(
            ": 277", ": y"))


def test_pexpects_expect_loop_reads_its_childs_pty(db):
    text = real_text("pexpect/pexpect-491-1.txt")
    assert text_verdict(text, db)[1] == "io"
    # near miss: the program's own loop of the same shape reads no child's pty
    own = text.replace("expect.py", "loop.py").replace("expect_loop", "run_loop").replace(
        "read_nonblocking", "next_event")
    assert text_verdict(own, db)[1] != "io"
