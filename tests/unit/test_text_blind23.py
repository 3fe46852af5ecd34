"""Open round 23 (ML dumps, manifest-blind23.yaml): the mechanisms behind its misses, each on the
round's real paste and a near miss it must not claim: the CUDA runtime's illegal-address text in the
wordings other than torch's "CUDA error: ..." (a custom kernel's CUDACHECK, NCCL's "Cuda failure",
the driver API's error name), and SGLang's scheduler watchdog known by its py-spy dump of the
schedulers when the timeout line itself is not in the paste."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

IMA = "cuda-illegal-memory-access"
SGLANG_WATCHDOG = "sglang-scheduler-watchdog-timeout"
CUSTOM_AR_LINE = ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:1735 "
                  "'an illegal memory access was encountered'")


def analyzed(text: str, db):
    snap, wait = text_verdict(text, db)
    return {f.signature: f.confidence for f in snap.findings}, wait


# --- the illegal memory access, whatever wrapper reports it --------------------------------------

def test_a_custom_all_reduce_cudacheck_reporting_an_illegal_address_is_the_illegal_access(db):
    """vLLM's custom all-reduce (a vLLM fork here) checks its CUDA calls with its own macro, which
    prints "Cuda error FILE:LINE 'MSG'": the message is the runtime's for cudaErrorIllegalAddress."""
    found, wait = analyzed(real_text("1cat-vllm/1cat-vllm-539-1.txt"), db)
    assert found.get(IMA, 0) >= 0.8
    assert wait == "crashed"


@pytest.mark.parametrize("line", [
    "misc/argcheck.cc:39 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'",
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA_ERROR_ILLEGAL_ADDRESS: "
    "an illegal memory access was encountered",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
])
def test_the_other_wordings_of_the_same_error_match(line, db):
    text = real_text("1cat-vllm/1cat-vllm-539-1.txt").replace(CUSTOM_AR_LINE, line)
    found, _ = analyzed(text, db)
    assert found.get(IMA, 0) >= 0.8, line


def test_another_cuda_error_from_the_same_check_is_not_the_illegal_access(db):
    text = real_text("1cat-vllm/1cat-vllm-539-1.txt").replace(
        "'an illegal memory access was encountered'", "'invalid argument'")
    found, _ = analyzed(text, db)
    assert IMA not in found


def test_the_watchdog_frames_without_the_error_text_stay_the_watchdogs_sticky_error(db):
    """lmdeploy-3258: the NCCL watchdog's CUDA check aborts, but the paste cuts the error's text; which
    CUDA error it was is not in the text, so the watchdog's own signature, not the illegal access."""
    found, wait = analyzed(real_text("lmdeploy/lmdeploy-3258-1.txt"), db)
    assert IMA not in found
    assert found.get("pgnccl-watchdog-sticky-cuda-error", 0) >= 0.7
    assert wait == "crashed"


# --- SGLang's scheduler watchdog, by its py-spy dump ----------------------------------------------

def test_the_watchdogs_py_spy_dump_of_a_scheduler_is_the_watchdog(db):
    """sglang-4257: the log line heading the dump is the watchdog's (pyspy_dump_schedulers runs when a
    forward batch overran watchdog_timeout); the stuck scheduler waits for its forward thread."""
    found, wait = analyzed(real_text("sglang/sglang-4257-1.txt"), db)
    assert 0.5 <= found.get(SGLANG_WATCHDOG, 0) < 0.8
    assert wait == "queue"


def test_the_watchdogs_failed_dump_is_the_watchdog_too(db):
    text = real_text("sglang/sglang-7783-1.txt").replace(
        "[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)\n", "")
    assert "watchdog_timeout" not in text
    found, _ = analyzed(text, db)
    assert found.get(SGLANG_WATCHDOG, 0) >= 0.5


def test_a_users_own_py_spy_dump_of_a_scheduler_is_not_the_watchdog(db):
    """The same dump taken by hand (py-spy dump --pid) has no watchdog line: the stuck scheduler, not
    the watchdog's verdict."""
    text = real_text("sglang/sglang-4257-1.txt").replace(
        "[2025-03-10 16:29:01 TP0] Pyspy dump for PID 2696393:\n", "")
    found, wait = analyzed(text, db)
    assert SGLANG_WATCHDOG not in found
    assert wait == "queue"


# --- vLLM's engine stats reporting no progress while requests run --------------------------------

def test_engine_stats_with_no_token_while_a_request_runs_are_a_stall_report(db):
    """vllm-40969: three of the front end's periodic stats lines, the last with no prompt and no
    generated token in the interval while one request runs: a log worth a verdict, not refused."""
    snap, wait = text_verdict(real_text("vllm/vllm-40969-1.txt"), db)
    assert any(f.signature == "triage" for f in snap.findings)
    assert wait not in ("crashed",)


@pytest.mark.parametrize("line", [
    "INFO 05-16 13:12:16 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 0.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.3%",
    "INFO 05-16 13:12:16 metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.4%",
])
def test_vllms_own_wording_of_the_same_stats_is_known(line, db):
    snap, _ = text_verdict(line + "\n", db)
    assert any(f.signature == "triage" for f in snap.findings)


@pytest.mark.parametrize("line", [
    "07:46:57  Engine 000: prompt tp 49.0, generation tp 43.5, Running: 1 reqs, Waiting: 0",
    "INFO 05-16 13:12:16 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%",
])
def test_a_progressing_or_idle_engine_is_no_stall_report(line, db):
    """Tokens generated, or nothing to run (an idle server logs zeros too): no hang line, refused."""
    from hanganalyze.errors import InputError

    with pytest.raises(InputError):
        text_verdict(line + "\n", db)


# --- the engine's broadcast wait beside a worker's CUDA fault ------------------------------------

SHM = "vllm-shm-broadcast-reader-stuck"


def test_a_workers_cuda_fault_in_the_log_is_the_finding_not_the_engines_wait(db):
    """1cat-vllm-539: the engine waits for its workers' reads, then a worker's custom all-reduce hits
    an illegal address and the engine fails to start: the fault is the cause, the wait its echo."""
    found, _ = analyzed(real_text("1cat-vllm/1cat-vllm-539-1.txt"), db)
    assert found.get(IMA, 0) >= 0.8
    assert SHM not in found


def test_the_engines_wait_alone_is_still_the_reader_stuck(db):
    """spark-vllm-docker-348: the same wait with no fault in the log stays the signature's."""
    found, _ = analyzed(real_text("spark-vllm-docker/spark-vllm-docker-348-1.txt"), db)
    assert found.get(SHM, 0) >= 0.5


# --- a dump whose thread headers survive but whose frames do not ---------------------------------

def test_an_interleaved_faulthandler_dump_gets_a_verdict(db):
    """sglang-6763: several processes wrote their faulthandler dumps to one stderr at once; no frame
    reads, but the '(most recent call first):' header is a stack dump's, so a triage, no wait."""
    snap, wait = text_verdict(real_text("sglang/sglang-6763-1.txt"), db)
    assert [f.signature for f in snap.findings] == ["triage"]
    assert wait == "runs"


def test_a_python_traceback_header_is_not_a_dump_header(db):
    """"(most recent call last)" is any exception's traceback: a log of it alone stays refused."""
    from hanganalyze.errors import InputError

    with pytest.raises(InputError):
        text_verdict("worker 3 failed: Traceback (most recent call last): see above\n", db)
