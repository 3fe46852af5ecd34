"""Cluster scale through the merge tree (issue 25.2): node summaries of realistic ranks, merged.

Ranks are bench_job.py's ``heavy`` shape (real captured rank stacks + 9 trainer threads, ~60 frames
each).  Measured, each in a fresh subprocess (peak RSS its own):

* ``node``: one node's summary (8 ranks: analysis + ``--format node``), goal <= 0.5 s;
* ``root``: 131,072 ranks = 16,384 node summaries read from files and merged
  (``acquire/nodesummary.read_node_summaries``), then the job's verdict, classes and tree
  (``pipeline.analyze``), goal <= 5 s and <= 1 GB; and the same from 128 second-level summaries
  (summaries of 128 nodes each);
* ``flat``: 32,768 ranks analyzed flat (every rank's snapshot, interned as acquisition does), goal
  <= 5 s and <= 1 GB (the same figures);
* ``equal``: on 4,096 ranks, the verdict from 512 real node summaries equals the flat merge's.

The 16,384 summaries are made from real ones: each kind of node (plain, the straggler's, those with
another line) is captured once, and copies get their own ranks, pids and files.  Usage:
``python bench/bench_summary.py [--nodes 16384] [--measure NAME]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
PER_NODE = 8
GOALS = {"node": (0.5, None), "root": (5.0, 1024), "root2": (5.0, 1024), "flat": (5.0, 1024), "equal": (None, None)}


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _node_doc(snaps, db):
    from hanganalyze import pipeline
    from hanganalyze.render import render
    from hanganalyze_gdbext.model import Snapshot

    merged = Snapshot()
    for s in snaps:
        merged.processes.extend(s.processes)
    return json.loads(render(pipeline.analyze(merged, db, node_summary=True), "node"))


def _kinds(db, world):
    """{node index: doc} for the nodes that differ (bench_job's variants), and a plain one."""
    import bench_job

    from hanganalyze_gdbext.model import DistIdentity

    special = sorted({r // PER_NODE for r in list(bench_job.VARIANTS) + [bench_job.STRAGGLER]})
    snaps = bench_job.synthesise(PER_NODE * (max(special) + 1), True, intern=True)
    for s in snaps:
        s.processes[0].dist = DistIdentity(world_size=world)
    docs = {n: _node_doc(snaps[n * PER_NODE:(n + 1) * PER_NODE], db) for n in special}
    plain = next(n for n in range(max(special) + 2) if n not in docs)
    base = bench_job.synthesise(PER_NODE, True, intern=True)  # ranks 0-7 are plain
    for s in base:
        s.processes[0].dist = DistIdentity(world_size=world)
    return docs, _node_doc(base, db), plain


def _copy_for(doc, node):
    d = copy.deepcopy(doc)
    for j, row in enumerate(d["processes"]):
        row[0] = node * PER_NODE + j
        row[1] = 200000 + row[0] * 32
        row[12] = "node%05d.rank%d.json" % (node, row[0])
    d["nodes"] = [{"name": "node%05d" % node, "rows": PER_NODE,
                   "ranks": "%d-%d" % (node * PER_NODE, node * PER_NODE + PER_NODE - 1)}]
    return d


def _write_nodes(nodes, world, folder, db):
    docs, plain, _ = _kinds(db, world)
    paths = []
    for n in range(nodes):
        d = _copy_for(docs.get(n, plain), n)
        p = os.path.join(folder, "node%05d.node.json" % n)
        with open(p, "w") as fh:
            json.dump(d, fh, separators=(",", ":"))
        paths.append(p)
    return paths


def measure(name, nodes):
    from hanganalyze import pipeline
    from hanganalyze.acquire import nodesummary
    from hanganalyze.render.node import node_document
    from hanganalyze_gdbext.model import DistIdentity

    db = pipeline.load_signature_db()
    world = nodes * PER_NODE
    if name == "node":
        import bench_job

        snaps = bench_job.synthesise(PER_NODE, True, intern=True)
        t = time.perf_counter()
        doc = _node_doc(snaps, db)
        return {"wall": time.perf_counter() - t, "info": "%d bytes of JSON" % len(json.dumps(doc))}
    if name in ("root", "root2"):
        with tempfile.TemporaryDirectory() as tmp:
            paths = _write_nodes(nodes, world, tmp, db)
            if name == "root2":  # second level: 128 summaries of nodes/128 nodes each
                per = max(nodes // 128, 1)
                level2 = []
                for i in range(0, nodes, per):
                    m = nodesummary.read_node_summaries(paths[i:i + per])
                    p = os.path.join(tmp, "level2.%04d.json" % (i // per))
                    with open(p, "w") as fh:
                        json.dump(node_document(m), fh, separators=(",", ":"))
                    level2.append(p)
                for p in paths:
                    os.unlink(p)
                paths = level2
            size = sum(os.path.getsize(p) for p in paths)
            before = _rss()
            t = time.perf_counter()
            merged = nodesummary.read_node_summaries(paths)
            rows = len(merged.processes)
            t_merge = time.perf_counter() - t
            by_id = any(g.by_id for g in merged.node_summary.groups + merged.node_summary.triage)
            snap = pipeline.analyze(merged, pipeline.load_signature_db() if by_id else None)
            wall = time.perf_counter() - t
        f = snap.findings[0] if snap.findings else None
        return {"wall": wall, "before": before,
                "info": "%d summaries (%.0f MB), %d ranks: merge %.2f s, analysis %.2f s; %s %s; %d classes" % (
                    len(paths), size / 1e6, rows, t_merge, wall - t_merge,
                    f.signature if f else "-", f.ranks[:4] if f else "", len(snap.job.classes))}
    if name == "flat":
        import bench_job

        snaps = bench_job.synthesise(world, True, intern=True)
        for s in snaps:
            s.processes[0].dist = DistIdentity(world_size=world)
        before = _rss()
        t = time.perf_counter()
        snap = pipeline.analyze_many(snaps, db)
        wall = time.perf_counter() - t
        return {"wall": wall, "before": before, "info": "%s %s" % (snap.findings[0].signature, snap.findings[0].ranks)}
    if name == "equal":
        import bench_job

        snaps = bench_job.synthesise(world, True, intern=True)
        for s in snaps:
            s.processes[0].dist = DistIdentity(world_size=world)
        t = time.perf_counter()
        docs = [_node_doc(copy.deepcopy(snaps[i:i + PER_NODE]), db) for i in range(0, world, PER_NODE)]
        t_nodes = time.perf_counter() - t
        tree = pipeline.analyze(nodesummary.merge_node_documents(docs), db)
        flat = pipeline.analyze_many(snaps, db)

        def verdict(s):
            return ([(f.signature, f.ranks, f.summary) for f in s.findings if f.signature != "triage"],
                    [(c.ranks, c.state, c.where) for c in s.job.classes], s.job.tree)
        same = verdict(tree) == verdict(flat)
        return {"wall": t_nodes / len(docs), "equal": same,
                "info": "%d ranks, %d node summaries: verdict %s the flat merge's (%s)" % (
                    world, len(docs), "EQUALS" if same else "DIFFERS FROM", flat.findings[0].summary[:100])}
    raise SystemExit("unknown measurement %s" % name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        res = measure(args.measure, args.nodes)
        res["rss_mb"] = _rss()
        print(json.dumps(res))
        return 0
    plan = [("node", 1), ("root", args.nodes), ("root2", args.nodes), ("flat", 4096), ("equal", 512)]
    print("merge tree of node summaries; load average %.2f" % os.getloadavg()[0])
    ok = True
    for name, nodes in plan:
        out = subprocess.run([sys.executable, __file__, "--measure", name, "--nodes", str(nodes)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print("%-6s FAIL\n%s" % (name, out.stderr[-2000:]))
            ok = False
            continue
        res = json.loads(out.stdout.strip().splitlines()[-1])
        goal_s, goal_mb = GOALS[name]
        good = (goal_s is None or res["wall"] <= goal_s) and (goal_mb is None or res["rss_mb"] <= goal_mb) \
            and res.get("equal", True)
        ok = ok and good
        print("%-6s %7.3f s %7.1f MB peak  goal %s s / %s MB  %s   %s" % (
            name, res["wall"], res["rss_mb"], goal_s, goal_mb, "PASS" if good else "FAIL", res["info"]))
    print("within goal" if ok else "NOT within goal")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
