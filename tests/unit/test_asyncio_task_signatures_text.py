"""Signatures on asyncio task stacks (``scope: [tasks]``, issue 23) from real pastes of
``python -m asyncio ps/pstree PID`` (CPython 3.14, ``tests/fixtures/py_asyncio.py`` modes ``read``,
``join``, ``join-busy``: ``tests/data/text/asyncio_*``): each signature matches the stuck task and
names it in the evidence; its near miss (the same read under wait_for, a join while a worker still
works) does not.  Rules without ``scope`` still see threads only.  Live and cored reads of the same
programs: ``tests/integration/test_asyncio_tasks.py``."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.intern import match_snapshot as match_interned
from hanganalyze.analyze.match import match_snapshot
from hanganalyze.analyze.signatures import load_file, load_signatures
from hanganalyze.errors import SignatureError
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

DATA = Path(__file__).resolve().parents[1] / "data" / "text"
READ, JOIN = "asyncio-stream-read-no-timeout", "asyncio-queue-join-unfinished"
#: Read by tests/unit/test_signature_coverage.py: a positive and a near miss on real task stacks.
COVERED = (READ, JOIN)


@pytest.fixture(scope="module")
def db():
    return load_signatures()


def _snap(name: str) -> Snapshot:
    return parse_text((DATA / name).read_text())


def _found(snap: Snapshot, db, sig: str):
    return [f for f in match_snapshot(snap, db) if f.signature == sig]


def test_read_without_timeout_matches_the_task_not_the_guarded_one(db):
    snap = _snap("asyncio_pstree_read.txt")
    (f,) = _found(snap, db, READ)
    texts = [e.text for e in f.evidence]
    assert any(t.startswith("task 'fetcher' (") and "StreamReader.readline" in t for t in texts), texts
    assert any("fetch_line" in t for t in texts)
    assert not any("guarded" in t for t in texts)  # the same read under asyncio.wait_for
    assert all(e.frame is None for e in f.evidence)  # a task's frames are no thread's
    assert "task 'fetcher'" in f.summary and f.confidence == 0.7


def test_read_near_miss_every_read_bounded(db):
    """The fetcher's read moved under wait_for, as the guarded task's is: no finding."""
    snap = _snap("asyncio_pstree_read.txt")
    tasks = {t.name: t for t in snap.processes[0].asyncio.all_tasks()}
    tasks["fetcher"].coroutine_stack = copy.deepcopy(tasks["guarded"].coroutine_stack)
    assert not _found(snap, db, READ)


def test_ps_paste_read(db):
    (f,) = _found(_snap("asyncio_ps_read.txt"), db, READ)
    assert f.threads and any("task 'fetcher'" in e.text for e in f.evidence)


@pytest.mark.parametrize("tool", ["ps", "pstree"])
def test_queue_join_with_idle_workers(db, tool):
    (f,) = _found(_snap("asyncio_%s_join.txt" % tool), db, JOIN)
    texts = [e.text for e in f.evidence]
    assert any(t.startswith("task 'Task-1' (") and "Queue.join" in t for t in texts), texts
    assert any("Queue.get" in t for t in texts)


@pytest.mark.parametrize("tool", ["ps", "pstree"])
def test_queue_join_near_miss_worker_busy(db, tool):
    assert not _found(_snap("asyncio_%s_join_busy.txt" % tool), db, JOIN)
    assert not _found(_snap("asyncio_%s_orphan.txt" % tool), db, JOIN)  # a bare get(), no join()


def _proc_with(frames) -> Snapshot:
    snap = _snap("asyncio_ps_join.txt")
    p: Process = snap.processes[0]
    p.threads = [Thread(tid=5, name="MainThread", frames=frames)]
    return snap


def test_scope_default_is_threads(tmp_path, db):
    """A rule without ``scope`` never sees tasks; ``scope: [threads, tasks]`` sees both."""
    yaml_text = """signatures:
  - id: join-anywhere
    title: Something waits in Queue.join
    severity: hang
    cause: A test signature for the scope field.
    fix: [{kind: code, text: Fix it.}]
    references: [https://example.org/x]
    match:
      threads:
        - rule: in join
%s          stack: [{function: Queue.join, kind: python}]
"""
    plain, both = tmp_path / "plain.yaml", tmp_path / "both.yaml"
    plain.write_text(yaml_text % "")
    both.write_text((yaml_text % "          scope: [threads, tasks]\n").replace("join-anywhere", "join-both"))
    sigs = type(db)(signatures=load_file(plain) + load_file(both))
    snap = _snap("asyncio_ps_join.txt")
    assert [f.signature for f in match_snapshot(snap, sigs)] == ["join-both"]
    # a thread in Queue.join matches both; its evidence keeps the frame index
    t = _proc_with([Frame(function="Queue.join", kind="python", file="queues.py")])
    t.processes[0].asyncio = None
    found = match_snapshot(t, sigs)
    assert sorted(f.signature for f in found) == ["join-anywhere", "join-both"]
    assert all(e.frame == 0 and e.thread == 5 for f in found for e in f.evidence)


def test_scope_rejects_unknown_values(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("""signatures:
  - id: bad-scope
    title: Bad scope
    severity: hang
    cause: A test signature for the scope field.
    fix: [{kind: code, text: Fix it.}]
    references: [https://example.org/x]
    match:
      threads:
        - {rule: r, scope: [coroutines], stack: [{function: f}]}
""")
    with pytest.raises(SignatureError) as e:
        load_file(bad)
    assert "bad.yaml:10" in str(e.value) and "scope" in str(e.value)


def test_processes_sharing_findings_keep_their_own_task_ids(db):
    """Job matching reuses a process's findings for identical processes: not for task findings,
    whose evidence names the task's own id."""
    a, b = _snap("asyncio_ps_join.txt"), _snap("asyncio_ps_join.txt")
    for t in b.processes[0].asyncio.all_tasks():
        t.id = t.id.replace("0x7f", "0x6f")
    snap = Snapshot(processes=[a.processes[0], b.processes[0]])
    found = [f for f in match_interned(snap, db) if f.signature == JOIN]
    assert len(found) == 2
    assert found[0].evidence[0].text != found[1].evidence[0].text
