"""Fixes from open dev round 48 (manifest-blind48.yaml), each on the round's real paste and a near miss:
the lines a scheduler, a launcher or a container runtime leaves when it ends a job (Slurm's cancelled
step, srun's line for a signalled task, mpirun's job-abort banner, Ray's dead actor and its memory
monitor's kill, a container's exit code 137); NCCL's IB completion error as NCCL before 2.12 prints
it; TensorFlow 1.x's master waiting for a task to create the session."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


@pytest.mark.parametrize("path,old,new", [
    # Slurm cancelled the step at its time limit / a near miss: a step that completed
    ("desitarget/desitarget-628-1.txt", "CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT", "COMPLETED"),
    # srun's line for a task a signal ended / a near miss: srun's note that it is launching tasks
    ("submitit/submitit-1793-1.txt", "error: arc-c309: task 0: User defined signal 2", "launching arc-c309 task 0"),
    # mpirun's banner for a rank that returned non-zero / a near miss: its banner of a job that ended well
    ("horovod/horovod-642-1.txt", "Primary job  terminated normally, but 1 process returned",
     "Primary job  terminated normally, and all processes returned"),
    # Ray's actor whose worker died / a near miss: an actor Ray restarted
    ("verl/verl-472-1.txt", "The actor is dead because its worker process has died.", "The actor was restarted."),
    # a container's exit by SIGKILL (the OOM killer) / a near miss: a clean exit
    ("kubernetes/kubernetes-53669-1.txt", '"exitCode": 137', '"exitCode": 0'),
])
def test_the_lines_a_job_ends_with(db, path, old, new):
    text = real_text(path)
    assert old in text
    assert text_verdict(text, db)[1] == "crashed"
    near = text.replace(old, new)
    if path.startswith("desitarget/"):  # srun's lines for the tasks it terminated go with the cancel
        near = "\n".join(x for x in near.splitlines() if "srun: error" not in x) + "\n"
    if path.startswith("verl/"):  # Ray's other lines of the same death stay (its workers' own error)
        near = "\n".join(x for x in near.splitlines() if "Unhandled exception" not in x
                         and "Worker exit type: SYSTEM_ERROR" not in x) + "\n"
    try:
        assert text_verdict(near, db)[1] != "crashed"
    except InputError:
        pass  # nothing known left: refused with what to capture


def test_rays_memory_monitor_kill_line(db):
    text = real_text("ray/ray-32730-1.txt")
    snap, wait = text_verdict(text, db)
    assert "ray-memory-monitor-killed-worker" in sigs(snap) and wait == "crashed"
    # near miss: the node under its threshold, no kill: nothing known
    with pytest.raises(InputError):
        parse_text(text.replace("which exceeds the memory usage threshold of 0.95. Ray killed this worker",
                                "which is under the memory usage threshold of 0.95. Ray kept this worker"))


def test_ncclS_ib_completion_error_without_a_peer(db):
    text = real_text("nccl/nccl-902-1.txt")
    assert "nccl-ib-completion-error" in sigs(text_verdict(text, db)[0])
    # near miss: NCCL's warning of another network failure is no completion error
    other = text.replace("Got completion with error 12, opcode 0, len 0, vendor err 129",
                         "Call to ibv_modify_qp failed")
    assert "nccl-ib-completion-error" not in sigs(text_verdict(other, db)[0])


def test_tensorflows_master_waiting_for_a_task_to_create_the_session(db):
    text = real_text("distributetensorflowexample/distributetensorflowexample-11-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "collective" and "c10d-store-rendezvous-hang" in sigs(snap)
    # near miss: the master's line once the session exists names no wait
    snap, wait = text_verdict(text.replace("CreateSession still waiting for response from worker",
                                           "CreateSession done for"), db)
    assert wait != "collective" and "c10d-store-rendezvous-hang" not in sigs(snap)
