"""The mechanism behind open general round 20's one miss (manifest-blind20.yaml), on the round's real
paste and near misses it must not claim: a C runtime's own lock routine named ``NAME_lock`` as the
innermost frame (gilectomy's ``gc_lock``, which waits on its futex inline, so no libc wait frame is
below it) is a lock wait; an unlock, a try-lock or a lock's release in the same place is not."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict


def test_gilectomy_gc_lock_is_a_lock_wait(db):
    snap, wait = text_verdict(real_text("gilectomy/gilectomy-11-1.txt"), db)
    assert wait == "lock"
    tri = [f for f in snap.findings if f.signature == "triage"][0]
    assert tri.triage.blame == "invoke_gc_callback"  # the caller that takes the lock


def _bt(first: str) -> str:
    return (
        f"#0  {first} () at Modules/gcmodule.c:1592\n"
        "#1  0x000000000055d4bf in invoke_gc_callback (generation=0) at Modules/gcmodule.c:1090\n"
        "#2  0x000000000055d705 in collect_with_callback (generation=0) at Modules/gcmodule.c:1131\n"
        "#3  0x000000000055e763 in _PyObject_GC_Alloc (use_calloc=0, basicsize=48) at Modules/gcmodule.c:1807\n"
    )


@pytest.mark.parametrize("name", ["gc_unlock", "try_lock", "release_lock", "init_lock", "PyThread_release_lock"])
def test_unlock_try_or_setup_of_a_lock_is_no_lock_wait(db, name):
    _, wait = text_verdict(_bt(name), db)
    assert wait != "lock"


def test_a_named_lock_routine_in_the_same_stack_is_a_lock_wait(db):
    _, wait = text_verdict(_bt("heap_lock"), db)
    assert wait == "lock"
