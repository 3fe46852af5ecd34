"""Waits the corpus's own dumps showed and the readers missed, each on its real paste and a near miss:
a headerless pystack paste whose common indent a paste removed (its frames then had none), and the
innermost Python line that calls a collective through its module (``torch.distributed.broadcast``)."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def test_a_headerless_pystack_paste_keeps_every_frame_and_its_collective_line(db):
    text = real_text("sealed77/returnn-1621-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames[:3]] == ["eval_model", "_check_missing_eval", "train"]
    assert frames[0].source == "torch.distributed.broadcast(_has_data, src=0)"
    assert text_verdict(text, db)[1] == "collective"
    # near miss: the same stack standing on a line that asks the rank's number (no peer waits)
    near = text.replace("torch.distributed.broadcast(_has_data, src=0)", "rank = torch.distributed.get_rank()")
    assert near != text and text_verdict(near, db)[1] != "collective"
