"""The mechanisms behind open general round 18's misses (manifest-blind18.yaml), each on the round's
real paste and a near miss it must not claim: a CI log's date prefix followed by a tab, execinfo's
backtrace_symbols() lines printed with no report around them, ReportCrash's ``Thread N Crashed::``
header in a report cut above its exception lines, a queue's get over a Condition wait whose own line
is the primitive's ``waiter.acquire``, pymongo's and py-amqp's waits on their server's socket, py-bt's
"Waiting for the GIL" over a Python 2 lock acquire, and a multiprocessing child blocked on logging's
lock with its stack cut at ``Process.run``."""

from __future__ import annotations

import pytest
from helpers import REPO, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.py2gil import NOTE as PY2_NOTE
from hanganalyze.errors import InputError

REAL = REPO / "tests" / "data" / "realworld"


real = real_text


def analyzed(text: str, db):
    return text_verdict(text, db)


def sigs(snap):
    return [f.signature for f in snap.findings]


# --- a CI log's "28-Jun-2016 08:44:47<TAB>" prefix ------------------------------------------------

def test_dated_prefix_with_a_tab_is_taken_off_the_faulthandler_dump(db):
    text = real("paramiko/paramiko-520-1.txt")
    proc = parse_text(text).processes[0]
    assert len(proc.threads) == 2
    assert proc.threads[0].frames[0].function == "read_all"
    assert analyzed(text, db)[1] == "network"  # paramiko's transport reading the server's packet


def test_a_tab_after_something_that_is_no_date_is_no_prefix():
    text = "\n".join("28-Jun-20x6 08:44:47\t" + line for line in real("paramiko/paramiko-520-1.txt")
                     .replace("28-Jun-2016 08:44:47\t", "").splitlines())
    # not stripped: no frame is read (the dump's headers are known lines, so a log, else refused)
    try:
        snap = parse_text(text)
    except InputError:
        return
    assert not any(p.threads for p in snap.processes)


# --- backtrace_symbols() lines with no report around them ------------------------------------------

def test_backtrace_symbols_lines_from_a_hang_detector_are_one_thread():
    proc = parse_text(real("music-player/music-player-49-1.txt")).processes[0]
    assert len(proc.threads) == 1 and proc.threads[0].current
    fs = [f.function for f in proc.threads[0].frames]
    assert fs[0] == "print_backtrace" and "__CFRunLoopRun" in fs and len(fs) == 12


def test_frame_lines_that_do_not_count_up_from_zero_are_a_cut_thread_not_the_printing_one():
    lines = real("music-player/music-player-49-1.txt").splitlines()
    frames = [x for x in lines if x[:1].isdigit()]
    # cut above frame 0: a later chunk of one thread's rows (open rounds 22/27), not the thread that
    # printed them (frame 0, the printer, is not in the text)
    t = parse_text("\n".join(frames[1:])).processes[0].threads[0]
    assert not t.current and any("header is not in the text" in n for n in t.notes)
    with pytest.raises(InputError):  # numbered rows that do not follow each other are no run
        parse_text("\n".join(frames[1:2] + frames[5:6] + frames[3:4]))


def test_a_cut_reports_leading_frames_do_not_take_the_crashed_threads_place():
    proc = parse_text(real("qtreactor/qtreactor-19-1.txt")).processes[0]
    assert [t.current for t in proc.threads] == [False, True]


# --- ReportCrash's "Thread N Crashed::" -----------------------------------------------------------

def test_reportcrashs_crashed_thread_header_is_a_crash(db):
    text = real("qtreactor/qtreactor-19-1.txt")
    snap, wait = analyzed(text, db)
    assert wait == "crashed"  # the crashed thread is in PyGILState_Ensure: not a GIL wait
    assert not any(f.severity in ("hang", "deadlock") for f in snap.findings if f.signature != "triage")


def test_a_report_thread_without_crashed_is_not_named_for_the_crash(db):
    # the report says the process crashed (test_text_crash_reports.py), but only "Crashed" names the thread
    text = real("qtreactor/qtreactor-19-1.txt").replace("Thread 10 Crashed::", "Thread 10::")
    snap, wait = analyzed(text, db)
    assert wait == "crashed"
    assert [f.triage.about for f in snap.findings if f.signature == "triage"] == [[]]


# --- a queue's get over a Condition wait ------------------------------------------------------------

def test_a_pools_queue_get_over_a_condition_wait_is_the_queue(db):
    assert analyzed(real("tornado-sqlalchemy/tornado-sqlalchemy-88-1.txt"), db)[1] == "queue"


def test_a_condition_wait_under_no_queue_stays_a_condition(db):
    text = "\n".join(real("tornado-sqlalchemy/tornado-sqlalchemy-88-1.txt").splitlines()[:3]
                     + ['  File "/srv/app/worker.py", line 40, in wait_ready',
                        "    self._ready.wait(remaining)"])
    assert analyzed(text, db)[1] == "condition"


# --- pymongo's and py-amqp's socket waits ------------------------------------------------------------

def test_pymongos_wait_for_the_servers_reply_is_network(db):
    assert analyzed(real("fishtest/fishtest-2055-1.txt"), db)[1] == "network"


def test_pymongo_frames_off_the_socket_wait_are_not_network(db):
    lines = real("fishtest/fishtest-2055-1.txt").splitlines()
    # the stack without its socket wait (innermost: pymongo's pool handing back a reply)
    assert analyzed("\n".join(lines[:2]), db)[1] != "network"


def test_py_amqps_transport_read_is_network(db):
    assert analyzed(real("celery/celery-4895-1.txt"), db)[1] == "network"


def test_kombu_frames_without_py_amqps_transport_are_not_network(db):
    lines = [x for x in real("celery/celery-4895-1.txt").splitlines() if "amqp/" not in x]
    assert analyzed("\n".join(lines), db)[1] != "network"


# --- py-bt's "Waiting for the GIL" over a Python 2 lock acquire ----------------------------------

def test_py2_lock_acquire_under_the_gil_marker_is_the_lock(db):
    text = real("distributed/distributed-2446-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.state.gil is None and PY2_NOTE in t.notes
    assert analyzed(text, db)[1] == "lock"


def test_python3s_gil_marker_over_the_same_frames_is_kept(db):
    text = real("distributed/distributed-2446-1.txt").replace("python2.7", "python3.6")
    t = parse_text(text).processes[0].threads[0]
    assert t.state.gil == "waiting"
    assert analyzed(text, db)[1] == "gil"


# --- a multiprocessing child blocked on logging's lock, cut at Process.run ---------------------------

def test_child_on_loggings_lock_cut_at_process_run_is_the_inherited_lock(db):
    snap, _ = analyzed(real("distributed/distributed-2446-1.txt"), db)
    assert "fork-child-inherited-lock" in sigs(snap)


def test_the_same_wait_outside_a_multiprocessing_child_is_no_fork_finding(db):
    text = real("distributed/distributed-2446-1.txt").replace("multiprocessing/process.py", "myapp/runner.py")
    snap, _ = analyzed(text, db)
    assert "fork-child-inherited-lock" not in sigs(snap)
