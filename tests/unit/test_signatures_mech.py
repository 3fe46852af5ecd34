"""Signatures widened or added by mechanism (issue 32): each matches real stacks of its class in
more than one version or wrapper, and a near miss (the same paste without the frame the mechanism
needs, or with the frame that rules it out) does not.  Texts: the real-world corpus
(tests/data/realworld/, the thread URL of each in its manifest)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text

REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld"

#: Signatures this module tests with a real stack and a near miss (test_signature_coverage).
COVERED = ["deepspeed-zero3-param-fetch-divergence", "network-read-no-timeout"]


@pytest.fixture(scope="module")
def db():
    return pipeline.load_signature_db()


def ids(text: str, db) -> List[str]:
    return [f.signature for f in pipeline.analyze(parse_text(text), db).findings]


def corpus(name: str) -> str:
    return (REALWORLD / name).read_text()


# --- DeepSpeed ZeRO-3: a rank waiting in the parameter all-gather of a submodule's pre-hook ---------

# py-spy of DeepSpeed 0.14 (partitioned_param_coordinator.py, all_gather_coalesced) under accelerate,
# and faulthandler of DeepSpeed 0.3 (stage3.py, the stream synchronize after the gather)
ZERO3 = ["accelerate/accelerate-3104-1.txt", "deepspeed/deepspeed-860-1.txt"]


@pytest.mark.parametrize("name", ZERO3)
def test_zero3_fetch_wait_in_two_versions(db, name):
    assert "deepspeed-zero3-param-fetch-divergence" in ids(corpus(name), db)


@pytest.mark.parametrize("name", ZERO3)
def test_zero3_near_miss_without_the_fetch(db, name):
    text = corpus(name)
    kept = "\n".join(line for line in text.splitlines() if "fetch_sub_module" not in line) + "\n"
    assert kept != text
    assert "deepspeed-zero3-param-fetch-divergence" not in ids(kept, db)


def test_zero3_near_miss_computing_in_the_hook(db):
    """The same stack cut above the gather: the rank runs the hook's Python code, it waits for nobody."""
    lines = corpus(ZERO3[0]).splitlines()
    start = next(i for i, line in enumerate(lines) if "fetch_sub_module" in line)
    text = "\n".join(lines[:1] + lines[start:]) + "\n"
    assert "all_gather" not in text
    assert "deepspeed-zero3-param-fetch-divergence" not in ids(text, db)


def test_zero3_is_a_lead_not_a_verdict(db):
    """One rank caught in a gather may only be slow: the finding stays below the confident line."""
    snap = pipeline.analyze(parse_text(corpus(ZERO3[0])), db)
    f = next(f for f in snap.findings if f.signature == "deepspeed-zero3-param-fetch-divergence")
    assert f.severity == "hang" and f.confidence < 0.8


# --- a blocking socket read seen in native frames only ---------------------------------------------

def test_blocking_recv_under_cpython_socket_module(db):
    """gdb `bt` of requests without a timeout, cut before the Python frames: recv called straight from
    the socket module is a socket with no timeout (one with a timeout waits in poll instead)."""
    text = corpus("requests/requests-4624-1.txt")
    assert "urllib3" not in text and "requests/" not in text
    assert "network-read-no-timeout" in ids(text, db)


def test_socket_with_a_timeout_waits_in_poll_near_miss(db):
    """The same stack as a socket with a timeout shows it: poll under internal_select, then the recv."""
    text = corpus("requests/requests-4624-1.txt")
    miss = re.sub(r"in recv \(\) from", "in poll () from", text, count=1)
    miss = miss.replace("#1  0x00007f16d99d3da1 in sock_recv_impl",
                        "#1  0x00007f16d99d3d10 in internal_select (s=0x7f16d3df8b28, writing=0, "
                        "interval=1000000000, connect=0) at socketmodule.c:745\n"
                        "#1  0x00007f16d99d3da1 in sock_recv_impl")
    assert miss != text and "internal_select" in miss
    assert "network-read-no-timeout" not in ids(miss, db)


def test_recv_outside_the_socket_module_near_miss(db):
    """A recv called by another library (no CPython socket frame) says nothing about a Python timeout."""
    text = corpus("requests/requests-4624-1.txt")
    kept = "\n".join(line for line in text.splitlines() if not re.search(r"sock_|socketmodule", line)) + "\n"
    assert "recv ()" in kept
    assert "network-read-no-timeout" not in ids(kept, db)
