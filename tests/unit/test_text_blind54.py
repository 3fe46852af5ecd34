"""Fixes from open dev round 54 (manifest-blind54.yaml, hangs), each on the round's real paste and a near
miss: an application's own ``NAME:`` / ``FILE:`` stack dump; Python stacks abridged by hand to
``file.py:LINE`` rows; a thread joining itself (``self.join()``) and ``wait([future])`` by their source
lines; the lines a timeout leaves with no stack (pytest-timeout's banner, a supervisor's kill, gunicorn's
WORKER TIMEOUT); a test's name is no statement of a deadlock."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.sourcewait import line_category
from hanganalyze.errors import InputError


def test_an_applications_name_and_file_rows(db):
    text = real_text("canto-curses/canto-curses-20-1.txt")
    threads = parse_text(text).processes[0].threads
    assert [t.name for t in threads][:2] == ["Thread-3", "Thread-1"]
    assert threads[0].frames[0].function == "wait" and threads[0].frames[-1].function == "_bootstrap"
    # near miss: a NAME: line over no frame row is no stack
    with pytest.raises(InputError):
        parse_text("NAME: Thread-3\nstatus: ok\n")


def test_python_rows_written_by_hand(db):
    text = real_text("autokey/autokey-1202-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert [f.function for f in t.frames][0] == "XInterfaceBase.cancel" and t.frames[0].source == "self.join()"
    assert text_verdict(text, db)[1] == "join"
    rows = parse_text(real_text("virtualizarr/virtualizarr-1072-1.txt")).processes[0].threads[0].frames
    assert rows[0].file == "threading.py" and rows[1].source == "wait([future], timeout=None)"


def test_a_logs_file_line_records_are_no_python_rows():
    # near miss: logging's "%(filename)s:%(lineno)d - %(message)s" records
    with pytest.raises(InputError):
        parse_text("data.py:212 - multi_turn 9: {'a': 1}\ndata.py:212 - passrate 9: {'b': 2}\n"
                   "timer.py:24 - Timer actor_train start\n")


def test_source_lines_of_a_self_join_and_a_futures_wait():
    assert line_category("self.join()") == "join"
    assert line_category("wait([future], timeout=None)") == "future"
    # near misses: a string's join takes an argument; an Event's wait has a dot before it
    assert line_category("', '.join(names)") != "join"
    assert line_category("self._event.wait()") == "condition"


@pytest.mark.parametrize("path,line,calm", [
    # pytest-timeout's banner (the chunk ends before its stacks) / a test that passed
    ("loky/loky-92-1.txt", "+++++++++++++++++++++++++++++++++++ Timeout ++++++++++++++++++++++++++++++++++++",
     "tests/test_x.py::test_y PASSED"),
    # a CI step's kill of a run past its limit / a limit only announced
    ("pyautofit/pyautofit-1518-1.txt", "##[error]TIMEOUT after 300s — killed the process group.",
     "timeout raised to 300s for this step"),
    # gunicorn's arbiter killing a worker that missed its heartbeat / a worker booting
    ("gunicorn/gunicorn-76-1.txt", "2010-07-28 23:01:19 [5869] [CRITICAL] WORKER TIMEOUT (pid:5870)",
     "2010-07-28 23:01:19 [6935] [INFO] Booting worker with pid: 6935"),
])
def test_the_lines_a_timeout_leaves(db, path, line, calm):
    text = real_text(path)
    assert line in text
    snap, _wait = text_verdict(text, db)
    assert any(f.signature == "triage" for f in snap.findings)
    with pytest.raises(InputError):
        parse_text(calm + "\n" + calm + "\n")


def test_a_tests_name_says_no_deadlock(db):
    text = real_text("loky/loky-92-1.txt")
    assert "test_deadlock_kill" in text
    assert text_verdict(text, db)[1] != "lock"
    # near miss: a line that says a deadlock happened
    assert text_verdict(text + "Deadlock detected between the queue manager and a worker\n", db)[1] == "lock"
