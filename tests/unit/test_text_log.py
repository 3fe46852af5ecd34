"""``--input-format log``: a plain job log reaches the message-level signatures; garbage does not."""

from __future__ import annotations

import pytest

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError

WATCHDOG = (
    "[rank1]:[E1121 10:02:11.123 ProcessGroupNCCL.cpp:577] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
    "600094 milliseconds before timing out.\n"
    "[rank1]: training step 41 done\n"
)


def test_hang_log_is_read_without_the_flag():
    """A watchdog log holds no frame but is an input: detected, not refused (issue 22.2)."""
    snap = parse_text(WATCHDOG, None)
    assert any("Watchdog caught" in m for m in snap.processes[0].messages)


def test_text_with_neither_frames_nor_known_lines_is_refused():
    with pytest.raises(InputError, match="--input-format log"):
        parse_text("[rank0]: epoch 3 loss 0.12\n[rank0]: saved checkpoint\n", None)


def test_watchdog_message_broken_by_a_paste_is_joined():
    broken = WATCHDOG.replace("Timeout(ms)=600000) ran for", "Timeout(ms)=600000)\n[rank1]: ran for").replace(
        "NumelIn=1, NumelOut=1,", "NumelIn=1,\n[rank1]:  NumelOut=1,")
    snap = pipeline.analyze(parse_text(broken, None), pipeline.load_signature_db())
    assert snap.findings[0].signature == "pgnccl-collective-timeout"
    assert any("ran for 600094 milliseconds" in m and "WorkNCCL(" in m for m in snap.processes[0].messages)


def test_plain_log_matches_message_signature_with_the_flag():
    snap = parse_text(WATCHDOG, "log")
    assert [p.label for p in snap.processes] == ["rank1"]
    assert any("Watchdog caught collective operation timeout" in m for m in snap.processes[0].messages)
    snap = pipeline.analyze(snap, pipeline.load_signature_db())
    assert [f.signature for f in snap.findings] == ["pgnccl-collective-timeout", "triage"]
    assert snap.findings[1].triage.wait == "collective"


def test_healthy_log_gives_no_finding():
    snap = parse_text("[rank0]: epoch 3 loss 0.12\n[rank0]: saved checkpoint\n", "log")
    assert pipeline.analyze(snap, pipeline.load_signature_db()).findings == []


def test_empty_log_is_an_error():
    with pytest.raises(InputError):
        parse_text("   \n\n", "log")


def test_fatal_error_wrapped_before_an_objects_repr_is_joined():
    from hanganalyze.acquire.text.log import join_broken

    lines = ["Fatal Python error: _enter_buffered_busy: could not acquire lock for",
             "<_io.BufferedWriter name='<stderr>'> at interpreter shutdown, possibly due to", "daemon threads"]
    assert join_broken(lines) == [" ".join(lines)]
    # a marker line after a finished message is not its continuation
    assert join_broken(["Fatal Python error: Aborted", "<no Python frame>"]) == ["Fatal Python error: Aborted",
                                                                                  "<no Python frame>"]
