"""Fixes from open development rounds 109/110 (manifest-blind109/110.yaml), each on the round's real
paste and a near miss: OpenMP's fatal error line, glibc's assert() message, glibc's abort of a forced
unwind a catch-all swallowed, and threading's header over a traceback the paste cut."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def test_openmps_fatal_error_line_is_a_crash(db):
    assert text_verdict(real_text("mxnet/mxnet-10856-1.txt"), db)[1] == "crashed"
    with pytest.raises(InputError):  # near miss: OpenMP's informational line is no error
        parse_text("OMP: Info #276: omp_set_nested routine deprecated, please use omp_set_max_active_levels\n")


def test_glibcs_assert_message_is_a_crash(db):
    assert text_verdict(real_text("cpython/cpython-131012-1.txt"), db)[1] == "crashed"
    with pytest.raises(InputError):  # near miss: a sentence about an assertion is no assert() report
        parse_text("the Assertion `x' failed check is in pystate.c, see line 345\n")


def test_a_swallowed_forced_unwind_is_the_finalization_class(db):
    snap, wait = text_verdict(real_text("pyqwest/pyqwest-164-1.txt"), db)
    assert "python-finalization-gil-reacquire" in [f.signature for f in snap.findings] and wait == "crashed"
    near, _ = text_verdict("FATAL: kernel too old\nFatal Python error: Aborted\n", db)
    assert "python-finalization-gil-reacquire" not in [f.signature for f in near.findings]


def test_threadings_header_over_a_cut_traceback_is_an_uncaught_exception(db):
    text = real_text("mxnet/mxnet-13126-1.txt")
    snap, wait = text_verdict(text, db)
    tri = next(f for f in snap.findings if f.signature == "triage")
    assert wait == "crashed" and "its line is cut" in tri.summary and "that thread ended" in tri.summary
    # near miss: the same traceback without threading's header: raised (its line cut), nothing says uncaught
    near = text.replace("Exception in thread Thread-5:\n", "")
    assert near != text
    tri = next(f for f in text_verdict(near, db)[0].findings if f.signature == "triage")
    assert "nothing caught" not in tri.summary and "that thread ended" not in tri.summary
