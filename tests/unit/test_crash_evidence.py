"""Issue 32: a dump that holds positive evidence of a crash reads as crashed, whatever wait its frames
show (``analyze/crashframes.py``'s ``proven``); a dump without that evidence keeps its wait.  Each
mechanism on its real sample (tests/data/realworld/) and a near miss that changes the one thing the
mechanism reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.crashframes import fatal_line
from hanganalyze.pipeline import analyze, load_signature_db

CORPUS = Path(__file__).resolve().parents[1] / "data" / "realworld"


@pytest.fixture(scope="module")
def db():
    return load_signature_db()


def _wait(text: str, db) -> str:
    snap = analyze(parse_text(text), db)
    return next(f for f in snap.findings if f.signature == "triage").triage.wait


def test_a_fatal_signal_handler_on_the_stack_is_a_crash(db):
    # UCX's error signal handler prints a backtrace; glibc's backtrace() dlopens libgcc_s: the
    # innermost frames are the loader's, the thread is crashing
    text = (CORPUS / "forpy" / "forpy-32-1.txt").read_text()
    assert _wait(text, db) == "crashed"


def test_near_miss_a_sigint_handler_over_the_same_stack_keeps_its_wait(db):
    text = (CORPUS / "forpy" / "forpy-32-1.txt").read_text()
    lines = [ln for ln in text.splitlines() if "libucs" not in ln]
    lines.insert(-1, "#14 0x00002aaab8051f02 in signal_handler (sig_num=2) at ./Modules/signalmodule.c:347")
    assert _wait("\n".join(lines) + "\n", db) == "loader-lock"


def test_near_miss_a_profilers_handler_over_a_lock_wait_keeps_the_lock(db):
    # vmprof's SIGPROF handler over <signal handler called>: the process still waits for the lock
    text = (CORPUS / "vmprof" / "vmprof-python-116-1.txt").read_text()
    assert "<signal handler called>" in text
    assert _wait(text, db) == "lock"


def test_near_miss_a_handler_inside_the_wait_it_ended_keeps_the_wait(db):
    # faulthandler over abort over NCCL's watchdog: the collective's timeout aborted the process, the
    # wait lies outside the handler (the cause), not inside it (the handler's own doing)
    text = """#0  0x00007f in faulthandler_fatal_error (signum=6) at ./Modules/faulthandler.c:341
#1  <signal handler called>
#2  0x00007f in raise () from /lib/x86_64-linux-gnu/libc.so.6
#3  0x00007f in abort () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f in c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<long>) () from /opt/t/libtorch_cuda.so
#5  0x00007f in c10d::ProcessGroupNCCL::watchdogHandler() () from /opt/torch/lib/libtorch_cuda.so
#6  0x00007f in c10d::ProcessGroupNCCL::ncclCommWatchdog() () from /opt/torch/lib/libtorch_cuda.so
"""
    assert _wait(text, db) == "collective"


_HANDLER_OVER_LOCK = """Thread 1 (Thread 0x7f0 (LWP 10)):
#0  0x00007f1 in __lll_lock_wait (futex=0x7f5, private=0) at lowlevellock.c:52
#1  0x00007f2 in __GI___pthread_mutex_lock (mutex=0x7f5) at pthread_mutex_lock.c:80
#2  0x00007f3 in malloc () from /lib/x86_64-linux-gnu/libc.so.6
#3  0x00007f4 in HANDLER from /usr/lib/libhandler.so
#4  <signal handler called>
#5  0x00007f6 in Model::step (this=0x1) at model.cc:40
#6  0x00007f7 in main () at main.cc:10
"""


@pytest.mark.parametrize("handler", [
    "google::(anonymous namespace)::FailureSignalHandler(int, siginfo_t*, void*) ()",
    "c10::FatalSignalHandler::fatalSignalHandler(int) ()", "faulthandler_fatal_error (signum=11)"])
def test_a_lock_taken_inside_a_fatal_handler_is_a_crash(db, handler):
    # malloc's lock taken again inside the handler of a segfault that came while malloc held it
    assert _wait(_HANDLER_OVER_LOCK.replace("HANDLER", handler), db) == "crashed"


def test_near_miss_a_stack_dumping_handler_over_the_same_lock_keeps_the_lock(db):
    # c10's SIGUSR2 handler dumps every thread's stack on request: no crash
    text = _HANDLER_OVER_LOCK.replace("HANDLER", "c10::FatalSignalHandler::stacktraceSignalHandler(bool) ()")
    assert _wait(text, db) == "lock"


def test_a_windows_exception_code_is_a_crash(db):
    text = (CORPUS / "comfy-kitchen" / "comfy-kitchen-32-1.txt").read_text()
    assert _wait(text, db) == "crashed"


def test_near_miss_a_ctrl_c_exit_code_is_no_crash(db):
    text = (CORPUS / "comfy-kitchen" / "comfy-kitchen-32-1.txt").read_text()
    assert "0xC0000005" in text
    # (the main thread is asyncio's loop, idle in select under run_until_complete; the other one runs)
    assert _wait(text.replace("0xC0000005", "0xC000013A"), db) not in ("crashed", None)


def test_a_fatal_python_error_outranks_the_lock_the_dumped_thread_waits_for(db):
    text = (CORPUS / "sentry-python" / "sentry-python-877-1.txt").read_text()
    assert _wait(text, db) == "crashed"


def test_near_miss_the_same_dump_without_its_fatal_error_keeps_the_lock(db):
    text = (CORPUS / "sentry-python" / "sentry-python-877-1.txt").read_text()
    kept = "\n".join(ln for ln in text.splitlines() if not ln.startswith("Fatal Python error"))
    assert _wait(kept + "\n", db) == "lock"


@pytest.mark.parametrize("line", [
    "Fatal Python error: Segmentation fault", "Windows fatal exception: access violation",
    "Exception Code: 0xC00000FD", "ExceptionCode: c0000005 (Access violation)",
    "Segmentation fault (core dumped)", "*** SIGSEGV received at time=1700000000 on cpu 3 ***",
    "Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)",
    "==123==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010"])
def test_fatal_lines(line):
    assert fatal_line([line])


@pytest.mark.parametrize("line", [
    "installed a SIGSEGV handler", "Exception Code: 0xC000013A", "Exception Code: 0x80000003",
    "Caught signal 2 (Interrupt)", "DEBUG: atexit: got shutdown signal", "Windows fatal exception: code 0x406d1388",
    "WARNING: Fatal Python errors are printed by faulthandler"])
def test_near_miss_lines_that_only_mention_a_crash(line):
    assert not fatal_line([line])
