"""The mechanisms behind the misses of open dev round 33 (manifest-blind33.yaml, scored blind on
the tree it arrived at), each on the round's real paste and a near miss: MPICH's own functions under
an MPI call (a rank stopped in its progress engine read as a crash), a gdb frame a terminal cut at
its width with no indentation, vLLM's function-call trace (VLLM_TRACE_FUNCTION, refused), and the
TCPStore client's read timing out (c10d's waitForInput line)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_a_rank_in_mpichs_progress_engine_waits_in_the_collective(db):
    _snap, wait = text_verdict(real_text("mlcommons-storage/mlcommons-storage-172-1.txt"), db)
    assert wait == "collective"


def test_a_lone_stack_stopped_in_a_libraries_own_code_is_still_a_stop(db):
    # the same shape outside MPI: gdb's lone bt stopped in the program's code reads as a crash
    text = ("#0  0x00007f8791658967 in compute_step () from /usr/lib64/libsolver.so.1\n"
            "#1  0x00007f87916ff592 in solve () from /usr/lib64/libsolver.so.1\n"
            "#2  0x00007f87915e4ce3 in main () from /usr/bin/solver\n")
    assert text_verdict(text, db)[1] == "crashed"


def test_a_frame_the_terminal_cut_without_indentation_is_joined(db):
    text = real_text("pytorch/pytorch-22108-1.txt")
    f = parse_text(text).processes[0].threads[0].frames[0]
    assert f.function.startswith("std::__push_heap<") and "_Iter_comp_val<" in f.function
    assert (f.file or "").endswith("stl_heap.h") and f.line == 129
    assert text_verdict(text, db)[1] == "crashed"  # the lone bt stopped in the program's code


def test_the_next_record_is_never_glued_to_a_cut_frame():
    text = ("#0  0x00007f in foo (a=1,\n"
            "Continuing.\n"
            "#1  0x00007f in main () at x.c:9\n")
    frames = parse_text(text).processes[0].threads[0].frames
    assert len(frames) == 2 and "Continuing" not in frames[0].function and frames[1].function == "main"


def test_vllms_function_trace_gives_the_calls_not_returned(db):
    snap, _wait = text_verdict(real_text("vllm/vllm-4263-1.txt"), db)
    (t,) = snap.processes[0].threads
    assert [f.function for f in t.frames] == ["serialize"] and t.frames[0].line == 482


def test_a_trace_keeps_nested_calls_innermost_first():
    text = ("2024-04-23 11:07:10.1 Call to generate in /v/llm.py:100\n"
            "2024-04-23 11:07:10.2 Call to _run_engine in /v/llm.py:200\n"
            "2024-04-23 11:07:10.3 Call to step in /v/engine.py:300\n"
            "2024-04-23 11:07:10.4 Return from step in /v/engine.py:350\n"
            "2024-04-23 11:07:10.5 Call to wait_for in /v/worker.py:40\n")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames] == ["wait_for", "_run_engine", "generate"]


def test_a_sentence_naming_one_call_is_no_trace():
    with pytest.raises(InputError):
        parse_text("The hang starts after a Call to generate in /v/llm.py:100 (see my notes)\n")


def test_the_store_clients_read_timeout_is_the_rendezvous_wait(db):
    snap, wait = text_verdict(real_text("ms-swift/ms-swift-9188-1.txt"), db)
    assert "c10d-store-rendezvous-hang" in sigs(snap) and wait == "collective"
    gloo = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:136] Timed out waiting "
            "1800000ms for recv operation to complete\n")
    assert "c10d-store-rendezvous-hang" not in sigs(text_verdict(gloo, db)[0])
