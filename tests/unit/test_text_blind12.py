"""Issue 32, the mechanisms behind open round 12's misses (manifest-blind12.yaml), each on the round's
real paste and a near miss it must not claim: the line torch's DataLoader worker prints from its own
signal handler when it segfaults (the same death the main process reports as "killed by signal"),
and a traceback ``File`` line that a terminal cut after ``line N,``."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.unwrap import join_file_pieces
from hanganalyze.errors import InputError

real = real_text


def analyzed(text: str, db):
    return text_verdict(text, db)


def found(snap) -> dict:
    return {f.signature: f.confidence for f in snap.findings}


# --- a DataLoader worker's own segfault line --------------------------------------------------

@pytest.mark.parametrize("path", ["pytorch/pytorch-53894-1.txt", "pytorch/pytorch-4969-1.txt",
                                  "dmh-net/dmh-net-3-1.txt"])
def test_the_workers_segfault_line_is_a_dead_dataloader_worker(path, db):
    """53894 is a gdb run log with no frame at all: before, no reader recognised it (refused); the
    other two have the main process's traceback into the queue read, which said "waits on a queue"."""
    snap, wait = analyzed(real(path), db)
    assert found(snap).get("dataloader-worker-killed-by-signal", 0) >= 0.8
    assert wait == "crashed"


def test_a_workers_bus_error_line_stays_the_shared_memory_finding(db):
    text = ("ERROR: Unexpected bus error encountered in worker. "
            "This might be caused by insufficient shared memory (shm).\n")
    snap, wait = analyzed(text, db)
    assert "dataloader-worker-killed-by-signal" not in found(snap)
    assert "dataloader-worker-shm-exhausted" in found(snap)


def test_prose_about_a_segfault_in_a_worker_is_no_log():
    with pytest.raises(InputError):
        parse_text("we saw a segmentation fault in one worker\nand the run stopped\n")


# --- a File line cut after its line number ------------------------------------------------------

def test_a_file_line_cut_after_the_line_number_is_joined(db):
    text = real("pytorch/pytorch-45042-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert [f.function for f in t.frames][:3] == ["_try_wait", "wait", "main"]
    assert analyzed(text, db)[1] == "child"


def test_a_file_line_is_joined_only_with_its_in_part():
    assert join_file_pieces(['  File "/x/y.py", line 3,', " in f"]) == ['  File "/x/y.py", line 3, in f']
    assert join_file_pieces(['  File "/x/y.py", line 3,', "    x = 1"]) is None
