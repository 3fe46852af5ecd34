"""Fixes from open dev round 39 (manifest-blind39.yaml), each on the round's real paste and a near miss:
DeepSpeed ZeRO's gradient-reduction epilogue is the collective's wait; torch raising a peer's closed
connection ("Broken pipe") ends the process; threading._shutdown's own error is no exit join; a forced
unwind's terminate with its source cut reads as the finalization GIL abort (at low confidence); vLLM's front
end waiting for its engine-core processes is a child wait."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_zeros_gradient_reduction_epilogue_waits_for_the_collective(db):
    text = real_text("ms-swift/ms-swift-1817-1.txt")
    assert text_verdict(text, db)[1] == "collective"
    # near miss: the same host sync under the program's own step is the GPU's wait
    own = text.replace("independent_gradient_partition_epilogue", "log_metrics").replace(
        "overlapping_partition_gradients_reduce_epilogue", "after_step").replace("allreduce_gradients", "step_end")
    assert text_verdict(own, db)[1] == "gpu"


def test_a_collective_raising_broken_pipe_ends_the_process(db):
    text = real_text("efficient-imagenet/efficient-imagenet-2-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same broadcast raising another error is read by its frames
    assert text_verdict(text.replace("RuntimeError: Broken pipe", "RuntimeError: bad shape"), db)[1] != "crashed"


def test_threading_shutdowns_own_error_is_no_exit_join(db):
    text = real_text("lollypop/lollypop-120-1.txt")
    assert "python-shutdown-nondaemon-threads" not in sigs(text_verdict(text, db)[0])
    # near miss: _shutdown standing in its join is the exit join
    joined = text.replace('''  File "/usr/lib/python3.4/threading.py", line 1019, in _delete
    del _active[get_ident()]
KeyError: 140341135771392''', '''  File "/usr/lib/python3.4/threading.py", line 1064, in join
    self._wait_for_tstate_lock()
  File "/usr/lib/python3.4/threading.py", line 1080, in _wait_for_tstate_lock
    elif lock.acquire(block, timeout):
KeyboardInterrupt''').replace("    _main_thread._delete()", "    t.join()")
    assert "python-shutdown-nondaemon-threads" in sigs(text_verdict(joined, db)[0])


def test_a_forced_unwinds_terminate_cut_above_its_source(db):
    text = real_text("duckdb/duckdb-13904-1.txt")
    snap = text_verdict(text, db)[0]
    f = next(f for f in snap.findings if f.signature == "python-finalization-gil-reacquire")
    assert f.confidence < 0.8
    # near miss: the program's own pthread_exit in view is its unwind, not the interpreter's
    own = text.rstrip("\n") + "\n#8  0x00007f72cf1f1234 in __pthread_unwind () from /lib/libc.so.6\n" \
        "#9  0x00007f72cf1f1300 in pthread_exit () from /lib/libc.so.6\n#10 0x0000555555555555 in worker_main ()\n"
    assert "python-finalization-gil-reacquire" not in sigs(text_verdict(own, db)[0])


def test_vllms_front_end_waiting_for_its_engine_core_processes_is_a_child_wait(db):
    lines = [x for x in real_text("hami-core/hami-core-261-1.txt").splitlines() if "NCCL INFO" not in x]
    text = "".join(x + "\n" for x in lines)
    assert text_verdict(text, db)[1] == "child"
    # near miss: a front end waiting for something else says no child wait (no known line: refused)
    with pytest.raises(InputError):
        parse_text(text.replace("core engine proc(s) to start", "model shards to download"))
