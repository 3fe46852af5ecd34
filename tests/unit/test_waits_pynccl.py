"""vLLM's and SGLang's ctypes binding of NCCL (``pynccl_wrapper.py`` / ``pynccl.py``): a thread whose
innermost Python frame is in it stands in one of NCCL's calls (a communicator's rendezvous, a
collective, a window registration that every rank enters together).  Round 28's sglang-11208 (a
py-spy dump of the overlap thread in ``ncclCommWindowRegister``) read as "runs"."""

from __future__ import annotations

from helpers import real_text, text_verdict


def test_a_thread_in_the_nccl_binding_waits_in_a_collective(db):
    _snap, wait = text_verdict(real_text("sglang/sglang-11208-1.txt"), db)
    assert wait == "collective"


def test_the_bindings_log_line_is_no_frame(db):
    # vLLM's start-up line names pynccl.py as the logging module: a log line, not a thread in NCCL
    _snap, wait = text_verdict(real_text("vllm/vllm-5484-1.txt"), db)
    assert wait != "collective"
