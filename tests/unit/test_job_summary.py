"""Node summaries (read: ``acquire/nodesummary.py``, written: ``render/node.py``): merging the
summaries of a job's nodes gives the same verdict, classes and call tree as merging every rank,
whatever the grouping (the merge is associative: nodes, summaries of summaries, hypothesis-drawn
groupings), and a large job's JSON references a shared stack table that reads back
(``model/stacktable.py``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hanganalyze import pipeline
from hanganalyze.acquire.nodesummary import is_node_summary, merge_node_documents, read_node_summaries
from hanganalyze.acquire.snapshot_json import read_snapshot
from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze.render import render
from hanganalyze.render.node import node_document
from hanganalyze_gdbext.model import DistIdentity, Snapshot
from hanganalyze_gdbext.model.stacktable import expand_stacks

DATA = Path(__file__).resolve().parents[1] / "data" / "job"
RANKS = 96
STRAGGLER = 37


@pytest.fixture(scope="module")
def ranks():
    procs = {r: parse_text((DATA / ("fstrag.rank%d.pyspy.txt" % r)).read_text()).processes[0] for r in (0, 1)}
    out = []
    for rank in range(RANKS):
        p = copy.deepcopy(procs[1 if rank == STRAGGLER else 0])
        p.rank, p.pid = rank, 10000 + rank
        p.label = None
        p.dist = DistIdentity(world_size=RANKS + 1, from_="test")  # one rank missing too
        for t in p.threads:
            t.tid = p.pid
        if rank in (50, 51):
            for f in p.threads[0].frames:
                if f.function == "train_step":
                    f.line = 10
        out.append(Snapshot(processes=[p]))
    return out


def _flat(ranks, db):
    return pipeline.analyze_many(copy.deepcopy(ranks), db)


@pytest.fixture(scope="module")
def flat(ranks, db):
    return _verdict(_flat(ranks, db))


def _node(ranks, db):
    merged = Snapshot()
    for s in copy.deepcopy(ranks):
        merged.processes.extend(s.processes)
    return json.loads(render(pipeline.analyze(merged, db, node_summary=True), "node"))


def _verdict(snap):
    job = snap.job
    return {
        "findings": [(f.signature, f.severity, f.ranks, f.processes, f.summary if f.signature != "triage" else None)
                     for f in snap.findings],
        "classes": [(c.ranks, c.size, c.state, c.where, c.processes) for c in job.classes],
        "tree": job.tree, "world": job.world_size, "missing": job.missing, "ranks": job.ranks,
        "states": [s.to_dict() for s in job.states],
        # what the report does not show of a rank state, but the job rules read: the same too
        "facts": [tuple(getattr(s, k) for k in s.TRANSIENT) for s in job.states],
        "bucket": snap.bucket is not None,
    }


def _merge(docs):
    """The documents merged into one summary (a summary of summaries)."""
    return node_document(merge_node_documents(docs))


def _report(docs, db):
    """The job's report from summaries: the same pipeline as any snapshot."""
    return pipeline.analyze(merge_node_documents(docs), db)


def test_node_summaries_give_the_flat_verdict(ranks, db, flat):
    docs = [_node(ranks[i:i + 8], db) for i in range(0, RANKS, 8)]
    merged = _report(docs, db)
    assert _verdict(merged) == flat
    f = merged.findings[0]
    assert f.signature in ("rank-missing", "collective-straggler")
    assert any(x.signature == "collective-straggler" and x.ranks == [STRAGGLER] for x in merged.findings)
    # a second level: summaries of summaries (12 nodes -> 3 -> 1)
    level2 = [_merge(docs[i:i + 4]) for i in range(0, len(docs), 4)]
    assert all(d["level"] == 2 for d in level2)
    # a group's members are its "members" only: its finding does not list them again (131,072 ranks)
    assert all("processes" not in g["finding"] and "ranks" not in g["finding"]
               for d in level2 for g in d["findings"] + d["triage"])
    twice = json.loads(json.dumps(level2))
    assert _verdict(_report(twice, db)) == flat
    assert _merge(twice)["level"] == 3


@settings(max_examples=5, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=RANKS - 1), max_size=6, unique=True))
def test_any_grouping_merges_the_same(ranks, db, flat, cuts):
    bounds = [0] + sorted(cuts) + [RANKS]
    nodes = [_node(ranks[a:b], db) for a, b in zip(bounds, bounds[1:])]
    # merge left to right, and as a balanced tree of summaries: the same document
    left = _merge(nodes)
    mid = len(nodes) // 2
    tree = _merge([_merge(nodes[:mid]), _merge(nodes[mid:])] if mid else nodes)
    for d in (left, tree):
        d.pop("level")
    assert left == tree
    assert _verdict(_report(nodes, db)) == flat


def test_stack_table_json_round_trip(ranks, db):
    many = []
    for i in range(80):  # past STACK_TABLE_MIN_PROCESSES
        s = copy.deepcopy(ranks[i % RANKS])
        s.processes[0].rank = i
        many.append(s)
    snap = pipeline.analyze_many(many, db)
    text = render(snap, "json")
    doc = json.loads(text)
    assert "stacks" in doc and len(doc["stacks"]) <= 4
    assert all("frames" not in t and "stack" in t for p in doc["processes"] for t in p["threads"])
    old = expand_stacks(doc)
    assert "stacks" not in old
    assert old["processes"][5]["threads"][0]["frames"] == snap.to_dict()["processes"][5]["threads"][0]["frames"]
    back = read_snapshot(text)
    assert [t.frames for p in back.processes for t in p.threads] == \
        [t.frames for p in snap.processes for t in p.threads]
    assert back.processes[0].threads[0].frames is back.processes[2].threads[0].frames  # shared again
    bad = dict(doc, processes=[dict(doc["processes"][0], threads=[{"tid": 1, "stack": 99}])])
    with pytest.raises(InputError, match="out of range"):
        read_snapshot(json.dumps(bad))


def test_summaries_read_from_files_as_an_input(ranks, db, flat, tmp_path):
    """Summaries are an input like any other: recognised (``is_node_summary``), read from their
    folders (a row's relative file resolved against its summary's folder, at every level), and
    analyzed by ``pipeline.analyze`` with the flat verdict; each class's example rank is read back
    from its file (its stacks in the report)."""
    docs = []
    for n, i in enumerate(range(0, RANKS, 8)):
        node = tmp_path / ("node%02d" % n)
        node.mkdir()
        doc = _node(ranks[i:i + 8], db)
        for j, row in enumerate(doc["processes"]):
            name = "rank%d.json" % row[0]
            (node / name).write_text(render(ranks[i + j], "json"))
            row[12] = name  # relative to the summary's folder
        path = node / "node.node.json"
        path.write_text(json.dumps(doc, separators=(",", ":")))
        docs.append(str(path))
    assert all(is_node_summary(p) for p in docs)
    assert not is_node_summary(str(tmp_path / "node00" / "rank0.json"))
    snap = read_node_summaries(docs)
    assert snap.node_summary.level == 1 and len(snap.processes) == RANKS
    assert all(p.rank_state is not None and p.rank_state.process == i for i, p in enumerate(snap.processes))
    # a summary of summaries written one folder up keeps every row's file reachable
    top = tmp_path / "top.node.json"
    top.write_text(render(read_node_summaries(docs[:6]), "node"))
    rest = tmp_path / "rest.node.json"
    rest.write_text(render(read_node_summaries(docs[6:]), "node"))
    level2 = json.loads(top.read_text())
    assert level2["level"] == 2 and level2["processes"][9][12] == str(tmp_path / "node01" / "rank9.json")
    for paths in (docs, [str(top), str(rest)]):
        report = pipeline.analyze(read_node_summaries(paths), db)
        assert _verdict(report) == flat
        straggler = report.processes[STRAGGLER]
        assert straggler.threads and any("stacks read from" in n for n in straggler.notes)
    with pytest.raises(InputError, match="not a usable node summary"):
        bad = tmp_path / "bad.node.json"
        bad.write_text(json.dumps(dict(json.loads(Path(docs[0]).read_text()), processes=[[1, 2]])))
        read_node_summaries([str(bad)])
