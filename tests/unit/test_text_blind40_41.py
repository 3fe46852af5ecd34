"""Fixes made right after sealed rounds 40 and 41 were scored and opened (sealed-blind40-41.score.md: they
do not count in that score), each on the round's real paste and a near miss: glibc's backtrace_symbols_fd
rows with no blank before the address and an executable's bare name; Qt's abort for a running QThread
destroyed; Apple's frameworks' failed assertion; a CUDA check's exception in vLLM's kernels; a DataLoader
worker that aborted on CUDA's initialisation error (CUDA set up before the fork)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_backtrace_symbols_fd_rows_without_a_blank(db):
    text = real_text("sage/sage-40988-1.txt")
    t = parse_text(text).processes[0].threads[0]
    names = [f.function for f in t.frames]
    assert "__lll_lock_wait_private" in names and "PyThread_allocate_lock" in names
    assert text_verdict(text, db)[1] == "lock"
    # near miss: a word in parentheses before a bracket is no frame row (prose with a path-less name)
    with pytest.raises(InputError):
        parse_text("see python3(the interpreter)[0x1] and make(1)[0x2] in the docs\nthanks(a lot)[0x3]\n")


@pytest.mark.parametrize("path,line,calm", [
    ("silx/silx-1909-1.txt", "QThread: Destroyed while thread is still running", "QThread: started"),
    ("pytorch/pytorch-78247-1.txt", "failed assertion `[MPSNDArray", "assertion passed `[MPSNDArray"),
    ("dynamo/dynamo-787-1.txt", "VLLM: Failed: /workspace/csrc/custom_all_reduce.cuh:368 'invalid argument'",
     "VLLM: Passed: /workspace/csrc/custom_all_reduce.cuh:368"),
])
def test_the_lines_an_abort_leaves(db, path, line, calm):
    text = real_text(path)
    assert line in text and text_verdict(text, db)[1] == "crashed"
    try:
        assert text_verdict(text.replace(line, calm), db)[1] != "crashed"
    except InputError:
        pass  # nothing known left: refused with what to capture


def test_a_worker_aborted_on_cudas_initialisation_error(db):
    text = real_text("pytorch/pytorch-21016-1.txt")
    f = next(f for f in text_verdict(text, db)[0].findings if f.signature == "cuda-init-before-fork")
    assert f.confidence < 0.8
    # near miss: the worker's C++ error of another kind is no CUDA set up before the fork
    other = text.replace("profiler_cuda.cpp:22: initialization error", "profiler_cuda.cpp:22: out of memory")
    assert "cuda-init-before-fork" not in sigs(text_verdict(other, db)[0])


def test_abort_under_glibcs_inlined_pthread_kill_frames(db):
    text = real_text("jaxlib-feedstock/jaxlib-feedstock-288-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same frames over a futex wait (no abort under them) are no crash
    waits = text.replace("__GI_abort ()", "__GI___futex_abstimed_wait ()").replace("abort.c:79", "futex.c:79")
    assert text_verdict(waits, db)[1] != "crashed"


def test_a_libraries_own_nccl_check_failure_ends_the_process(db):
    text = real_text("tensorrt-llm/tensorrt-llm-4238-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # NCCL's error returned up its group launch ("group.cc:242 -> 1") says the call failed on its own
    returns = "\n".join(x for x in text.splitlines() if not x.startswith("Failed, NCCL error")) + "\n"
    assert text_verdict(returns, db)[1] == "crashed"
    # near miss: NCCL's other INFO and WARN lines, without the failure line and the error returns, read
    # as the collective
    calm = "\n".join(x for x in returns.splitlines() if " -> " not in x) + "\n"
    assert text_verdict(calm, db)[1] != "crashed"


def test_a_lone_stack_stopped_in_a_librarys_unnamed_code(db):
    text = real_text("anaconda-recipes/anaconda-recipes-78-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same top in the C library is where a waiting thread stands
    qt = "/home/guilherme/miniconda2/envs/test_qt/lib/python3.5/site-packages/PyQt5/../../../libQt5Gui.so.5\n#1"
    libc = text.replace(qt, "/lib/x86_64-linux-gnu/libc.so.6\n#1", 1)
    assert text_verdict(libc, db)[1] != "crashed"
