"""Text-only signatures on real captured text (tests/data/sigtext/, source URL in each header):
GPU-only shapes and message-level signatures.  The text goes through the real text parsers
(parse_text) and the real matcher.  Near miss: the same text without its key line, and real texts
of similar but different situations."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
from helpers import sample_with_header

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.match import match_snapshot
from hanganalyze.analyze.signatures import load_signatures
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Process, Snapshot

SIGTEXT = Path(__file__).resolve().parents[1] / "data" / "sigtext"
SERIOUS = {"crash", "deadlock", "hang", "error"}


@pytest.fixture(scope="module")
def db():
    return load_signatures()


def read(name: str):
    """(body, expected signature or None) - header lines start with '# '."""
    return sample_with_header(SIGTEXT / name)


def snapshot_of(text: str) -> Snapshot:
    """parse_text's Snapshot; for a log with no stack dump at all (which parse_text refuses as
    "not a dump"), a single text process holding the log lines as messages."""
    try:
        return parse_text(text)
    except InputError as e:
        if "could not recognise" not in str(e) and "is a log with no stack frame" not in str(e):
            raise
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return Snapshot(processes=[Process(source="text", messages=lines)])


def ids_of(text: str, db) -> List[str]:
    return [f.signature for f in match_snapshot(snapshot_of(text), db)]


# (file, key phrase: every line containing it is removed for the near miss)
CASES = [
    ("heartbeat_llamafactory_8549.txt", "watchdog got stuck"),
    ("store_barrier_accelerate_1401.txt", "Waiting in store based barrier"),
    ("file_baton_pytest_190674.txt", "file_baton.py"),
    ("collective_timeout_verl_1158.txt", "Watchdog caught collective operation timeout"),
    ("capture_event_query_vllm_41622.txt", "capturing stream"),
    ("cuda_init_fork_flair_1316.txt", "Cannot re-initialize CUDA"),
    ("fork_warning_layup_302.txt", "os.fork() was called"),
    ("horovod_stall_2843.txt", "subset of ranks"),
    # the warning pasted without its first sentence: its later lines name the ranks
    ("horovod_stall_ops_100.txt", "ranks"),
    ("horovod_stall_missing_534.txt", "ranks"),
    ("driver_shutting_down_darknet_1829.txt", "driver shutting down"),
    ("driver_shutting_down_nccl_1485.txt", "driver shutting down"),
    ("busy_spin_returnn_1811.txt", "cudaStreamSynchronize"),
    ("busy_spin_traccc_569.txt", "cudaStreamSynchronize"),
    ("tf_nccl_reduce_30100.txt", "NcclReduce"),
    ("gil_missing_allocator_pytorch_26475.txt", "without holding the GIL"),
    ("gil_missing_pybytes_pytorch_72086.txt", "pybind11::bytes"),
    ("collective_mismatch_lightning_19045.txt", "Detected mismatch between collectives"),
    # NCCL's own per-call lines: rank 2's AllGather against rank 0's AllReduce at one opCount
    ("collective_mismatch_nccl_log_rccl_429.txt", "AllGather"),
    # vLLM's ring-buffer writer waiting for a worker; macOS's Objective-C fork check; tokenizers' fork guard
    ("vllm_shm_broadcast_44185.txt", "No available shared memory broadcast block"),
    ("objc_fork_safety_appnope_4.txt", "when fork() was called"),
    ("tokenizers_fork_garak_750.txt", "just got forked"),
]


def test_every_sigtext_file_is_covered():
    listed = {c[0] for c in CASES} | set(REAL_NEAR_MISSES)
    assert {p.name for p in SIGTEXT.glob("*.txt")} == listed
    for p in SIGTEXT.glob("*.txt"):
        assert p.read_text().startswith("# source: https://"), p.name


@pytest.mark.parametrize("name,key", CASES)
def test_text_signature_matches(db, name, key):
    text, expect = read(name)
    assert expect is not None
    found = ids_of(text, db)
    assert expect in found, (name, found)


@pytest.mark.parametrize("name,key", CASES)
def test_text_signature_near_miss_without_key_line(db, name, key):
    text, expect = read(name)
    kept = "\n".join(line for line in text.splitlines() if key not in line) + "\n"
    if not kept.strip():
        # The key line is the whole text: keep the line but break the key phrase (a near miss is
        # the same message with one word changed, e.g. another tool's wording).
        kept = text.replace(key, key[: len(key) // 2] + " Xq " + key[len(key) // 2 :])
        assert kept != text
    assert expect not in ids_of(kept, db)


REAL_NEAR_MISSES = ["epoll_idle_cudajl_1350.txt", "fetch_not_found_kashgari_356.txt",
                    # NCCL per-call lines that agree at each opCount: no mismatch to report
                    "collective_match_nccl_log_1193.txt"]


@pytest.mark.parametrize("name", REAL_NEAR_MISSES)
def test_real_near_miss_texts(db, name):
    text, expect = read(name)
    assert expect is None
    snap = snapshot_of(text)
    serious = [f.signature for f in match_snapshot(snap, db) if f.severity in SERIOUS]
    assert not serious, serious


def test_nccl_log_mismatch_is_a_lead_naming_both_lines(db):
    text, _ = read("collective_mismatch_nccl_log_rccl_429.txt")
    f = [x for x in match_snapshot(snapshot_of(text), db) if x.signature == "pg-wrapper-collective-mismatch"][0]
    assert f.confidence < 0.8  # one opCount of two same-size communicators would look the same
    texts = [e.text for e in f.evidence]
    assert any("AllReduce: opCount 28c" in t for t in texts) and any("AllGather: opCount 28c" in t for t in texts)


def test_heartbeat_message_evidence(db):
    text, _ = read("heartbeat_llamafactory_8549.txt")
    found = [f for f in match_snapshot(snapshot_of(text), db) if f.signature == "pgnccl-heartbeat-watchdog-stuck"]
    assert found
    ev = found[0].evidence[0]
    assert ev.rule == "watchdog stuck" and "480 seconds" in ev.text and ev.thread is None
    assert "the log says" in found[0].summary


def test_busy_spin_is_info_and_matched_without_symbols(db):
    text, _ = read("busy_spin_returnn_1811.txt")
    f = [x for x in match_snapshot(snapshot_of(text), db) if x.signature == "cuda-sync-busy-spin"][0]
    assert f.severity == "info"
    libs = [e.text for e in f.evidence if e.frame is not None]
    assert any("libcuda.so.1" in t for t in libs) and any(t.startswith("cudaStreamSynchronize") for t in libs)


def test_tf_nccl_reduce_traceback_clause(db):
    """The traceback frames parsed from the text are evidence, not only the message line."""
    text, _ = read("tf_nccl_reduce_30100.txt")
    snap = parse_text(text)  # a Python traceback: parse_text must accept it
    f = [x for x in match_snapshot(snap, db) if x.signature == "tf-nccl-reduce-feed-fetch-devices"][0]
    assert f.severity == "error" and f.confidence == 1.0
    assert any("NcclReduce:0" in e.text for e in f.evidence)


@pytest.mark.parametrize("name,key", CASES)
def test_text_findings_are_specific(db, name, key):
    """Each real text yields its own signature and no other one: the other texts act as near
    misses for every text-only signature (e.g. a collective-timeout log is no heartbeat stall)."""
    text, expect = read(name)
    # a spinning synchronisation is also a host thread waiting for the device (the class)
    found = set(ids_of(text, db)) - ({"cuda-host-waits-for-device"} if expect == "cuda-sync-busy-spin" else set())
    assert found == {expect}, found
