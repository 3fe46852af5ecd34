"""Bug classes from the third held-out ML round (tests/data/realworld/manifest-ml3.yaml): a condition
variable destroyed while waited on, a forked child on glibc's atexit lock, TorchInductor's pool
shutdown seen from Python frames, the JAX/TF coordination service's rendezvous timeout and NCCL's
closed-connection warning; plus the triage of the first two waits.  Each rule has its real paste and a
near miss (the paste without the frame or line the class needs)."""

from __future__ import annotations

from typing import List

from helpers import REPO

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Finding, Process, Snapshot

CORPUS = REPO / "tests" / "data" / "realworld"

#: Signatures this module tests with a real paste and a near miss (test_signature_coverage).
COVERED = ["condvar-destroyed-while-waited-on", "nccl-peer-connection-closed", "dataloader-worker-shm-exhausted"]


def analyze(text: str, db) -> List[Finding]:
    try:
        snap = parse_text(text)
    except InputError:  # a log with no stack: its lines as one process's messages
        snap = Snapshot(processes=[Process(source="text", messages=[x for x in text.splitlines() if x.strip()])])
    return pipeline.analyze(snap, db).findings


def found(text: str, db, sig: str) -> List[Finding]:
    return [f for f in analyze(text, db) if f.signature == sig]


def wait_of(text: str, db):
    tri = [f for f in analyze(text, db) if f.signature == "triage"]
    return tri[0].triage.wait if tri else None


def real(name: str) -> str:
    return (CORPUS / name).read_text()


def test_condition_variable_destroyed_while_waited_on(db):
    """pytorch#1233: the autograd ReadyQueue destroyed at exit while its workers wait on it."""
    text = real("pytorch/pytorch-1233-1.txt")
    f = found(text, db, "condvar-destroyed-while-waited-on")
    assert f and f[0].confidence < 0.8  # the exit path under the destructor is cut from the paste
    # with the exit path under the destructor (the shape the later/PX4/cquery threads describe)
    at_exit = text + ("#5  0x00007f2d7d6a2a3c in __run_exit_handlers (status=0, listp=0x7f2d7da0d5f8 <__exit_funcs>,"
                      " run_list_atexit=run_list_atexit@entry=true) at exit.c:83\n"
                      "#6  0x00007f2d7d6a2a8a in __GI_exit (status=<optimized out>) at exit.c:105\n")
    f = found(at_exit, db, "condvar-destroyed-while-waited-on")
    assert f and f[0].confidence >= 0.8
    # near miss: a thread waiting on the condition variable, not destroying it
    waiting = text.replace("__pthread_cond_destroy (cond=0x1a7acf0) at pthread_cond_destroy.c:54",
                           "__pthread_cond_wait (cond=0x1a7acf0, mutex=0x1a7acc8) at pthread_cond_wait.c:655")
    assert waiting != text and not found(waiting, db, "condvar-destroyed-while-waited-on")


def test_triage_names_the_condition_a_destroy_waits_for(db):
    text = real("pytorch/pytorch-1233-1.txt")
    assert wait_of(text, db) == "condition"
    # near miss: the futex frames alone (no destroy) are a lock wait
    other = text.replace("__pthread_cond_destroy (cond=0x1a7acf0) at pthread_cond_destroy.c:54",
                         "release_queue (q=0x1a7acf0) at queue.c:54")
    assert other != text and wait_of(other, db) == "lock"


def test_forked_child_blocked_on_the_atexit_lock(db):
    """pytorch#130610: a DataLoader worker forked while the pin-memory thread registered an exit
    handler; its first __cxa_atexit waits forever (ultralytics#26085 root-caused the same lock)."""
    text = real("pytorch/pytorch-130610-1.txt")
    f = found(text, db, "fork-child-inherited-lock")
    assert f and f[0].confidence < 0.8
    assert wait_of(text, db) == "lock"
    # near miss: another thread in the dump (it may be the one registering a handler right now)
    two = text + ("Thread 2 (Thread 0x7fab2f7fe640 (LWP 4242)):\n"
                  "#0  0x00007fab466a1234 in write () from /lib/x86_64-linux-gnu/libc.so.6\n")
    assert not found(two, db, "fork-child-inherited-lock")
    # near miss: the same thread in another libc function is not the atexit lock
    other = text.replace("__internal_atexit", "__internal_strtok").replace("__GI___cxa_atexit", "__GI___strtok_r")
    assert other != text and not found(other, db, "fork-child-inherited-lock")
    assert wait_of(other, db) != "lock"


def test_inductor_pool_shutdown_from_python_frames(db):
    """pytorch#162199: the atexit traceback of shutdown_compile_workers timing out on the pool."""
    text = real("pytorch/pytorch-162199-1.txt")
    f = found(text, db, "inductor-compile-workers-teardown")
    assert f and f[0].confidence >= 0.8  # the atexit line names the exit handler
    # without the atexit line (a py-spy dump of the same wait): a lead only
    no_line = "\n".join(x for x in text.splitlines() if "atexit callback" not in x) + "\n"
    f = found(no_line, db, "inductor-compile-workers-teardown")
    assert f and f[0].confidence < 0.8
    # near miss: a process pool's shutdown not under shutdown_compile_workers
    other = no_line.replace("shutdown_compile_workers", "close_pools")
    assert not found(other, db, "inductor-compile-workers-teardown")


def test_coordination_service_rendezvous_timeout(db):
    """jax#35905: RegisterTask to an unreachable coordinator ends in DEADLINE_EXCEEDED."""
    text = real("jax/jax-35905-1.txt")
    f = found(text, db, "c10d-store-rendezvous-hang")
    assert f and f[0].confidence < 0.8
    # near miss: a heartbeat that times out is a task that died after joining, not the rendezvous
    heartbeat = text.replace("RegisterTask", "Heartbeat")
    assert not found(heartbeat, db, "c10d-store-rendezvous-hang")


def test_nccl_closed_connection_warning(db):
    """pytorch/elastic#134: a killed worker; the survivors' NCCL proxy logs the closed connection."""
    text = real("elastic/elastic-134-1.txt")
    f = found(text, db, "nccl-peer-connection-closed")
    assert f and f[0].confidence < 0.8
    # the socket variant of newer NCCL (nccl-tests#166) and the recv failure (nccl#795)
    for line in ("gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: "
                 "Connection closed by remote peer gpu004<55693>",
                 "a100:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : "
                 "Call to recv from 10.200.84.247<58355> failed : Broken pipe"):
        assert found(line + "\n", db, "nccl-peer-connection-closed"), line
    # near miss: the proxy service's normal connection teardown at exit (nccl-tests#252)
    teardown = "kolyoz2:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0\n"
    assert not found(teardown, db, "nccl-peer-connection-closed")
    assert not found(text.replace("Connection closed by remote peer", "Connection established"), db,
                     "nccl-peer-connection-closed")


def test_dataloader_worker_killed_by_sigbus(db):
    """fastai/docker-containers#21: a worker's SIGBUS from a too small /dev/shm, the message wrapped
    by the paste after "Bus"; a log with no frames, recognised as one and triaged as a crash."""
    text = real("fastai/fastai-docker-21-1.txt")
    snap = parse_text(text)  # auto-detected as a log (no --input-format)
    assert snap.processes and snap.processes[0].messages
    f = found(text, db, "dataloader-worker-shm-exhausted")
    assert f and f[0].confidence < 0.8
    assert wait_of(text, db) == "crashed"
    # the unwrapped line (mmdetection#1997) and the older worker message (pipedream#28)
    for line in ("RuntimeError: DataLoader worker (pid 37) is killed by signal: Bus error. It is possible that "
                 "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
                 "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
                 "memory (shm)."):
        assert found(line + "\n", db, "dataloader-worker-shm-exhausted"), line
    # near miss: a worker killed by another signal is a crash, not the shared-memory class
    segv = "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Segmentation fault.\n"
    assert not found(segv, db, "dataloader-worker-shm-exhausted")
    assert wait_of(segv, db) == "crashed"
