"""Crashes whose paste shows no crashing thread (rounds 27-29, opened: four macOS crash report
chunks and an Objective-C uncaught exception read as "runs", a lock or the GIL): macOS writes its
crash report (ReportCrash) only for a process that crashed, so a chunk of one says the process
crashed even where the thread marked "Crashed" is cut away; no thread is named for it.  An uncaught
exception's abort line (Cocoa's, libc++abi's) is a crash line like glibc's "terminate called"."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.errors import InputError
from hanganalyze.loglines import REPORT_NOTE


def triage(snap):
    return next(f for f in snap.findings if f.signature == "triage")


# --- a chunk of ReportCrash's report: its rows (tab before the address) or its thread headers ----

def test_deep_rows_of_a_crash_report_say_the_process_crashed_and_name_no_thread(db):
    snap, wait = text_verdict(real_text("pyface/pyface-245-1.txt"), db)  # rows 199-215, no header
    t = triage(snap)
    assert wait == "crashed" and t.triage.about == [] and REPORT_NOTE in snap.processes[0].notes
    assert "does not show which thread crashed" in t.summary and t.confidence <= 0.5


def test_report_threads_that_wait_are_not_the_crash(db):
    # Blender's NSEventThread and a Python thread in take_gil: the crashed thread is cut away
    snap, wait = text_verdict(real_text("radeonprorender-blender/radeonprorender-626-1.txt"), db)
    assert wait == "crashed" and triage(snap).triage.about == []
    assert {r.wait for r in triage(snap).triage.threads} >= {"gil"}  # the threads are still listed


def test_a_report_whose_crashed_thread_is_shown_names_it(db):
    text = ("Exception Type:        EXC_BAD_ACCESS (SIGSEGV)\nCrashed Thread:        1\n\n"
            + real_text("spyder/spyder-11068-1.txt").replace("Thread 53:", "Thread 1 Crashed:"))
    snap, wait = text_verdict(text, db)
    assert wait == "crashed" and triage(snap).triage.about != []


def test_backtrace_symbols_rows_without_the_reports_tab_are_no_report(db):
    # a program's own backtrace_symbols() print (spaces, no tab; frame 0 first): no crash report
    text = "".join("%d   libfoo.dylib                        0x00000001000%05x %s + %d\n" % (i, i * 64, fn, i)
                   for i, fn in enumerate(["__psynch_cvwait", "_pthread_cond_wait", "PyThread_acquire_lock_timed",
                                           "acquire_timed", "lock_PyThread_acquire_lock"]))
    snap, wait = text_verdict(text, db)
    assert REPORT_NOTE not in snap.processes[0].notes and wait != "crashed"


def test_a_report_of_a_kill_from_outside_is_not_read_as_a_crash(db):
    # EXC_CRASH (SIGKILL): the system ended the process (a watchdog, a force quit), a hang included
    text = "Exception Type:        EXC_CRASH (SIGKILL)\n\n" + real_text("spyder/spyder-11068-1.txt")
    snap, wait = text_verdict(text, db)
    assert REPORT_NOTE in snap.processes[0].notes and wait != "crashed"


# --- an uncaught exception's abort line -----------------------------------------------------

def test_an_uncaught_nsexception_is_a_crash(db):
    _snap, wait = text_verdict(real_text("evilosx/evilosx-91-1.txt"), db)
    assert wait == "crashed"


def test_libcxxabi_uncaught_exception_is_a_crash_and_a_caught_one_is_not(db):
    # a program's own backtrace_symbols() print of the throwing thread (spaces, no tab: no report)
    stack = "".join("%d   libworker.dylib                     0x000000010a0%05x %s + %d\n" % (i, i * 64, fn, 8 * i + 4)
                    for i, fn in enumerate(["__cxa_throw", "_ZN6Worker4stepEv", "_ZN6Worker3runEv",
                                            "_pthread_start", "thread_start"]))
    line = "libc++abi: terminating due to uncaught exception of type std::runtime_error: boom\n"
    assert text_verdict(line + stack, db)[1] == "crashed"
    near = "2026-01-02 10:11:12 worker: caught exception of type std::runtime_error, retrying\n" + stack
    assert text_verdict(near, db)[1] != "crashed"


def test_an_abort_line_alone_is_read_and_a_caught_exception_line_is_not(db):
    # the line without its stack: still a crash's line, no refusal
    for line in ("2019-05-29 02:14:25.552 Python[78281:6999445] *** Terminating app due to uncaught exception "
                 "'NSInternalInconsistencyException', reason: 'NSWindow drag regions should only be invalidated'",
                 "libc++abi: terminating due to uncaught exception of type std::runtime_error: boom"):
        assert text_verdict(line + "\n", db)[1] == "crashed"
    with pytest.raises(InputError):
        text_verdict("2026-01-02 10:11:12 worker: caught exception of type std::runtime_error, retrying\n", db)


def test_faulthandlers_timeout_header_alone_is_read(db):
    # dump_traceback_later's header (pytest's faulthandler_timeout) with its dump cut away: no refusal
    snap, _wait = text_verdict("Timeout (0:05:00)!\n", db)
    assert any(f.signature == "triage" for f in snap.findings)


@pytest.mark.parametrize("line", [
    "Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)",  # PyCharm
    "Process finished with exit code -1073741819 (0xC0000005)",  # PyCharm on Windows: an access violation
    "fish: Job 1, 'python x.py' terminated by signal SIGSEGV (Address boundary error)",
    "[1]    12345 segmentation fault (core dumped)  python train.py",  # zsh's job line
    "terminate called recursively",
    "corrupted size vs. prev_size",
    "*** stack smashing detected ***: terminated",
])
def test_a_fatal_line_alone_is_a_crash(db, line):
    assert text_verdict(line + "\n", db)[1] == "crashed"


def test_a_kill_or_a_clean_exit_is_no_crash(db):
    # SIGKILL: the OOM killer or a user ended it, whatever it was doing; exit code 0: it ended well
    assert text_verdict("Process finished with exit code 137 (interrupted by signal 9: SIGKILL)\n", db)[1] != "crashed"
    with pytest.raises(InputError):
        text_verdict("Process finished with exit code 0\n", db)
