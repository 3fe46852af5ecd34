"""Parsed text feeds the signature matcher: the findings a user should see for each paste."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.pipeline import analyze, load_signature_db

DATA = Path(__file__).resolve().parents[1] / "data" / "text"


@pytest.fixture(scope="module")
def db():
    return load_signature_db()


def findings(text, db, fmt=None):
    snap = analyze(parse_text(text, fmt), db)
    return snap, {f.signature: f for f in snap.findings}


def test_joinable_thread_abort_from_gdb(db):
    snap, found = findings((DATA / "gdb_joinable_abort_bt.txt").read_text(), db)
    f = found["std-thread-joinable-terminate"]
    assert f.severity == "crash" and f.threads == [8359] and f.confidence == 1.0


def test_joinable_thread_abort_stripped_binary_matches_on_the_message(db):
    """The stripped fixture has no ``std::thread::~thread`` frame: the log line still tells."""
    _, found = findings((DATA / "gdb_joinable_stripped_bt.txt").read_text(), db)
    f = found["std-thread-joinable-terminate"]
    assert 0 < f.confidence < 1.0
    assert [e.text for e in f.evidence] == ["terminate called without an active exception"]


def test_gpu_only_hang_from_cuda_gdb(db):
    """``?? () from libcuda.so.1`` frames (function None) match a signature written for '??'."""
    _, found = findings((DATA / "cudagdb_attach_host_bt.txt").read_text(), db)
    assert found["cuda-sync-busy-spin"].threads == [651]


def test_message_signature_from_a_traceback(db):
    snap, found = findings((DATA / "traceback_thread.txt").read_text(), db)
    assert "c10d-store-rendezvous-hang" in found


def test_findings_land_on_the_right_rank(db):
    snap, found = findings((DATA / "ranks_prefixed.txt").read_text(), db)
    assert [p.label for p in snap.processes] == ["rank0", "rank1"]
    assert found["c10d-store-rendezvous-hang"].process == 0


# Constructed text (no TensorFlow or PyTorch here): CPython's traceback layout around the error
# text each signature documents; the layout itself is checked on real tracebacks elsewhere.
TF_NCCL_REDUCE = """\
2019-06-24 20:41:59.146161: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1326] Created TensorFlow device
Traceback (most recent call last):
  File "test_nccl.py", line 16, in <module>
    print(sess.run(c))
  File "/usr/lib/python3.6/site-packages/tensorflow/python/client/session.py", line 929, in run
    run_metadata_ptr)
  File "/usr/lib/python3.6/site-packages/tensorflow/python/client/session.py", line 1328, in _do_run
    run_metadata)
  File "/usr/lib/python3.6/site-packages/tensorflow/python/client/session.py", line 1348, in _do_call
    raise type(e)(node_def, op, message)
tensorflow.python.framework.errors_impl.InvalidArgumentError: Tensor NcclReduce:0, specified in either \
feed_devices or fetch_devices was not found in the Graph
"""

NCCL_WATCHDOG = """\
[rank0]: Thread 0x7f00 (idle): "MainThread"
[rank0]:     train_step (train.py:88)
[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600041 \
milliseconds before timing out.
[rank1]: Traceback (most recent call last):
[rank1]:   File "/opt/train.py", line 88, in train_step
[rank1]:     dist.all_reduce(t)
[rank1]: RuntimeError: NCCL communicator was aborted on rank 1.
"""


def test_tensorflow_error_message_in_a_traceback(db):
    snap, found = findings(TF_NCCL_REDUCE, db)
    (proc,) = snap.processes
    assert proc.threads[0].frames[0].function == "_do_call"
    assert any(m.startswith("tensorflow.python.framework.errors_impl.InvalidArgumentError: Tensor NcclReduce:0")
               for m in proc.messages)
    assert found["tf-nccl-reduce-feed-fetch-devices"].severity == "error"


def test_nccl_watchdog_line_in_one_rank(db):
    snap, found = findings(NCCL_WATCHDOG, db)
    assert [p.label for p in snap.processes] == ["rank0", "rank1"]
    assert found["pgnccl-collective-timeout"].process == 1
    assert "RuntimeError: NCCL communicator was aborted on rank 1." in snap.processes[1].messages
