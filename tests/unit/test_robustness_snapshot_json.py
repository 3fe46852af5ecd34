"""A hanganalyze/1 JSON file is untrusted input: wrong types, nothing to analyze, deep nesting and
megabyte messages end in one InputError line (or a normal report), never a traceback or a stall."""

from __future__ import annotations

import copy
import json
import random
import time

import pytest

from hanganalyze import pipeline
from hanganalyze.acquire.snapshot_json import read_snapshot
from hanganalyze.errors import InputError
from hanganalyze.render import render
from hanganalyze_gdbext.model import Frame, Process, PythonFacts, Snapshot, Thread, Wait


def _mutate(doc, paths, rng, n: int) -> None:
    """Set ``n`` values at random paths of ``doc`` to type-confused ones (a path that no longer
    exists after an earlier change is skipped)."""
    for _ in range(n):
        p = rng.choice(paths)
        o = doc
        try:
            for k in p[:-1]:
                o = o[k]
            o[p[-1]] = rng.choice(VALUES)
        except (KeyError, IndexError, TypeError):
            pass

def base_doc() -> dict:
    t1 = Thread(tid=11, name="poster", frames=[
        Frame(kind="native", function="__lll_lock_wait", library="/lib/libc.so.6", address=0x10),
        Frame(kind="native", function="pthread_mutex_lock", library="/lib/libc.so.6"),
        Frame(kind="python", function="post", file="/app/x.py", line=3),
    ], waits=Wait(kind="mutex", resource="0x1000", owner_tid=12, frame=1))
    t2 = Thread(tid=12, name="audit", frames=[Frame(kind="native", function="__lll_lock_wait")],
                waits=Wait(kind="mutex", resource="0x2000", owner_tid=11, frame=0))
    p = Process(source="core", pid=11, executable="/bin/app", argv=["app"], python=PythonFacts(version="3.11.7"),
                threads=[t1, t2], messages=["terminate called without an active exception"])
    return Snapshot(processes=[p]).to_dict()


@pytest.fixture(scope="module")
def db():
    return pipeline.load_signature_db([])


def run_all(text: str, db) -> None:
    snap = pipeline.analyze(read_snapshot(text), db)
    for fmt in ("text", "md", "html", "json"):
        render(snap, fmt)


def test_base_document_is_analyzed(db):
    snap = pipeline.analyze(read_snapshot(json.dumps(base_doc())), db)
    assert [f.signature for f in snap.findings if f.signature == "deadlock-cycle"]


VALUES = [None, 0, -1, 2**70, 1.5, float("nan"), "x", "", [], {}, [1], {"a": 1}, True, [None], [{}], "<b>"]


def _paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, p + (i,))


def test_type_confused_documents_never_crash(db):
    """300 documents with 1-3 fields replaced by values of other types: each is either rejected
    with an InputError or analyzed and rendered in every format."""
    base = base_doc()
    paths = [p for p in _paths(base) if p]
    rng = random.Random(1234)
    rejected = 0
    for _ in range(300):
        d = copy.deepcopy(base)
        _mutate(d, paths, rng, rng.randint(1, 3))
        try:
            run_all(json.dumps(d), db)
        except InputError as e:
            assert "\n" not in str(e)
            rejected += 1
    assert 0 < rejected < 300


@pytest.mark.parametrize(
    "doc, match",
    [
        ({"schema": "hanganalyze/1", "processes": []}, "no thread to analyze"),
        ({"schema": "hanganalyze/1", "processes": [{"source": "core", "threads": []}]}, "no thread to analyze"),
        ({"schema": "hanganalyze/1", "processes": [{"threads": [{"tid": "1"}]}]}, "threads[0].tid: expected int"),
        ({"schema": "hanganalyze/1", "processes": [{"threads": [{"frames": [{"function": 7}]}]}]},
         "frames[0].function: expected str"),
        ({"schema": "hanganalyze/1", "processes": [{"threads": [{"waits": {"kind": {}}}]}]}, "waits.kind"),
        ({"schema": "hanganalyze/1", "processes": [{"python": {"version": 3.11}, "threads": [{}]}]},
         "python.version"),
        ({"schema": "hanganalyze/1", "processes": [{"python": {"from": 1}, "threads": [{}]}]},
         "processes[0].python.from: expected str"),
        ({"schema": "hanganalyze/1", "processes": [{"dist": {"world_size": "8"}, "threads": [{}]}]},
         "processes[0].dist.world_size: expected int"),
        ({"schema": "hanganalyze/1", "processes": [{"dist": [1], "threads": [{}]}]},
         "DistIdentity: expected an object"),
        ({"schema": "hanganalyze/1", "processes": [{"mapped_files": [7], "threads": [{}]}]},
         "MappedFile: expected an object"),
        ({"schema": "hanganalyze/1", "processes": [{"mapped_files": [{"status": 1}], "threads": [{}]}]},
         "processes[0].mapped_files[0].status: expected str"),
        ({"schema": "hanganalyze/1", "processes": [{"coredump": {"pid": [1]}, "threads": [{}]}]},
         "processes[0].coredump.pid: expected int"),
        ({"schema": "hanganalyze/1", "processes": [{"samples": {"count": "3"}, "threads": [{}]}]},
         "processes[0].samples.count: expected int"),
        ({"schema": "hanganalyze/2"}, "not a usable"),
        ([1, 2], "is not an object"),
    ],
)
def test_unusable_documents_are_one_line(doc, match):
    with pytest.raises(InputError, match=match.replace("[", r"\[").replace("]", r"\]")):
        read_snapshot(json.dumps(doc))


def test_deep_nesting_is_an_input_error():
    text = '{"schema": "hanganalyze/1", "processes": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(InputError, match="nested too deeply"):
        read_snapshot(text)


def test_recomputed_parts_are_ignored(db):
    """Findings, wait-for graphs, bucket and tool in the file are garbage here: not used, not fatal."""
    d = base_doc()
    d["findings"] = [{"signature": 5, "process": [1]}]
    d["bucket"] = {"x": 1}
    d["tool"] = 7
    d["processes"][0]["waitgraph"] = {"cycles": [[1.5]], "edges": "x"}
    snap = pipeline.analyze(read_snapshot(json.dumps(d)), db)
    assert any(f.signature == "deadlock-cycle" for f in snap.findings)
    assert isinstance(snap.bucket, str)


def test_megabyte_message_does_not_stall_matching(db):
    """A 1.2 MB log line that many built-in message regexes scan with `.*` (quadratic): capped like
    pasted text, so matching stays fast (27 s for 600 KB before the cap)."""
    d = base_doc()
    d["processes"][0]["messages"] = ["error " * 200_000] + ["x"] * 30_000
    t0 = time.monotonic()
    snap = read_snapshot(json.dumps(d))
    pipeline.analyze(snap, db)
    assert time.monotonic() - t0 < 10
    assert len(snap.processes[0].messages) <= 10_000
    assert max(len(m) for m in snap.processes[0].messages) <= 20_000
    assert any("left out" in n for n in snap.processes[0].notes)


def test_type_confused_collectives_never_crash(db):
    """Process.collectives is typed (model.collectives): a real dump's facts read back unchanged, and
    200 documents with its fields replaced by values of other types are rejected in one line or
    analyzed and rendered in every format (the job view reads the attributes unchecked)."""
    from pathlib import Path

    from hanganalyze.acquire.flight_recorder import read_flight_recorder

    dump = Path(__file__).resolve().parents[1] / "data" / "flight_recorder" / "straggler.fr.rank_0"
    base = base_doc()
    base["processes"][0]["collectives"] = read_flight_recorder(dump).collectives.to_dict()
    back = read_snapshot(json.dumps(base)).processes[0].collectives
    assert back.to_dict() == base["processes"][0]["collectives"] and back.entries[-1].seq == 3
    paths = [p for p in _paths(base["processes"][0]["collectives"]) if p]
    rng = random.Random(20)
    rejected = 0
    for _ in range(200):
        d = copy.deepcopy(base)
        _mutate(d["processes"][0]["collectives"], paths, rng, rng.randint(1, 2))
        try:
            run_all(json.dumps(d), db)
        except InputError as e:
            assert "\n" not in str(e)
            rejected += 1
    assert 0 < rejected < 200


def test_typed_process_facts_read_back_as_written():
    """The records that replaced Process's dicts read a document back to the same bytes (key order
    included), ignore keys they do not know (as every record does) and never read a transient
    field from a file."""
    d = base_doc()
    p = d["processes"][0]
    p["python"] = {"version": "3.12.3", "version_source": "Py_Version", "interpreters": 1, "gc_collecting": False,
                   "free_threading": False, "build": "static", "debug_info": False, "runtime": "symbol"}
    p["dist"] = {"from": "environ", "launcher": "torch", "world_size": 2, "launcher_pid": 865}
    p["coredump"] = {"from": "coredumpctl", "pid": 7, "signal": "SIGABRT", "uid": 0}
    p["samples"] = {"count": 3, "window_s": 1.0, "interval_s": 0.5}
    p["mapped_files"] = [{"path": "/lib/x.so", "build_id": None, "found": None, "disk_build_id": None,
                          "status": "missing"}]
    snap = read_snapshot(json.dumps(d))
    proc = snap.processes[0]
    assert proc.dist.world_size == 2 and proc.dist.from_ == "environ" and proc.coredump.uid == 0
    assert proc.python.gc_collecting is False and proc.samples.count == 3 and proc.mapped_files[0].status == "missing"
    out = snap.to_dict()["processes"][0]
    for key in ("python", "dist", "coredump", "samples", "mapped_files"):
        assert json.dumps(out[key]) == json.dumps(p[key]), key
    p["dist"] = dict(p["dist"], someday="x")
    p["input_file"] = "/etc/shadow"
    p["stopped_s"] = 5.0
    proc = read_snapshot(json.dumps(d)).processes[0]
    assert "someday" not in proc.dist.to_dict() and proc.input_file is None and proc.stopped_s is None
