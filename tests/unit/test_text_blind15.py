"""Open round 15 (ML dumps, manifest-blind15.yaml): the mechanisms behind its misses, each on the
round's real paste and a near miss it must not claim: UCX's backtrace with debug info (``N 0xADDR
fn()  file:line``, refused before); VS Code's Call Stack copy of a Linux process (refused); vLLM's V0
client polling its engine in vain (a log refused for naming nothing); torch's DataLoader worker fault
handler over the frame that faulted (read as the join it faulted in); c10's fatal-signal report of
every thread (read as a condition wait); and c10 raising a CUDA error from the NCCL watchdog's event
query (read as the collective it polls, and pgnccl-watchdog-sticky-cuda-error unknown without its
log line)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.cxxframes import ucx_frame
from hanganalyze.errors import InputError

STICKY = "pgnccl-watchdog-sticky-cuda-error"


def analyzed(text: str, db):
    snap, wait = text_verdict(text, db)
    return {f.signature: f.confidence for f in snap.findings}, wait


def functions(text: str):
    return [f.function for p in parse_text(text).processes for t in p.threads for f in t.frames]


# --- UCX's backtrace with debug info ----------------------------------------------------------------

def test_ucx_backtrace_with_debug_info_is_a_crash_with_its_frames(db):
    """torch.compile + DDP: UCX's handler printed "==== backtrace" and numbered frames with their
    source (the Triton launcher's gpuAssert setting a Python error); its "Caught signal" line is not
    in the paste, the header alone says the handler ran."""
    text = real_text("pytorch/pytorch-113740-1.txt")
    names = functions(text)
    assert names[:2] == ["__sigaction", "_Py_XINCREF"] and "gpuAssert.constprop.0" in names
    assert len(names) == 15
    assert analyzed(text, db)[1] == "crashed"


def test_a_ucx_frame_line_keeps_its_source_and_drops_unknown_ones():
    f = ucx_frame("5 0x0000000000001403 gpuAssert.constprop.0()  main.c:0")
    assert (f.function, f.file, f.address) == ("gpuAssert.constprop.0", "main.c", 0x1403)
    g = ucx_frame("0 0x0000000000042520 __sigaction()  ???:0")
    assert g.function == "__sigaction" and g.file is None
    assert ucx_frame("5 0x1403 not a frame") is None


def test_the_same_numbered_lines_without_ucx_header_are_frames_only_in_a_numbered_run():
    """Numbered "N 0xADDR fn()  file:line" lines are read under UCX's header, or without it (a paste's
    later chunk, open rounds 22/27) as a run of lines numbered one after another; a line alone is none."""
    text = real_text("pytorch/pytorch-113740-1.txt").replace("==== backtrace (tid:3341850) ====", "Steps:")
    assert "gpuAssert.constprop.0" in functions(text)
    one = "Steps:\n 5 0x0000000000001403 gpuAssert.constprop.0()  main.c:0\nthen it hangs\n"
    try:
        names = functions(one)
    except InputError:
        return
    assert "gpuAssert.constprop.0" not in names


# --- VS Code's Call Stack copy ------------------------------------------------------------------------

def test_vs_codes_call_stack_copy_of_a_linux_thread_is_read():
    """JORLDY's hang: three libpthread frames as VS Code copies them, ``lib.so.N!fn(args) (file:line)``."""
    snap = parse_text(real_text("jorldy/jorldy-28-1.txt"))
    frames = [f for t in snap.processes[0].threads for f in t.frames]
    assert [f.function for f in frames] == ["futex_abstimed_wait_cancelable", "do_futex_wait", "__new_sem_wait_slow"]
    assert frames[0].library == "libpthread.so.0" and frames[2].line == 181
    assert frames[1].file.endswith("nptl/sem_waitcommon.c")


def test_bang_lines_that_name_no_shared_object_are_not_vs_code_frames():
    """(Another reader may still take such a line as a ``function (file:line)`` frame, py-spy's
    flush-left form, since round 16: never split at the ``!`` as a VS Code module.)"""
    text = real_text("jorldy/jorldy-28-1.txt").replace("libpthread.so.0!", "libpthread!")
    try:
        snap = parse_text(text)
    except InputError:
        return
    frames = [f for p in snap.processes for t in p.threads for f in t.frames]
    assert frames and all(f.function.startswith("libpthread!") and not f.library for f in frames), frames


# --- vLLM's V0 client polling its engine ------------------------------------------------------------

def test_vllms_client_waiting_for_its_engine_is_a_log_worth_a_verdict(db):
    """Disaggregated prefill with TP=2: the client logs its empty polls of the engine process; the
    log is read (a triage), not refused as a log that names nothing."""
    found, _wait = analyzed(real_text("vllm/vllm-11247-1.txt"), db)
    assert "triage" in found


def test_the_same_vllm_log_without_the_polls_is_refused():
    text = "".join(line + "\n" for line in real_text("vllm/vllm-11247-1.txt").splitlines()
                   if "Waiting for output from MQLLMEngine" not in line)
    with pytest.raises(InputError):
        parse_text(text)


# --- torch's DataLoader worker fault handler --------------------------------------------------------

def test_a_worker_core_with_torchs_fault_handler_crashed_in_the_join(db):
    """A forked DataLoader worker's core: handler_SIGSEGV re-raises the fault it caught, and the
    frame under the signal frame (a pthread join of an LLVM thread) is where it faulted."""
    assert analyzed(real_text("triton/triton-3864-1.txt"), db)[1] == "crashed"


def test_the_join_alone_or_under_a_handler_no_fault_runs_is_a_join(db):
    text = real_text("triton/triton-3864-1.txt")
    kept = "".join(line + "\n" for line in text.splitlines()[6:])  # from "#5 __pthread_clockjoin_ex"
    assert analyzed(kept, db)[1] == "join"
    assert analyzed(text.replace("handler_SIGSEGV", "handler_SIGUSR2"), db)[1] == "join"


# --- c10's fatal-signal report ----------------------------------------------------------------------

def test_c10s_fatal_signal_report_of_every_thread_is_a_crash(db):
    """c10's FatalSignalHandler prints each thread under "SIGABRT(6), PID: p, Thread t:" with its own
    stack dumper on top: the process is dying of the signal, whatever the threads stood in."""
    assert analyzed(real_text("pytorch/pytorch-99218-1.txt"), db)[1] == "crashed"


def test_the_same_dumper_for_a_signal_that_is_no_fault_keeps_the_wait(db):
    text = real_text("pytorch/pytorch-99218-1.txt").replace("SIGABRT(6)", "SIGUSR2(12)")
    assert analyzed(text, db)[1] == "condition"


# --- c10 raising a CUDA error from the watchdog's event query ---------------------------------------

def test_the_watchdog_raising_a_cuda_error_is_the_sticky_error_and_a_crash(db):
    """kwen2501's quote: c10_cuda_check_implementation under WorkNCCL::finishedGPUExecutionInternal /
    isCompleted / watchdogHandler; no log line.  Below the confident threshold: the frames alone do
    not tell the sticky error from the capture-time query error."""
    found, wait = analyzed(real_text("pytorch/pytorch-126544-1.txt"), db)
    assert 0.5 <= found.get(STICKY, 0) < 0.8
    assert wait == "crashed"


def test_the_watchdog_polling_without_an_error_is_neither(db):
    text = real_text("pytorch/pytorch-126544-1.txt").replace(
        "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x118",
        "cudaEventQuery + 0x58")
    found, wait = analyzed(text, db)
    assert STICKY not in found
    assert wait == "collective"


def test_a_c10_error_raised_from_check_timeout_stays_the_collective(db):
    """The watchdog's timeout throws too (c10::Error from checkTimeout): that is the collective's."""
    text = ("frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x4d (0x7f1 in /x/libc10.so)\n"
            "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
            "std::ratio<1l, 1000l> > >) + 0x1e6 (0x7f2 in /x/libtorch_cuda.so)\n"
            "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x19d (0x7f3 in /x/libtorch_cuda.so)\n"
            "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x7f4 in /x/libtorch_cuda.so)\n")
    found, wait = analyzed(text, db)
    assert STICKY not in found
    assert wait == "collective"
