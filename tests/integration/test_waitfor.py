"""Wait-for graphs from real hung processes, live and from their cores.

One process per (fixture, interpreter/build), module-scoped: it is snapshotted live, cored with
gcore, and the core is snapshotted too; every test then checks both snapshots.  The fixtures
run several independent hangs at once (see tests/fixtures/wf_native.cpp and wf_python.py).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Dict

import pytest
from helpers import (
    FIXTURES,
    LOAD_PY,
    all_pythons,
    built_pythons,
    fixture_binary,
    gcore,
    gdb_batch,
    gdb_snapshot,
    py_free_threaded,
    start_hung,
)

from hanganalyze.analyze.waitfor import annotate_waitgraphs, cycle_findings
from hanganalyze.render.waitsvg import describe_cycles, render_svg
from hanganalyze_gdbext.model import Snapshot, Wait

NATIVE_BUILDS = ["wf_native", "wf_native.stripped"]
#: plus the scripts/pythons.sh builds (3.14, 3.14t, 3.13t, each with and without debug info)
PYTHONS = ["3.8", "3.12", "3.13", "system-3.11"] + sorted(built_pythons())


def _snapshot_without_libc_debuginfo(core: Path, exe: Path) -> dict:
    """hang-dump of a core with gdb told not to find separate debug info (a stripped libc)."""
    import json

    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        subprocess.run(
            ["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
             "-iex", "set debug-file-directory /nonexistent", "-ex", "file %s" % exe, "-ex", "core-file %s" % core,
             "-ex", "source %s" % LOAD_PY, "-ex", "hang-dump %s" % out],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180, check=False,
        )
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def _analyzed(d: dict) -> Snapshot:
    snap = Snapshot.from_dict(d)
    annotate_waitgraphs(snap)
    snap.findings = cycle_findings(snap)
    return snap


def _collect(argv, exe: Path, tmp: Path, settle: float, extra_nodebug: bool) -> Dict[str, Snapshot]:
    h = start_hung(argv, settle=settle)
    try:
        live = gdb_snapshot(pid=h.pid)
        core = gcore(h.pid, tmp)
    finally:
        h.kill()
    snaps = {"live": _analyzed(live), "core": _analyzed(gdb_snapshot(core=core, exe=exe))}
    if extra_nodebug:
        snaps["core-nolibcdbg"] = _analyzed(_snapshot_without_libc_debuginfo(core, exe))
    # LWP names: live snapshots have them; cores carry no thread names for native threads.
    snaps["tids"] = {t.name: t.tid for t in snaps["live"].processes[0].threads if t.name}  # type: ignore
    snaps["core_path"] = core  # type: ignore
    snaps["exe"] = exe  # type: ignore
    snaps["pid"] = h.pid  # type: ignore  (the main thread's LWP)
    return snaps


@pytest.fixture(scope="module", params=NATIVE_BUILDS)
def native(request, tmp_path_factory):
    exe = fixture_binary(request.param)
    return _collect([exe], exe, tmp_path_factory.mktemp(request.param), 0.3,
                    extra_nodebug=request.param.endswith(".stripped"))


@pytest.fixture(scope="module", params=PYTHONS)
def python(request, tmp_path_factory):
    pys = all_pythons()
    if request.param not in pys:
        pytest.skip("python %s not installed" % request.param)
    fixture_binary("libwf_gil.so")
    exe = pys[request.param]
    snaps = _collect([exe, FIXTURES / "wf_python.py"], exe, tmp_path_factory.mktemp("py" + request.param), 1.0,
                     extra_nodebug=request.param.startswith("system"))
    snaps["free_threaded"] = py_free_threaded(request.param)  # type: ignore
    return snaps


def _sources(snaps):
    return [(k, v) for k, v in snaps.items() if isinstance(v, Snapshot)]


def _cycles_by_tid(snap: Snapshot):
    p = snap.processes[0]
    out = []
    for c in (p.waitgraph.cycles if p.waitgraph else []):
        out.append(frozenset(int(n[1:]) for n in c if n.startswith("t")))
    return out


def _waits(snap: Snapshot, tid: int) -> Wait:
    t = snap.processes[0].thread_by_tid(tid)
    assert t is not None, tid
    assert t.waits, "thread %s records no wait" % tid
    return t.waits


# -- native ---------------------------------------------------------------------------------------
def test_native_cycles(native):
    tids = native["tids"]
    want = {
        frozenset({tids["poster"], tids["reconciler"]}),
        frozenset({tids["ring0"], tids["ring1"], tids["ring2"]}),
        frozenset({tids["joiner"], tids["keeper"]}),
    }
    for source, snap in _sources(native):
        got = _cycles_by_tid(snap)
        assert set(got) == want, (source, got)
        findings = [f for f in snap.findings if f.signature == "deadlock-cycle"]
        assert len(findings) == 3 and all(f.severity == "deadlock" for f in findings), source
        for f in findings:
            assert len(f.evidence) == len(f.threads)
            assert all(isinstance(e.frame, int) for e in f.evidence), (source, f.evidence)


def test_native_owners_and_chain(native):
    tids = native["tids"]
    for source, snap in _sources(native):
        assert _waits(snap, tids["poster"]).owner_tid == tids["reconciler"], source
        assert _waits(snap, tids["reconciler"]).owner_tid == tids["poster"], source
        assert _waits(snap, tids["ring0"]).owner_tid == tids["ring1"], source
        # with libc debug info the mutex comes from frame arguments, without it from registers
        how = "registers" if source == "core-nolibcdbg" else "debug info"
        assert _waits(snap, tids["poster"]).detail.endswith("[found via %s]" % how), source
        j = _waits(snap, tids["joiner"])
        assert (j.kind, j.owner_tid) == ("join", tids["keeper"]), source
        k = _waits(snap, tids["keeper"])
        assert (k.kind, k.owner_tid) == ("mutex", tids["joiner"]), source
        rw = _waits(snap, tids["rwwriter"])
        assert (rw.kind, rw.owner_tid) == ("rwlock", tids["rwholder"]), source
        assert snap.processes[0].thread_by_tid(tids["rwholder"]).waits is None
        g = snap.processes[0].waitgraph
        chains = g.chains if g else []
        assert ["t%d" % tids["rwwriter"], "r:rwlock:%s" % rw.resource, "t%d" % tids["rwholder"]] in chains
        assert not any(tids["rwwriter"] in c for c in _cycles_by_tid(snap))


def test_native_words_and_frames(native):
    tids = native["tids"]
    live = native["live"]
    lines = describe_cycles(live.processes[0])
    abba = "thread poster (LWP %d)" % tids["poster"]
    assert any(abba in s and s.startswith("Deadlock:") for s in lines), lines
    assert any(s.startswith("Blocked behind: thread rwwriter") for s in lines), lines
    if not str(native["exe"]).endswith(".stripped"):
        # symbols name the resources and the frame where each thread waits
        assert any("holds ledger, waits for audit" in s for s in lines), lines
        poster = live.processes[0].thread_by_tid(tids["poster"])
        assert poster.frames[poster.waits.frame].function == "poster"
    svg = render_svg(live.processes[0].waitgraph)
    assert svg.startswith("<svg") and svg.count("wf-cycle") >= 7 and "<script" not in svg


# -- python ---------------------------------------------------------------------------------------
def test_python_cycles(python):
    tids = python["tids"]
    want = {
        frozenset({tids["poster"], tids["reconciler"]}),
        frozenset({tids["joiner"], tids["keeper"]}),
        frozenset({tids["payer-ab"], tids["payer-ba"]}),
    }
    if not python["free_threaded"]:
        want.add(frozenset({tids["gatekeeper"], python["pid"]}))  # MainThread holds the GIL
    for source, snap in _sources(python):
        assert set(_cycles_by_tid(snap)) == want, (source, _cycles_by_tid(snap))
        assert sum(f.signature == "deadlock-cycle" for f in snap.findings) == len(want)


def test_python_rlock_owners_and_names(python):
    tids = python["tids"]
    for source, snap in _sources(python):
        w = _waits(snap, tids["poster"])
        assert (w.kind, w.owner_tid, w.name) == ("rlock", tids["reconciler"], "audit"), source
        w = _waits(snap, tids["reconciler"])
        assert (w.kind, w.owner_tid, w.name) == ("rlock", tids["poster"], "ledger"), source
        j = _waits(snap, tids["joiner"])
        assert (j.kind, j.owner_tid) == ("pyjoin", tids["keeper"]), source
        words = describe_cycles(snap.processes[0])
        assert any("holds ledger, waits for audit" in s for s in words), words


def test_python_attribute_lock_names(python):
    """Locks kept in attributes are named by the attribute, found from the waiter's locals:
    ``self._lock`` of two Account objects (told apart by address), ``self.locks[1]`` of a Store."""
    tids = python["tids"]
    for source, snap in _sources(python):
        ab, ba = _waits(snap, tids["payer-ab"]), _waits(snap, tids["payer-ba"])
        assert (ab.kind, ab.owner_tid) == ("rlock", tids["payer-ba"]), source
        assert ab.name == "Account._lock@%s" % ab.resource, (source, ab)
        assert ba.name == "Account._lock@%s" % ba.resource and ba.resource != ab.resource, source
        assert ab.detail.endswith("(dst._lock in the waiting frame)"), (source, ab.detail)
        sw = _waits(snap, tids["shardwaiter"])
        assert (sw.kind, sw.owner_tid, sw.name) == ("rlock", tids["shardholder"], "Store.locks[1]"), source
        words = describe_cycles(snap.processes[0])
        cycle = next(s for s in words if "payer-ab" in s and s.startswith("Deadlock:"))
        assert "holds %s, waits for %s" % (ba.name, ab.name) in cycle, cycle
        assert "holds %s, waits for %s" % (ab.name, ba.name) in cycle, cycle
        assert any(s.startswith("Blocked behind: thread shardwaiter") and "waits for Store.locks[1] held by "
                   "shardholder" in s for s in words), words
        # module globals are still named as before (no attribute of a local holds them)
        assert _waits(snap, tids["poster"]).name == "audit"


def test_python_gil_inversion(python):
    tids = python["tids"]
    main = python["pid"]
    if python["free_threaded"]:
        # no GIL: the callback runs, the gate is released, nothing waits for a GIL
        for source, snap in _sources(python):
            p = snap.processes[0]
            assert all(t.state.gil is None for t in p.threads), source
            assert not any(t.waits is not None and t.waits.kind == "gil" for t in p.threads), source
        return
    for source, snap in _sources(python):
        g = _waits(snap, tids["gatekeeper"])
        assert (g.kind, g.owner_tid) == ("gil", main), source
        m = _waits(snap, main)
        assert (m.kind, m.owner_tid, m.name) == ("mutex", tids["gatekeeper"], "wf_gate"), source
        f = next(f for f in snap.findings if tids["gatekeeper"] in f.threads)
        assert "GIL" in f.title and any("release" in x for x in f.fix)


def test_python_chain_and_plain_lock(python):
    tids = python["tids"]
    for source, snap in _sources(python):
        cyc = _cycles_by_tid(snap)
        for name in ("front", "middle", "sleeper", "locker", "lockwaiter", "idler"):
            assert not any(tids[name] in c for c in cyc), (source, name)
        assert _waits(snap, tids["front"]).owner_tid == tids["middle"]
        assert _waits(snap, tids["middle"]).owner_tid == tids["sleeper"]
        chains = snap.processes[0].waitgraph.chains
        chain = next(c for c in chains if c[0] == "t%d" % tids["front"])
        assert chain[-1] == "t%d" % tids["sleeper"], chain
        lw = _waits(snap, tids["lockwaiter"])
        # a plain Lock records no owner: locker's source (`gate_lock.acquire()`, no release) names it
        assert (lw.kind, lw.owner_tid, lw.name) == ("pylock", tids["locker"], "gate_lock"), (source, lw)
        assert "inferred from source: `gate_lock.acquire()` at " in lw.detail, lw.detail
        assert lw.owner_inferred.startswith("`gate_lock.acquire()` at %s:" % (FIXTURES / "wf_python.py"))
        assert not any(tids["lockwaiter"] in c for c in cyc)  # the holder sleeps: a chain, no cycle
        idle = _waits(snap, tids["idler"])
        assert (idle.kind, idle.owner_tid) == ("condvar", None), (source, idle)
        assert any(s.startswith("Blocked behind: thread front") for s in describe_cycles(snap.processes[0]))


def test_hang_locks_command(python):
    out = gdb_batch(["hang-locks"], core=python["core_path"], exe=python["exe"])
    assert "Deadlock: thread poster" in out or "Deadlock: thread reconciler" in out, out[-3000:]
    assert "No deadlock cycle" not in out


def test_hang_locks_command_native(native):
    out = gdb_batch(["hang-locks"], core=native["core_path"], exe=native["exe"])
    assert out.count("Deadlock: thread") == 3, out[-3000:]
    assert "Blocked behind: thread LWP %d" % native["tids"]["rwwriter"] in out
    assert "--rwlock-->" in out and "--join-->" in out
