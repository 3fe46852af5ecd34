"""Wait-for graph, cycle findings, sentences and SVG on hand-built snapshots (no gdb)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hanganalyze.analyze.waitfor import annotate_waitgraphs, cycle_findings
from hanganalyze.render.waitsvg import describe_cycles, render_svg
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread, Wait, waitgraph


def _t(tid, name, kind=None, res=None, owner=None, rname=None, frames=None):
    t = Thread(tid=tid, name=name, frames=frames or [Frame(kind="native", function="work")])
    if kind:
        t.waits = Wait(kind=kind, resource=res, name=rname, owner_tid=owner, frame=0, detail="waiting")
    return t


def _snap(*threads) -> Snapshot:
    return Snapshot(processes=[Process(source="core", pid=1, threads=list(threads))])


def test_abba_cycle_words_and_finding():
    snap = _snap(
        _t(812, "poster", "rlock", "0x10", 813, "audit"),
        _t(813, "reconciler", "rlock", "0x20", 812, "ledger"),
        _t(814, "idle"),
    )
    annotate_waitgraphs(snap)
    g = snap.processes[0].waitgraph
    assert g.cycles == [["t812", "r:rlock:0x10", "t813", "r:rlock:0x20"]]
    assert g.chains == []
    assert {n.id for n in g.nodes} == {"t812", "t813", "r:rlock:0x10", "r:rlock:0x20"}
    [f] = cycle_findings(snap)
    assert (f.signature, f.severity, f.threads) == ("deadlock-cycle", "deadlock", [812, 813])
    assert f.summary == ("thread poster (LWP 812) holds ledger, waits for audit; "
                         "thread reconciler (LWP 813) holds audit, waits for ledger")
    assert [e.thread for e in f.evidence] == [812, 813]
    assert describe_cycles(snap.processes[0]) == ["Deadlock: " + f.summary + "."]


def test_chain_is_not_a_cycle_and_ends_at_running_thread():
    sleeper = _t(3, "sleeper", frames=[Frame(kind="native", function="clock_nanosleep")])
    snap = _snap(_t(1, "front", "mutex", "0xa", 2, "shelf"), _t(2, "middle", "mutex", "0xb", 3, "crate"), sleeper)
    annotate_waitgraphs(snap)
    g = snap.processes[0].waitgraph
    assert g.cycles == [] and cycle_findings(snap) == []
    assert g.chains == [["t1", "r:mutex:0xa", "t2", "r:mutex:0xb", "t3"]]
    [line] = describe_cycles(snap.processes[0])
    assert line == ("Blocked behind: thread front (LWP 1) waits for shelf held by middle (LWP 2), which waits for "
                    "crate held by sleeper (LWP 3), which is not waiting on a lock (running or in a system call: "
                    "clock_nanosleep).")


def test_unknown_owner_gives_no_edge_and_no_cycle():
    snap = _snap(_t(1, "a", "pylock", "0xa", None, "gate_lock"), _t(2, "b", "pyjoin", "0xb", 1))
    annotate_waitgraphs(snap)
    g = snap.processes[0].waitgraph
    assert not any(e.kind == "held_by" and e.src == "r:pylock:0xa" for e in g.edges)
    assert g.cycles == []
    assert g.chains == [["t2", "r:pyjoin:0xb", "t1", "r:pylock:0xa"]]
    assert "whose owner is unknown" in describe_cycles(snap.processes[0])[0]


def test_three_cycle_join_and_gil_words():
    snap = _snap(
        _t(10, "MainThread", "mutex", "0x1", 11, "wf_gate"),
        _t(11, "gatekeeper", "gil", "0x2", 10, "GIL"),
        _t(20, "joiner", "join", "0x3", 21),
        _t(21, "keeper", "mutex", "0x4", 20, "vault"),
        _t(30, "r0", "mutex", "0x5", 31), _t(31, "r1", "mutex", "0x6", 32), _t(32, "r2", "mutex", "0x7", 30),
    )
    annotate_waitgraphs(snap)
    cycles = snap.processes[0].waitgraph.cycles
    assert [len(c) for c in cycles] == [4, 4, 6]
    fs = {tuple(f.threads): f for f in cycle_findings(snap)}
    gil = fs[(10, 11)]
    assert "GIL" in gil.title and gil.summary == (
        "thread MainThread (LWP 10) holds the GIL, waits for wf_gate; "
        "thread gatekeeper (LWP 11) holds wf_gate, waits for the GIL")
    assert fs[(20, 21)].summary == ("thread joiner (LWP 20) holds vault, waits for thread keeper (LWP 21) to exit "
                                    "(join); thread keeper (LWP 21) waits for vault")
    assert fs[(30, 31, 32)].title.startswith("Deadlock: 3 threads")


def test_self_deadlock():
    snap = _snap(_t(5, "solo", "mutex", "0x9", 5, "m"))
    annotate_waitgraphs(snap)
    [f] = cycle_findings(snap)
    assert f.threads == [5] and "itself" in f.title


def test_no_waits_no_graph():
    snap = _snap(_t(1, "a"))
    annotate_waitgraphs(snap)
    assert snap.processes[0].waitgraph is None and cycle_findings(snap) == []
    assert render_svg(None) == "" and describe_cycles(snap.processes[0]) == []


def test_svg_is_wellformed_and_escaped():
    evil = '<script>alert("x")</script>&'
    snap = _snap(_t(1, evil, "mutex", "0xa", 2, evil), _t(2, "b", "mutex", "0xb", 1, "m2"))
    annotate_waitgraphs(snap)
    svg = render_svg(snap.processes[0].waitgraph)
    assert "<script" not in svg and "&lt;script&gt;" in svg
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag.endswith("svg")
    assert svg.count('class="wf-edge wf-cycle"') == 4
    assert svg == render_svg(snap.processes[0].waitgraph)  # deterministic


def test_graph_roundtrips_through_json():
    snap = _snap(_t(1, "a", "mutex", "0xa", 2), _t(2, "b", "mutex", "0xb", 1))
    annotate_waitgraphs(snap)
    again = Snapshot.from_dict(snap.to_dict())
    assert again.processes[0].waitgraph == snap.processes[0].waitgraph
    assert waitgraph.build(again.processes[0]) == snap.processes[0].waitgraph


def test_svg_caps_rows_keeping_cycles():
    ring = [_t(i, "r%d" % i, "mutex", hex(0x1000 + i), (i + 1) % 5) for i in range(5)]
    idle = [_t(100 + i, "w%d" % i, "condvar", hex(0x9000 + i)) for i in range(200)]
    snap = _snap(*(idle + ring))
    annotate_waitgraphs(snap)
    svg = render_svg(snap.processes[0].waitgraph)
    ET.fromstring(svg)
    assert svg.count('class="wf-node wf-thread"') == 60
    assert "145 more waiting threads not drawn" in svg
    assert svg.count('class="wf-edge wf-cycle"') == 10  # the whole 5-cycle is drawn


def test_bystander_waiting_on_a_cycle_resource_is_a_chain_into_the_cycle():
    snap = _snap(
        _t(1, "poster", "mutex", "0x10", 2, "audit"),
        _t(2, "reconciler", "mutex", "0x20", 1, "ledger"),
        _t(3, "reporter", "mutex", "0x20", 1, "ledger"),
    )
    annotate_waitgraphs(snap)
    g = snap.processes[0].waitgraph
    assert len(g.cycles) == 1 and len(cycle_findings(snap)) == 1
    assert g.chains == [["t3", "r:mutex:0x20", "t1"]]
    lines = describe_cycles(snap.processes[0])
    assert lines[1] == ("Blocked behind: thread reporter (LWP 3) waits for ledger held by poster (LWP 1), "
                        "which is part of a deadlock cycle.")
