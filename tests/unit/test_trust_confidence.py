"""Trust audit: a clause whose evidence is one symptom printed by several mechanisms answers below
0.8 (a lead), while the evidence only one mechanism prints keeps full confidence.  Each check is on
the real paste that showed a confident finding of another cause, and on the signature's own
positive samples (their finding must stay, at their confidence)."""

from __future__ import annotations

import pytest
from helpers import REPO, real_text, sample_with_header, text_verdict

HEARTBEAT = "pgnccl-heartbeat-watchdog-stuck"
GLOO = "gloo-recv-timeout"


def confidences(text: str, db) -> dict:
    snap, _ = text_verdict(text, db)
    return {f.signature: (f.confidence if f.confidence is not None else 1.0) for f in snap.findings}


def test_heartbeat_line_alone_is_a_lead_on_a_data_stall(db):
    """LlamaFactory#8549: the heartbeat line of a streaming-data stall; the line names no blocked call."""
    got = confidences(real_text("llamafactory/llamafactory-8549-1.txt"), db)
    assert HEARTBEAT in got and got[HEARTBEAT] < 0.8


@pytest.mark.parametrize("path", ["xdit/xdit-147-1.txt", "vlm-r1/vlm-r1-257-1.txt"])
def test_heartbeat_line_still_found_on_its_samples(db, path):
    """The class is still named (known_bug_right counts it) on the corpus entries that expect it."""
    got = confidences(real_text(path), db)
    assert HEARTBEAT in got and 0.5 <= got[HEARTBEAT] < 0.8


def test_heartbeat_sigtext_sample_keeps_the_finding(db):
    body, expect = sample_with_header(REPO / "tests/data/sigtext/heartbeat_llamafactory_8549.txt")
    assert expect == HEARTBEAT
    assert HEARTBEAT in confidences(body, db)


def test_gloo_wait_in_a_live_stack_is_a_lead(db):
    """SGLang#17941: a pipeline stage's scheduler waits in a Gloo recv from the previous stage; the
    stack shows the wait, not why the peer never sent (cause unknown)."""
    got = confidences(real_text("sglang/sglang-17941-1.txt"), db)
    assert GLOO in got and got[GLOO] < 0.8


@pytest.mark.parametrize("name", ["gloo_send_timeout_vnext_9.txt", "gloo_broadcast_timeout_kwola_2.txt"])
def test_gloo_timeout_message_keeps_full_confidence(db, name):
    """Gloo's own 'Timed out waiting Nms for recv/send' message is the specific evidence."""
    body, expect = sample_with_header(REPO / "tests/data/loglines/timeouts" / name)
    assert expect == GLOO
    got = confidences(body, db)
    assert got.get(GLOO, 0) >= 0.8
