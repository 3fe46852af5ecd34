"""Bug classes from the fourth held-out ML round (tests/data/realworld/manifest-ml4.yaml): gRPC's
fork handler waiting for its thread pool (Ray), filelock's DEBUG log of a lock file nobody gets
(DeepSpeed's Triton autotune cache), py-spy's package-relative paths under a ``*/pkg/mod.py`` frame
glob (torch's FileBaton), and fixed-format log records that look terminal-wrapped.  Each rule has
its real paste and a near miss (the paste without the line or frame the class needs)."""

from __future__ import annotations

from typing import List

from helpers import REPO

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.common import unwrap_terminal
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Finding, Process, Snapshot

CORPUS = REPO / "tests" / "data" / "realworld"

#: Signatures this module tests with a real paste and a near miss (test_signature_coverage).
COVERED = ["grpc-fork-handler-thread-pool-wait", "stale-file-lock"]


def log_lines(text: str) -> List[str]:
    from hanganalyze.acquire.text.log import join_broken

    return [x for x in join_broken(unwrap_terminal(text.splitlines())) if x.strip()]


def analyze(text: str, db, log: bool = False) -> List[Finding]:
    if log:
        snap = Snapshot(processes=[Process(source="text", messages=log_lines(text))])
    else:
        try:
            snap = parse_text(text)
        except InputError:
            snap = Snapshot(processes=[Process(source="text", messages=log_lines(text))])
    return pipeline.analyze(snap, db).findings


def found(text: str, db, sig: str, log: bool = False) -> List[Finding]:
    return [f for f in analyze(text, db, log) if f.signature == sig]


def real(name: str) -> str:
    return (CORPUS / name).read_text()


def test_grpc_fork_handler_waits_for_its_thread_pool(db):
    """ray#31729 and grpc#32163: the same thread logs gRPC's prefork wait again and again."""
    for name in ("ray/ray-31729-1.txt", "grpc/grpc-32163-1.txt"):
        f = found(real(name), db, "grpc-fork-handler-thread-pool-wait", log=True)
        assert f and f[0].confidence < 0.8, name
    lines = real("ray/ray-31729-1.txt").splitlines()
    # near misses: one line (a fork that waited one log period), and two lines of two threads
    assert not found(lines[0] + "\n", db, "grpc-fork-handler-thread-pool-wait", log=True)
    other = lines[1].replace(" 224174 ", " 224175 ")
    assert not found(lines[0] + "\n" + other + "\n", db, "grpc-fork-handler-thread-pool-wait", log=True)


def test_triage_names_the_grpc_fork_wait_a_join(db):
    tri = [f for f in analyze(real("grpc/grpc-32163-1.txt"), db, log=True) if f.signature == "triage"]
    assert tri and tri[0].triage.wait == "join"


def test_fixed_format_log_records_are_not_a_terminal_wrap():
    """Records of one glog or ISO-timestamped format and message are all one length: each stays a
    line (joined, the message rules above saw one line with every record in it)."""
    for name in ("ray/ray-31729-1.txt", "deepspeed/deepspeed-5205-1.txt"):
        lines = real(name).splitlines()
        assert unwrap_terminal(lines) == lines, name
    # a real terminal wrap (a cut that does not start a record) is still joined
    wrapped = ["x" * 80, "continued", "y" * 80, "more", "z" * 80, "end"]
    assert unwrap_terminal(wrapped) == ["x" * 80 + "continued", "y" * 80 + "more", "z" * 80 + "end"]


def test_filelock_log_of_a_lock_file_nobody_acquires(db):
    """DeepSpeed#5205: three lock objects attempt ~/.triton/autotune/...pickle.lock, none gets it."""
    text = real("deepspeed/deepspeed-5205-1.txt")
    f = found(text, db, "stale-file-lock", log=True)
    assert f and f[0].confidence < 0.8  # NFS slowness and a dead holder read alike
    lines = text.splitlines()
    # near misses: the log shows one of them getting it (DeepSpeed#7756's healthy log), or one attempt
    got = lines[0].replace("Attempting to acquire lock", "Lock").replace(" on ", " acquired on ", 1)
    assert not found(text + got + "\n", db, "stale-file-lock", log=True)
    assert not found(lines[0] + "\n", db, "stale-file-lock", log=True)


def test_pyspy_relative_path_matches_a_package_glob(db):
    """DeepSpeedExamples#302: py-spy prints torch/utils/file_baton.py, the rule's glob is
    */torch/utils/file_baton.py."""
    text = real("deepspeed/deepspeedexamples-302-1.txt")
    f = found(text, db, "stale-file-lock")
    assert f and f[0].threads == [46930]
    # near miss: the main thread waits in a threading Event instead of the FileBaton
    other = text.replace("wait (torch/utils/file_baton.py:42)", "wait (threading.py:607)")
    assert not found(other, db, "stale-file-lock")


def test_vllm_worker_traceback_under_its_record_prefix(db):
    """vllm#7077: every traceback line carries '(VllmWorkerProcess pid=N) ERROR date time file:N]';
    the frames are read under it, and the worker that raised crashed (it waits for nothing)."""
    text = real("vllm/vllm-7077-1.txt")
    snap = parse_text(text)
    frames = [f.function for t in snap.processes[0].threads for f in t.frames]
    assert "_lazy_init" in frames and "_run_worker_process" in frames
    tri = [f for f in analyze(text, db) if f.signature == "triage"]
    assert tri and tri[0].triage.wait == "crashed"
    # near miss: the same worker interrupted by Ctrl-C while it waited is no crash
    interrupted = text.replace("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                               "multiprocessing, you must use the 'spawn' start method\n", "KeyboardInterrupt\n", 1)
    interrupted = interrupted.replace("Cannot re-initialize CUDA in forked subprocess", "interrupted")
    tri = [f for f in analyze(interrupted, db) if f.signature == "triage"]
    assert tri and tri[0].triage.wait != "crashed"
