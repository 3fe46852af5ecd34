"""Fixes made after sealed rounds 81/82 were scored once (sealed-blind81/82.yaml, opened when scored), each
on the round's real paste and a near miss; not counted in the rounds' score: NCCL <= 2.12's shared-memory
lines (posix_fallocate out of space, a segment named without /dev/shm), and an exception line under an
engine's record prefix (vLLM's worker, its older "file.py:N]" form) answered, not refused; TensorFlow's
traced-function stack (``path.py:LINE function`` rows, each with its source line) read, and its collective
ops a collective's wait."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


@pytest.mark.parametrize("path", ["sealed81/nccl-342-1.txt", "sealed81/xgboost-5963-1.txt"])
def test_older_nccls_shared_memory_lines(db, path):
    text = real_text(path)
    assert "nccl-shm-segment-create-failed" in sigs(text_verdict(text, db)[0])
    near = "\n".join(x for x in text.splitlines() if "shm.h" not in x)
    try:
        assert "nccl-shm-segment-create-failed" not in sigs(text_verdict(near, db)[0])
    except InputError:
        pass  # nothing else in the paste: refused, as a text with no known line is


@pytest.mark.parametrize("path", ["sealed81/vllm-31480-1.txt", "sealed81/vllm-5094-1.txt"])
def test_an_exception_line_under_an_engines_record_prefix(db, path):
    text = real_text(path)
    assert text_verdict(text, db)[1] == "crashed"
    with pytest.raises(InputError):  # near miss: the same record with no exception in it
        text_verdict(text.replace("Error:", "note -"), db)


def test_tensorflows_traced_function_stack_rows_with_their_source_lines(db):
    """AutoGraph's ``path.py:LINE function`` rows, each with its source line under it (outermost first)."""
    text = real_text("sealed81/recommenders-274-1.txt")
    assert text_verdict(text, db)[1] == "collective"  # innermost: collective_ops.broadcast_send
    # near miss: the same rows ending in a variable's own __init__ (no collective op)
    near = "\n".join(text.splitlines()[:10])
    assert text_verdict(near, db)[1] != "collective"
