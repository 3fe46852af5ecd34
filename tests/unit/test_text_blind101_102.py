"""Fixes made after sealed rounds 101/102 were scored (not counted in their score), each on the
round's real paste and a near miss: NCCL's error returned to the caller of its init (the call failed,
no wait), TensorFlow's collective executor aborting on an error that is no deadline, and torch_xla's
mesh service waiting for its master."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.errors import InputError


def test_an_nccl_error_returned_to_its_init_is_a_failure_not_a_wait(db):
    text = real_text("sealed101/nccl-1016-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the proxy thread's socket error returns alone (a rank hung in its collective logs them too)
    near = "\n".join(x for x in text.splitlines() if not any(
        k in x for k in ("init.cc:", "bootstrap.cc:", "group.cc:", "enqueue.cc:")))
    assert near != text and text_verdict(near + "\n", db)[1] != "crashed"


def test_tensorflows_collective_abort_on_an_error_is_a_failure(db):
    text = real_text("sealed101/tensorflow-34156-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same abort on a deadline is the collective's wait that timed out
    near = text.replace("StartAbort Cancelled", "StartAbort Deadline exceeded")
    assert near != text and text_verdict(near, db)[1] != "crashed"


def test_torch_xlas_mesh_service_waiting_for_its_master(db):
    assert text_verdict(real_text("sealed101/xla-2224-1.txt"), db)[1] == "collective"
    near = ("2020-06-15 10:45:21.337106: I    3221 tensorflow/compiler/xla/xla_client/mesh_service.cc:208] "
            "Connected to client mesh master 10.164.0.77:8477\n")
    try:
        wait = text_verdict(near, db)[1]
    except InputError:
        wait = None
    assert wait != "collective"
