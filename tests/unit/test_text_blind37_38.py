"""Fixes from open dev rounds 37 and 38 (manifest-blind37.yaml, manifest-blind38.yaml), each on the round's
real paste and a near miss: CPython 3.14's C stack trace with its header cut from the paste; a Rust thread
that blocks on a future (tokio's block_on parks its own thread)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def test_a_314_c_stack_cut_below_its_header_is_the_crashing_threads(db):
    text = real_text("or-tools/or-tools-5025-1.txt")
    (t,) = parse_text(text).processes[0].threads
    assert t.current and t.frames[0].function == "gsignal" and t.frames[1].function == "abort"
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same rows under another word are no C stack of CPython's
    with pytest.raises(InputError):
        parse_text(text.replace('Binary file "', 'Source file "'))


def test_tokios_block_on_parks_the_thread_for_a_future(db):
    text = real_text("polars/polars-27969-1.txt")
    assert text_verdict(text, db)[1] == "future"
    # near miss: a tokio worker's own park (the multi-thread scheduler's) waits for tasks: no future
    worker = text.replace("tokio::runtime::park::Inner::park",
                          "tokio::runtime::scheduler::multi_thread::park::Inner::park")
    assert text_verdict(worker, db)[1] != "future"
