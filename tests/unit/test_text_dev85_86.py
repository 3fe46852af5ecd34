"""Fixes from open development rounds 85/86 (manifest-blind85/86.yaml), each on the round's real paste
and a near miss: pdb's ``where``, vLLM's older shared-memory broadcast warning, libxcb-xlib's locking
assertion, abseil's banner of a signal sent from another process, the shell's localized "Segmentation
fault", and torch elastic's failure record of a rank's error (a raised exception, not a wait)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_pdbs_where_is_read_innermost_first_with_its_source_lines(db):
    text = real_text("pebble/pebble-69-1.txt")
    proc = parse_text(text).processes[0]
    frames = proc.threads[0].frames
    assert [f.function for f in frames] == ["chunk_result", "<genexpr>", "next", "<module>"]
    assert frames[0].source == "return future.result()"
    assert text_verdict(text, db)[1] == "future"


def test_pdbs_own_frames_over_a_breakpoint_are_dropped():
    text = "\n".join([
        "(Pdb) where",
        "  /srv/app/main.py(10)<module>()",
        "-> run()",
        "  /srv/app/main.py(5)run()",
        "-> breakpoint()",
        "> /usr/lib/python3.11/bdb.py(94)trace_dispatch()",
        "-> return self.dispatch_line(frame)",
    ])
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames] == ["run", "<module>"]


def test_a_frame_like_line_without_pdbs_source_line_is_no_pdb_stack():
    with pytest.raises(InputError):  # near miss: "f(1)g()" prose, no "-> " source lines
        parse_text("see run(3)main() and then ok(4)done()\n")


def test_vllms_older_broadcast_warning_from_a_worker_is_the_readers_side(db):
    """The same words on both sides of the ring buffer: a worker's line (its log prefix) waits for the
    engine's next step (idle), the engine's own line waits for a worker (the signature)."""
    text = real_text("vllm/vllm-7454-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "idle" and "vllm-shm-broadcast-reader-stuck" not in sigs(snap)
    engine = text.replace("(VllmWorkerProcess pid=3253) ", "")
    assert engine != text and "vllm-shm-broadcast-reader-stuck" in sigs(text_verdict(engine, db)[0])
    with pytest.raises(InputError):  # near miss: no such warning
        text_verdict(text.replace("No available block found", "A block was found"), db)


def test_libxcb_xlibs_locking_assertion(db):
    text = real_text("pychess/pychess-316-1.txt")
    snap, wait = text_verdict(text, db)
    assert "x11-client-used-from-threads" in sigs(snap) and wait == "crashed"
    near = text.replace("Locking assertion failure.", "Lock released.").replace("_XCBUnlockDisplay: Assertion",
                                                                                 "_XCBUnlockDisplay: note")
    assert near != text
    with pytest.raises(InputError):  # the frames are a bug tracker's mangled rows: nothing else to read
        text_verdict(near, db)


def test_abseils_banner_of_a_signal_from_another_process_is_an_input(db):
    text = real_text("xla/xla-9502-1.txt")
    assert text_verdict(text, db)[0].findings  # not refused
    with pytest.raises(InputError):
        text_verdict(text.replace("*** SIGTERM received by PID", "SIGTERM handled for PID"), db)


def test_the_shells_localized_segmentation_fault(db):
    text = real_text("pychess/pychess-881-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    assert text_verdict(text.replace("Szegmentálási hiba", "Kilépés"), db)[1] != "crashed"


def test_torch_elastics_failure_record_of_a_ranks_error_is_a_crash(db):
    text = real_text("pytorch/pytorch-148976-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same traceback printed on its own (a Ctrl-C'd run cut above its line) is the wait
    body = text[text.index("Traceback (most recent call last):"):]
    assert text_verdict("^C" + body, db)[1] == "collective"
