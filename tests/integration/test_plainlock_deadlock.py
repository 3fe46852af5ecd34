"""The everyday Python deadlock (issue 30): plain ``threading.Lock``s taken in opposite order.

CPython records no owner for a plain Lock; the owners are inferred from the holders' source
(``gdbext/heldlocks.py``).  Real hung processes (tests/fixtures/py_plainlock.py), each read live
(``hanganalyze --pid``) and from a gcore'd core, through the CLI as a user runs it, exit codes
included; ``hang-locks`` in gdb on the 2-thread core; and the same process with its source file
gone, where no owner can be inferred and nothing may say "no deadlock".
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Dict

import pytest
from helpers import FIXTURES, PYENV_ROOT, all_pythons, gcore, gdb_batch, run_hanganalyze, start_hung

from hanganalyze.errors import EXIT_DEADLOCK, EXIT_HANG

FIXTURE = FIXTURES / "py_plainlock.py"
SOURCE_LINES = FIXTURE.read_text().splitlines()

#: mode -> the deadlocked threads: {waiter: (holder, how the holder's source takes the lock, in which def)}
CYCLES = {
    "two": {"worker-a": ("worker-b", "with lock_b:", "take_b_then_a"),
            "worker-b": ("worker-a", "with lock_a:", "take_a_then_b")},
    "ring": {"ring-0": ("ring-1", "with ring[i]:", "ring_member"), "ring-1": ("ring-2", "with ring[i]:", "ring_member"),
             "ring-2": ("ring-0", "with ring[i]:", "ring_member")},
    "acquire": {"acq-a": ("acq-b", "self.second.acquire()", "backward"),
                "acq-b": ("acq-a", "self.first.acquire()", "forward")},
    "condition": {"cond-a": ("cond-b", "with cond_b:", "cond_b_then_a"),
                  "cond-b": ("cond-a", "with cond_a:", "cond_a_then_b")},
    "caller": {"outer-a": ("outer-b", "with shared.LOCK_B:", "outer_b"),
               "outer-b": ("outer-a", "with shared.LOCK_A:", "outer_a")},
}
#: The system's python3 (3.11) for every cycle; 3.12 and 3.13 for the 2-thread case.
CYCLE_CASES = [(m, "system-3.11") for m in CYCLES] + [("two", "3.12"), ("two", "3.13")]
_collected: Dict = {}


def _line_of(text: str, function: str) -> int:
    """The fixture's line (1-based) of the first statement ``text`` in ``def function``."""
    start = next(i for i, line in enumerate(SOURCE_LINES) if line.strip().startswith("def %s(" % function))
    return next(i + 1 for i in range(start, len(SOURCE_LINES)) if SOURCE_LINES[i].split("#")[0].strip() == text)


def _analyze(target, tmp: Path, name: str) -> Dict:
    out = tmp / name
    res = run_hanganalyze(list(target) + ["--format", "json", "-o", out], timeout=240)
    assert res.returncode in (0, EXIT_HANG, EXIT_DEADLOCK), res.stderr.decode()[-2000:]
    report = json.loads(out.read_text())
    report["rc"] = res.returncode
    return report


def _collect(mode: str, py: str, tmp_path_factory) -> Dict:
    """One hung process per (mode, python): analyzed live, gcore'd, the core analyzed (once)."""
    if (mode, py) in _collected:
        return _collected[(mode, py)]
    exe = all_pythons().get(py)
    if exe is None:
        pytest.skip("CPython %s is not installed here (pyenv or ~/.cache/hanganalyze/pythons)" % py)
    tmp = tmp_path_factory.mktemp("plainlock-%s-%s" % (mode, py))
    h = start_hung([exe, FIXTURE, mode], settle=0.5)
    try:
        live = _analyze(["--pid", h.pid], tmp, "live.json")
        core = gcore(h.pid, tmp)
    finally:
        h.kill()
    got = _collected[(mode, py)] = {"mode": mode, "py": py, "exe": exe, "core": core,
                                    "reports": {"live": live, "core": _analyze([core], tmp, "core.json")}}
    return got


@pytest.fixture(scope="module", params=CYCLE_CASES, ids=["%s-%s" % c for c in CYCLE_CASES])
def cycle(request, tmp_path_factory):
    return _collect(request.param[0], request.param[1], tmp_path_factory)


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory):
    return _collect("sleeper", "system-3.11", tmp_path_factory)


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    return _collect("busy", "system-3.11", tmp_path_factory)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return _collect("two", "system-3.11", tmp_path_factory)


def _threads(report: Dict) -> Dict[str, Dict]:
    return {t["name"]: t for t in report["processes"][0]["threads"] if t.get("name")}


def test_cycle_over_plain_locks_is_a_deadlock(cycle):
    case = cycle
    want = CYCLES[case["mode"]]
    for source, report in case["reports"].items():
        threads = _threads(report)
        tids = {name: threads[name]["tid"] for name in want}
        cycles = [f for f in report["findings"] if f["signature"] == "deadlock-cycle"]
        assert len(cycles) == 1, (source, [f["signature"] for f in report["findings"]])
        f = cycles[0]
        assert f["severity"] == "deadlock" and sorted(f["threads"]) == sorted(tids.values()), (source, f)
        assert 0 < f["confidence"] <= 0.85, (source, f["confidence"])  # inferred: below memory's 1.0
        assert "inferred from source" in f["summary"], f["summary"]
        for waiter, (holder, how, function) in want.items():
            w = threads[waiter]["waits"]
            assert (w["kind"], w["owner_tid"]) == ("pylock", tids[holder]), (source, waiter, w)
            assert w["owner_inferred"] == "`%s` at %s:%d" % (how, FIXTURE, _line_of(how, function)), (source, w)
            assert "thread %s (LWP %d)" % (waiter, tids[waiter]) in f["summary"]
            ev = next(e for e in f["evidence"] if e["thread"] == tids[waiter])
            assert "held by LWP %d (inferred from source: `%s`" % (tids[holder], how) in ev["text"], ev
        assert report["rc"] == EXIT_DEADLOCK, (source, report["rc"])
    if case["mode"] == "two":
        s = cycles[0]["summary"]
        assert "holds lock_a, waits for lock_b" in s and "holds lock_b, waits for lock_a" in s, s
    if case["mode"] == "caller":  # named after the holder's spelling (the waiter's local is `lock`)
        assert "holds shared.LOCK_A, waits for shared.LOCK_B" in cycles[0]["summary"]


def test_holder_that_sleeps_is_no_cycle(sleeper):
    for source, report in sleeper["reports"].items():
        threads = _threads(report)
        w = threads["waiter"]["waits"]
        assert (w["kind"], w["name"], w["owner_tid"]) == ("pylock", "lock_a", threads["holder"]["tid"]), (source, w)
        assert "with lock_a:" in w["owner_inferred"]
        assert not [f for f in report["findings"] if f["severity"] == "deadlock"], source
        triage = next(f for f in report["findings"] if f["signature"] == "triage")
        assert triage["triage"]["wait"] == "lock", triage["triage"]
        assert report["rc"] == EXIT_HANG, (source, report["rc"])  # stuck, but no deadlock


def test_holder_that_works_is_progress(busy):
    """The holder keeps computing inside ``with lock_a:``: live, the samples see it progress, so the
    process is not hung (exit 0); a core is one instant and cannot tell (exit 3, the waiter's wait)."""
    for source, report in busy["reports"].items():
        threads = _threads(report)
        assert threads["waiter"]["waits"]["owner_tid"] == threads["holder"]["tid"], source
        assert not [f for f in report["findings"] if f["severity"] == "deadlock"], source
    live, core = busy["reports"]["live"], busy["reports"]["core"]
    assert _threads(live)["holder"]["progress"]["state"] == "progressing"
    assert (live["rc"], core["rc"]) == (0, EXIT_HANG)


def test_hang_locks_in_gdb(two):
    out = gdb_batch(["hang-locks"], core=two["core"], exe=two["exe"])
    assert "Deadlock: thread worker-a" in out, out[-3000:]
    assert "holds lock_a, waits for lock_b" in out and "holds lock_b, waits for lock_a" in out, out[-3000:]
    line = _line_of("with lock_b:", "take_b_then_a")
    assert "(inferred from source: `with lock_b:` at %s:%d)" % (FIXTURE, line) in out
    assert "No deadlock cycle" not in out


def test_without_the_source_no_owner_and_no_all_clear(tmp_path):
    """The fixture run from a copy that is then deleted: nothing proves an owner, so there is no
    cycle -- and neither hang-locks nor the exit code says the process is fine."""
    exe = all_pythons().get("system-3.11")
    if exe is None:
        pytest.skip("Debian's /usr/bin/python3.11 is not installed here")
    copy = tmp_path / "gone.py"
    shutil.copy(FIXTURE, copy)
    h = start_hung([exe, copy, "two"], settle=0.5)
    try:
        copy.unlink()
        report = _analyze(["--pid", h.pid], tmp_path, "live.json")
        core = gcore(h.pid, tmp_path)
    finally:
        h.kill()
    threads = _threads(report)
    for name in ("worker-a", "worker-b"):
        w = threads[name]["waits"]
        assert (w["kind"], w["owner_tid"]) == ("pylock", None) and "owner_inferred" not in w, w
        assert "held by unknown" in w["detail"]
    assert not [f for f in report["findings"] if f["signature"] == "deadlock-cycle"]
    assert report["rc"] == EXIT_HANG
    out = gdb_batch(["hang-locks"], core=core, exe=exe)
    assert "No deadlock cycle." not in out, out[-3000:]
    assert "No deadlock cycle proven: 2 thread(s) wait for a lock whose owner is unknown" in out, out[-3000:]
    assert "held by unknown (owner not recorded)" in out


def _pybt_paste(mode: str, tmp: Path) -> Path:
    """gdb's ``thread apply all py-bt`` (CPython's python-gdb.py) of the hung fixture, as a user
    pastes it: a text with the threads' LWPs, Python frames and source lines, and no addresses
    of the locks."""
    found = [p for p in [all_pythons().get("3.11"), *sorted(PYENV_ROOT.glob("versions/3.11*/bin/python3.11"))]
             if p is not None and Path(str(p) + "-gdb.py").is_file()]
    if not found:
        pytest.skip("py-bt needs a CPython 3.11 with its python3.11-gdb.py (pyenv's has it)")
    exe, gdb_py = found[0], Path(str(found[0]) + "-gdb.py")
    h = start_hung([exe, FIXTURE, mode], settle=0.5)
    try:
        res = subprocess.run(["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-p", str(h.pid),
                              "-ex", "source %s" % gdb_py, "-ex", "thread apply all py-bt"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    finally:
        h.kill()
    paste = tmp / ("%s.pybt.txt" % mode)
    paste.write_bytes(res.stdout)
    assert b"Traceback (most recent call first)" in res.stdout, res.stdout[-2000:]
    return paste


def test_paste_names_the_locks(tmp_path):
    """A paste has no memory: the awaited lock is named by the waiting line (``with lock_b:``) and
    matched by name to the module global another thread's frame holds."""
    report = _analyze([_pybt_paste("two", tmp_path)], tmp_path, "paste.json")
    (f,) = [f for f in report["findings"] if f["signature"] == "deadlock-cycle"]
    threads = {t["waits"]["name"]: t for t in report["processes"][0]["threads"] if t.get("waits")}
    a, b = threads["lock_b"], threads["lock_a"]  # worker-a waits for lock_b, worker-b for lock_a
    assert a["waits"]["owner_tid"] == b["tid"] and b["waits"]["owner_tid"] == a["tid"], threads
    assert a["waits"]["owner_inferred"] == "`with lock_b:` at %s:%d" % (FIXTURE, _line_of("with lock_b:",
                                                                                         "take_b_then_a"))
    assert "holds lock_a, waits for lock_b" in f["summary"] and "inferred from source" in f["summary"], f
    assert report["rc"] == EXIT_DEADLOCK


def test_paste_does_not_match_attributes_by_name(tmp_path):
    """``self.second`` in two frames may be two locks: without addresses, no edge and no cycle."""
    report = _analyze([_pybt_paste("acquire", tmp_path)], tmp_path, "paste.json")
    assert not [f for f in report["findings"] if f["signature"] == "deadlock-cycle"]
    assert not [t for t in report["processes"][0]["threads"] if (t.get("waits") or {}).get("owner_inferred")]
