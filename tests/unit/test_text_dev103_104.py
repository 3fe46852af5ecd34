"""Fixes from open development rounds 103/104 (manifest-blind103/104.yaml), each on the round's real
paste and a near miss: WinDbg's illegal-instruction stop on an extension's instruction in a DLL's
initializers, HIP's "invalid device function", GGML_ABORT's printed stack under an address it could
not name, Condition.wait taking its lock back, a C extension's "Error: signal 11:" handler, and a
writer's per-thread chains in code quotes."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError

CPU = "cpu-instruction-set-unsupported"


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_windbgs_illegal_instruction_stop_on_an_avx_instruction(db):
    text = real_text("openvino/openvino-387-1.txt")
    snap, wait = text_verdict(text, db)
    assert CPU in sigs(snap) and wait == "crashed"
    # near miss: the same session stopped on an access violation is no missing instruction set
    near = text.replace("Illegal instruction - code c000001d", "Access violation - code c0000005")
    assert near != text and CPU not in sigs(text_verdict(near, db)[0])


def test_hips_invalid_device_function_is_a_build_without_the_gpus_code(db):
    text = real_text("pytorch/pytorch-132570-1.txt")
    assert "gpu-arch-not-in-build" in sigs(text_verdict(text, db)[0])
    near = text.replace("HIP error: invalid device function", "HIP error: out of memory")
    assert near != text and "gpu-arch-not-in-build" not in sigs(text_verdict(near, db)[0])


def test_ggml_abort_under_an_address_its_printer_could_not_name(db):
    text = real_text("inference-snaps/inference-snaps-337-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same printed stack with no abort in it (a profiler's sample) says no crash
    near = "\n".join(x for x in text.splitlines() if "ROCm error" not in x and "hipGetLastError" not in x
                     and "current device" not in x).replace("ggml_abort", "ggml_graph_compute")
    assert near != text and text_verdict(near, db)[1] != "crashed"


def test_condition_wait_taking_its_lock_back_waits_for_the_lock(db):
    text = real_text("dd-trace-py/dd-trace-py-6533-1.txt")
    assert text_verdict(text, db)[1] == "lock"
    # near miss: the same wait still inside the condition (its waiter lock) waits for a signal
    lines = text.splitlines()
    cut = next(i for i, x in enumerate(lines) if "_acquire_restore" in x and "File" in x)
    near = "\n".join(lines[:cut - 1] + ["      waiter.acquire()"]) + "\n"
    assert text_verdict(near, db)[1] == "condition"


def test_a_c_extensions_own_signal_handler_line(db):
    text = real_text("memray/memray-384-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    tri = next(f for f in snap.findings if f.signature == "triage")
    assert "segfault_handler" not in tri.summary  # blamed under the handler and its trampoline
    # near miss: SIGUSR1's number is no fatal signal (a program's own dump on request)
    near = text.replace("Error: signal 11:", "Error: signal 10:")
    assert near != text and text_verdict(near, db)[1] != "crashed"


def test_a_writers_per_thread_chains_in_code_quotes():
    procs = parse_text(real_text("scribadev/scribadev-195-1.txt")).processes
    threads = procs[0].threads
    assert [t.name for t in threads] == ["thread principal", "thread do faulthandler"]
    assert [f.function for f in threads[0].frames] == ["__psynch_cvwait", "PyThread_acquire_lock_timed",
                                                        "cancel_dump_traceback_later"]
    # near miss: two names in quotes are a sentence's "A calls B", no stack
    with pytest.raises(InputError):
        parse_text("- **main**: `foo -> bar` (it calls it)\n")
