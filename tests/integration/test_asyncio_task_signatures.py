"""Signatures on asyncio task stacks (issue 23) on real hung programs (``tests/fixtures/py_asyncio.py``
modes ``read``, ``join``, ``join-busy``), read live and from a gcore core: the stuck task matches and
is named in the evidence, the near miss (the same read under wait_for; a join while a worker still
works) does not.  Oldest, pre-3.12 (wait_for runs the read in a task of its own) and newest CPython."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, all_pythons, gcore, start_hung  # noqa: E402
from test_asyncio_tasks import _report  # noqa: E402

PYTHONS = {k: v for k, v in all_pythons().items() if k in ("3.8", "3.11", "3.12", "3.14", "3.14t")}
READ, JOIN = "asyncio-stream-read-no-timeout", "asyncio-queue-join-unfinished"


@pytest.fixture(scope="module", params=sorted(PYTHONS))
def reports(request, tmp_path_factory):
    exe = PYTHONS[request.param]
    tmp = tmp_path_factory.mktemp("asyncio-sig-%s" % request.param)
    out = {}
    for mode in ("read", "join", "join-busy"):
        hung = start_hung([exe, FIXTURES / "py_asyncio.py", mode], settle=0.5)
        try:
            out[mode] = {"live": _report(hung.pid), "core": _report(gcore(hung.pid, tmp / mode))}
        finally:
            hung.kill()
    return out


def _found(rep, sig):
    return [f for f in rep["findings"] if f["signature"] == sig]


@pytest.mark.parametrize("source", ["live", "core"])
def test_read_without_timeout(reports, source):
    rep = reports["read"][source]
    (f,) = _found(rep, READ)
    texts = [e["text"] for e in f["evidence"]]
    assert any(t.startswith("task 'fetcher' (0x") and "StreamReader.readline" in t for t in texts), texts
    assert any("fetch_line" in t for t in texts) and not any("guarded" in t or "wait_for" in t for t in texts)
    assert f["threads"] == [rep["processes"][0]["pid"]]  # the loop's thread


@pytest.mark.parametrize("source", ["live", "core"])
def test_queue_join_unfinished(reports, source):
    (f,) = _found(reports["join"][source], JOIN)
    assert any("Queue.join" in e["text"] and "task 'Task-1'" in e["text"] for e in f["evidence"])
    assert not _found(reports["join-busy"][source], JOIN)
    assert not _found(reports["join"][source], READ) and not _found(reports["read"][source], JOIN)
