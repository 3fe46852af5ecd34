"""Merged Python + native stacks from real gdb (13.1, ``gdb`` on PATH) on real interpreters.

For every pyenv CPython 3.8-3.13 and Debian's stripped /usr/bin/python3.11, one fixture process
(``tests/fixtures/py_named_threads.py``) is analyzed live (attach) and from a gcore core of the
same process.  Expected Python frames come from the ``# L:<tag>`` markers in the fixture.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import (
    BUILT_NAMES,
    FIXTURES,
    SHARED_NAMES,
    all_pythons,
    built_pythons,
    gcore,
    gdb_batch,
    gdb_snapshot,
    need_python,
    py_debug_info,
    py_free_threaded,
    py_static,
    py_version,
    start_hung,
)

FIXTURE = FIXTURES / "py_named_threads.py"
PYTHONS = all_pythons()
SORT_NATIVES = {"builtin_sorted", "list_sort", "list_sort_impl"}


def _tags() -> dict:
    tags = {}
    for i, line in enumerate(FIXTURE.read_text().splitlines(), 1):
        m = re.search(r"# L:(\w+)", line)
        if m:
            tags[m.group(1)] = i
    return tags


TAGS = _tags()


def _py(frames):
    return [f for f in frames if f["kind"] == "python"]


def _mine(frames):
    """(function, line) of the Python frames in the fixture file, innermost first."""
    return [(f["function"], f["line"]) for f in _py(frames) if (f.get("file") or "").endswith(FIXTURE.name)]


#: pyenv builds re-run against a stripped copy of their libpython (LD_LIBRARY_PATH beats their
#: RUNPATH): shared libpython without any symbols, like distro/conda builds without debuginfo.
STRIPPED = ["stripped-%s" % k for k in ("3.9", "3.13") if k in PYTHONS and shutil.which("strip")]
KEYS = sorted(PYTHONS) + STRIPPED


def base(key: str) -> str:
    """"3.9" for "3.9", "stripped-3.9" and "system-3.9"; "3.14" for "3.14t" and "nodebug-3.14t"."""
    return py_version(key)


def minor(key: str) -> tuple:
    return tuple(int(x) for x in base(key).split("."))


def nosyms(key: str) -> bool:
    """No symbols for CPython's static functions: stripped libpython, Debian's python3.11, the
    scripts/pythons.sh builds' copies without debug info."""
    return key.startswith(("system-", "stripped-", "nodebug-"))


@pytest.fixture(scope="module", params=KEYS)
def analyzed(request, tmp_path_factory):
    """(version key, live snapshot, core snapshot, hang-bt/bt text of the core)."""
    key = request.param
    exe = PYTHONS[base(key)] if key.startswith("stripped-") else PYTHONS[key]
    env = None
    if key.startswith("stripped-"):
        libdir = tmp_path_factory.mktemp("lib-%s" % key)
        lib = exe.parent.parent / "lib" / ("libpython%s.so.1.0" % base(key))
        subprocess.run(["strip", "-o", str(libdir / lib.name), str(lib)], check=True)
        env = {"LD_LIBRARY_PATH": str(libdir)}
    proc = start_hung([exe, FIXTURE], ready="READY", settle=0.5, env=env)
    try:
        live = gdb_snapshot(pid=proc.pid)
        core = gcore(proc.pid, tmp_path_factory.mktemp("core-%s" % key))
    finally:
        proc.kill()
    fd, out = tempfile.mkstemp(suffix=".json")
    try:
        probe = ("python import gdb; from hanganalyze_gdbext.pyframes import runtime as R, tables as T, "
                 "objects as O; from hanganalyze_gdbext.gdbtarget import GdbTarget; G = GdbTarget(); "
                 "m = O.Memory(gdb.selected_inferior().read_memory); "
                 "t = T.table_for(R.version_from_files(G)[0]); "
                 "print('PYRUNTIME', G.section_address('.PyRuntime'), G.symbol_address('_PyRuntime'), "
                 "R.scan_for_runtime(G, m, t) if 'is.threads_head' in t else 'no-table'); "
                 "print('VSYM', R.version_from_symbols(G)); "
                 "from hanganalyze_gdbext.pyframes.walker import GLIBC_PTHREAD_TID as O2; "
                 "print('TIDOFF', all(m.u32(int.from_bytes(t.handle(), 'little') + O2) == t.ptid[1] "
                 "for t in gdb.selected_inferior().threads()))")
        text = gdb_batch(["hang-dump %s" % out, "hang-bt -a", "thread apply all bt", probe,
                          "disable frame-filter global hanganalyze-python", "echo FILTER-OFF-1\\n",
                          "thread apply all bt", "enable frame-filter global hanganalyze-python",
                          "hang-bt-filter off", "echo FILTER-OFF-2\\n", "thread apply all bt"], core=core, exe=exe)
        core_snap = json.loads(Path(out).read_text())
    finally:
        Path(out).unlink()
        core.unlink()
    return key, live, core_snap, text


def _threads(snap):
    proc = snap["processes"][0]
    return proc, {t.get("python_name"): t for t in proc["threads"] if t.get("python_name")}


@pytest.mark.parametrize("source", ["live", "core"])
def test_named_threads_and_frames(analyzed, source):
    key, live, core, _ = analyzed
    proc, by_name = _threads(live if source == "live" else core)
    assert proc["python"]["version"].startswith(base(key))
    names = ("MainThread", "sorter", "waiter-1", "waiter-2", "spinner", "collector")
    assert set(names) <= set(by_name), list(by_name)
    for name in names:
        assert by_name[name]["merge"] == "merged", (name, by_name[name].get("notes"))
        assert by_name[name]["name"] == name
    assert _mine(by_name["MainThread"]["frames"]) == [("main", TAGS["main"]), ("<module>", TAGS["module"])]
    assert _mine(by_name["sorter"]["frames"]) == [
        ("sort_key", TAGS["key"]), ("do_sort", TAGS["sorted"]), ("sorter_main", TAGS["sorter_main"])]
    for w in ("waiter-1", "waiter-2"):
        assert _mine(by_name[w]["frames"]) == [
            ("level3", TAGS["level3"]), ("level2", TAGS["level2"]), ("level1", TAGS["level1"]),
            ("waiter_main", TAGS["waiter_main"])]
    assert _mine(by_name["collector"]["frames"]) == [("Blocker.__del__" if base(key) not in ("3.8", "3.9", "3.10")
                                                     else "__del__", TAGS["finalizer"]),
                                                    ("collector_main", TAGS["gc_collect"])]
    unnamed = [t for t in proc["threads"] if not t.get("python_name") and _py(t["frames"])]
    assert len(unnamed) == 1 and unnamed[0]["merge"] == "merged"
    assert unnamed[0]["name"] == unnamed[0].get("os_name")  # no threading name: the OS name
    assert _mine(unnamed[0]["frames"]) == [("level3", TAGS["level3"]), ("level2", TAGS["level2"]),
                                           ("level1", TAGS["level1"])]
    spin = _mine(by_name["spinner"]["frames"])
    assert len(spin) == 1 and spin[0][0] == "spin" and spin[0][1] in (TAGS["spin_while"], TAGS["spin_body"])
    # threading.py frames: the Event.wait -> Condition.wait chain above sort_key, qualified on 3.11+.
    waits = [f["function"] for f in _py(by_name["sorter"]["frames"])][:2]
    assert waits == (["wait", "wait"] if base(key) in ("3.8", "3.9", "3.10") else ["Condition.wait", "Event.wait"])
    assert all(f["file"].endswith("threading.py") and f["line"] > 0 for f in _py(by_name["sorter"]["frames"])[:2])


@pytest.mark.parametrize("source", ["live", "core"])
def test_python_frames_sit_on_their_eval_frame(analyzed, source):
    """Every run of Python frames is followed directly by the native eval frame running it, and
    the Python -> sorted() (C) -> key-function chain keeps the C frames between the two."""
    key, live, core, _ = analyzed
    _, by_name = _threads(live if source == "live" else core)
    for t in by_name.values():
        frames = t["frames"]
        for i, f in enumerate(frames):
            if f["kind"] == "python" and i + 1 < len(frames) and frames[i + 1]["kind"] == "native":
                # 3.14 no longer exports _PyEval_EvalFrameDefault: nameless without debug info
                want = ("_PyEval_EvalFrameDefault", None) if nosyms(key) and minor(key) >= (3, 14) else \
                    ("_PyEval_EvalFrameDefault",)
                assert frames[i + 1]["function"] in want, (t["name"], i, frames[i + 1])
    frames = by_name["sorter"]["frames"]
    idx = {f["function"]: i for i, f in enumerate(frames) if f["kind"] == "python"}
    between = frames[idx["sort_key"] + 1:idx["do_sort"]]
    natives = [f for f in between if f["kind"] == "native"]
    assert natives and natives[0]["function"] in ("_PyEval_EvalFrameDefault", None if nosyms(key) else "")
    if nosyms(key):  # stripped: the C frames are there, most of them nameless
        assert any("python3." in (f.get("library") or "").rsplit("/", 1)[-1] and f["function"] in (None, "??")
                   for f in natives)
    else:
        assert SORT_NATIVES & {f["function"] for f in natives}, [f["function"] for f in natives]


@pytest.mark.parametrize("source", ["live", "core"])
def test_gil_holder_and_waiter(analyzed, source):
    key, live, core, _ = analyzed
    proc, by_name = _threads(live if source == "live" else core)
    if py_free_threaded(key):
        # no GIL: nobody holds or waits for it, and the process says so (never a guess)
        assert {t["state"]["gil"] for t in proc["threads"]} == {None}
        assert proc["python"]["free_threading"] is True and proc["python"]["gil_enabled"] is False
        assert "gil_holder" not in proc["python"]
        assert any("GIL is disabled" in n for n in proc.get("notes", [])), proc.get("notes")
        gc = {n: t["state"]["gc"] for n, t in by_name.items()}
        if not nosyms(key):
            assert gc.pop("collector") is True and set(gc.values()) == {False}, gc
        return
    holders = [t for t in proc["threads"] if t["state"]["gil"] == "held"]
    assert [t.get("python_name") for t in holders] == ["MainThread"]
    # stripped build: take_gil has no name there; the shape of the stack says it all the same
    assert by_name["spinner"]["state"]["gil"] == "waiting"
    # a collection is in progress (the collector's finalizer blocks): only the collector is in it
    # when symbols show it; without symbols nobody can be ruled out.
    gc = {n: t["state"]["gc"] for n, t in by_name.items()}
    # stripped: threads with nameless runtime frames are "unknown"
    if nosyms(key):
        assert gc.pop("collector") in (True, None) and None in gc.values() and True not in gc.values()
    else:
        assert gc.pop("collector") is True and set(gc.values()) == {False}, gc
    assert by_name["waiter-1"]["state"]["gil"] == "no"


def test_hang_bt_and_plain_bt_show_python_frames(analyzed):
    key, _, _, text = analyzed
    if py_free_threaded(key):  # no GIL: no "GIL:" state claimed for anyone
        assert re.search(r'Thread \d+ \(LWP \d+\) "sorter".*\[merged\]', text) and "GIL: held" not in text
    else:
        assert re.search(r'Thread \d+ \(LWP \d+\) "sorter".*GIL: no\s+GC: (no|\?)\s+\[merged\]', text)
        assert re.search(r'"MainThread".*GIL: held', text)
    assert re.search(r"#\d+\s+\[py\] sort_key \(.*py_named_threads\.py:%d\)" % TAGS["key"], text)
    # plain `bt` through the frame filter: Python frames in place, no nameless "in  ()" lines.
    assert re.search(r"\[py\] sort_key \(\) at .*py_named_threads\.py:%d" % TAGS["key"], text)
    assert " in  ()" not in text
    # switched off (gdb's own switch, then ours): plain gdb frames only
    on, off1 = text.split("FILTER-OFF-1", 1)
    off1, off2 = off1.split("FILTER-OFF-2", 1)
    assert "[py]" in on and "[py]" not in off1 and "[py]" not in off2
    assert "_PyEval_EvalFrameDefault" in off1 and "_PyEval_EvalFrameDefault" in off2


def test_corrupt_frame_chain_ends_with_marker(hung, tmp_path):
    """A cycle and a pointer into unmapped memory, written into a live 3.11 process: the walk of
    those threads ends with a marker frame and a note; other threads are untouched."""
    exe = PYTHONS.get("3.11")
    if exe is None:
        pytest.skip("pyenv 3.11 not installed")
    proc = hung([exe, FIXTURE], ready="READY", settle=0.5)
    out = tmp_path / "snap.json"
    setup = (
        "python import gdb, struct, hanganalyze_gdbext.gdbtarget as W; "
        "inf = gdb.selected_inferior(); p = W.describe_process(inf); "
        "th = {t.name: t for t in p.threads.values()}; off = p.offsets['ifr.previous']; "
        "a = th['waiter-1'].groups[0].first_addr; inf.write_memory(a + off, struct.pack('<Q', a)); "
        "b = th['waiter-2'].groups[0].first_addr; inf.write_memory(b + off, struct.pack('<Q', 0x100000000000))"
    )
    # then a cycle in the thread-state list: the last thread state points back to the first
    cycle = (
        "python ts = [t.tstate for t in p.threads.values()]; "
        "head = inf.read_memory(p.interpreters[0] + p.offsets['is.threads_head'], 8).tobytes(); "
        "tail = [a for a in ts if inf.read_memory(a + p.offsets['ts.next'], 8).tobytes() == bytes(8)][0]; "
        "inf.write_memory(tail + p.offsets['ts.next'], head); q = W.describe_process(inf); "
        "print('TSNOTES', len(q.threads), len(p.threads), q.notes)"
    )
    text = gdb_batch([setup, "hang-dump %s" % out, "hang-bt -a", cycle], pid=proc.pid)
    snap = json.loads(out.read_text())
    _, by_name = _threads(snap)
    for name, why in (("waiter-1", "cycle"), ("waiter-2", "cannot read")):
        t = by_name[name]
        py = _py(t["frames"])
        assert [f["function"] for f in py] == ["level3", "<python frame chain truncated>"], py
        assert py[1]["marker"] and why in py[1]["note"]
        assert any("truncated" in n for n in t["notes"])
    assert _mine(by_name["sorter"]["frames"])[0] == ("sort_key", TAGS["key"])
    assert "<python frame chain truncated>" in text and "Traceback" not in text
    m = re.search(r"TSNOTES (\d+) (\d+) (.*)", text)
    assert m and m.group(1) == m.group(2) and "stops early" in m.group(3), text[-2000:]


SUBINTERP = FIXTURES / "py_subinterp.py"


@pytest.mark.parametrize("key", [k for k in ("3.12", "3.13") if k in PYTHONS])
def test_subinterpreter_frames_merged_in_place(hung, tmp_path, key):
    """One OS thread, two interpreters: the subinterpreter's frames sit above the native
    ``run_string`` call, the main interpreter's frames below it (ordered by stack anchors), and
    the GIL held through the subinterpreter's thread state is reported on that OS thread."""
    proc = hung([PYTHONS[key], SUBINTERP], ready="READY", settle=1.5)
    core = gcore(proc.pid, tmp_path)
    try:
        snap = gdb_snapshot(core=core, exe=PYTHONS[key])
    finally:
        core.unlink()
    _, by_name = _threads(snap)
    t = by_name["sub-runner"]
    assert t["merge"] == "merged"
    frames = t["frames"]
    names = [f["function"] for f in frames if f["kind"] == "python"]
    assert names[:3] == ["sub_inner", "<module>", "runner"], names
    i_sub = next(i for i, f in enumerate(frames) if f["function"] == "<module>")
    i_run = next(i for i, f in enumerate(frames) if f["function"] == "runner")
    natives = [f["function"] for f in frames[i_sub + 1:i_run]]
    assert natives[0] == "_PyEval_EvalFrameDefault" and "interp_run_string" in natives, natives
    assert frames[i_sub - 1]["line"] == 5  # sub_inner's line inside the subinterpreter source
    assert any("several interpreters" in n for n in t["notes"])
    # the GIL (shared with the main interpreter) is held by the subinterpreter's thread state
    assert t["state"]["gil"] == "held" and by_name["MainThread"]["state"]["gil"] == "no"


def test_pyruntime_section_fallback_agrees_with_symbol(analyzed):
    """Both fallbacks used when no _PyRuntime symbol exists land on the symbol's address: the
    .PyRuntime section (3.10+; 3.8/3.9 have none) and the data-segment scan (every version)."""
    key, _, _, text = analyzed
    section, symbol, scanned = re.search(r"PYRUNTIME (\S+) (\S+) (\S+)", text).groups()
    assert symbol != "None"
    if minor(key) >= (3, 14):
        assert scanned == "no-table"  # 3.14's runtime layout exists only as _Py_DebugOffsets
    else:
        assert scanned == symbol  # the data-segment scan finds the same runtime
    if base(key) in ("3.8", "3.9"):
        assert section == "None"
    else:
        assert section == symbol


def test_glibc_pthread_tid_fallback_offset(analyzed):
    """The last-resort pthread_t -> LWP mapping (no libthread_db) reads glibc's struct pthread
    tid: on this glibc it must name every thread correctly."""
    key, _, _, text = analyzed
    assert "TIDOFF True" in text


def test_version_from_exported_symbols(analyzed):
    """3.8-3.10 have no Py_Version: when file names do not carry the version, the API functions
    each version added tell them apart (3.11+ are told by Py_Version / _Py_DebugOffsets)."""
    key, _, _, text = analyzed
    minor = re.search(r"VSYM \(3, (\d+)\)", text)
    assert minor is not None
    if base(key) in ("3.8", "3.9", "3.10"):
        assert "3.%s" % minor.group(1) == base(key)
    else:
        assert int(minor.group(1)) >= 10


def test_unprovable_merge_keeps_both_stacks(hung, tmp_path):
    """3.9 (no stack anchors): a frame chain that skips a frame (level3 -> level1) leaves one
    eval frame too many.  The thread must come out "unmerged" with every native frame as
    unwound and the Python frames listed apart (plain ``bt`` prints them after, as ``[py?]``)."""
    exe = PYTHONS.get("3.9")
    if exe is None:
        pytest.skip("pyenv 3.9 not installed")
    proc = hung([exe, FIXTURE], ready="READY", settle=0.5)
    out = tmp_path / "snap.json"
    setup = (
        "python import gdb, struct, hanganalyze_gdbext.gdbtarget as W; "
        "inf = gdb.selected_inferior(); p = W.describe_process(inf); "
        "th = {t.name: t for t in p.threads.values()}['waiter-1']; gdb.set_convenience_variable('w1', th.lwp); "
        "inf.write_memory(th.groups[0].first_addr + p.offsets['fo.f_back'], "
        "struct.pack('<Q', th.groups[2].first_addr))"
    )
    pick = ("python [t.switch() for t in gdb.selected_inferior().threads() "
            "if t.ptid[1] == int(gdb.convenience_variable('w1'))]")
    text = gdb_batch([setup, "hang-dump %s" % out, pick, "echo PLAIN-BT\\n", "bt"], pid=proc.pid)
    _, by_name = _threads(json.loads(out.read_text()))
    t = by_name["waiter-1"]
    assert t["merge"] == "unmerged" and any("not merged" in n for n in t["notes"])
    assert not _py(t["frames"])
    assert [f["function"] for f in t["python_frames"]][:3] == ["level3", "level1", "waiter_main"]
    evals = [f for f in t["frames"] if f["function"] == "_PyEval_EvalFrameDefault"]
    assert len(evals) == len(t["python_frames"]) + 1
    assert by_name["waiter-2"]["merge"] == "merged"  # the other threads are untouched
    bt = text.split("PLAIN-BT", 1)[1]
    assert "[py?] level3" in bt and "[py] " not in bt


@pytest.mark.parametrize("source", ["live", "core"])
def test_process_python_facts_and_notes(analyzed, source):
    """``Process.python`` carries the walker's summary (how the runtime was found, how CPython
    is built) and the walker's process-level notes reach ``Process.notes``."""
    key, live, core, _ = analyzed
    proc = (live if source == "live" else core)["processes"][0]
    py = proc["python"]
    assert py["version"].startswith(base(key))
    assert py["runtime"] == "symbol" and py["interpreters"] == 1
    assert py["build"] == ("static" if py_static(key) else "shared")
    assert py["debug_info"] is py_debug_info(key)  # stripped-*: the executable's DWARF
    assert py["gc_collecting"] is True  # the collector thread's finalizer blocks inside a collection
    assert py["free_threading"] is py_free_threaded(key)
    holder = [t["tid"] for t in proc["threads"] if t.get("python_name") == "MainThread"]
    if not py_free_threaded(key):
        assert [py["gil_holder"]] == holder
    assert "notes" not in py
    from_name = "Python: CPython version taken from a file name"
    assert (from_name in proc.get("notes", [])) is (py["version_source"] == "file name"), (py, proc.get("notes"))
    if base(key) in ("3.8", "3.9", "3.10") and not nosyms(key):
        assert py["version_source"] == "file name"


FT_BUSY = FIXTURES / "py_ft_busy.py"
FREE_THREADED = [k for k in sorted(PYTHONS) if py_free_threaded(k)]


@pytest.mark.parametrize("key", FREE_THREADED)
def test_free_threaded_eight_threads_running_python(hung, tmp_path, key):
    """A free-threaded build with 8 threads running Python at once (no GIL): every thread's
    frames come from its own thread state, live and from a core, with names and lines."""
    tags = {}
    for i, line in enumerate(FT_BUSY.read_text().splitlines(), 1):
        m = re.search(r"# L:(\w+)", line)
        if m:
            tags[m.group(1)] = i
    proc = hung([PYTHONS[key], FT_BUSY], ready="READY", settle=0.5)
    live = gdb_snapshot(pid=proc.pid)
    core = gcore(proc.pid, tmp_path)
    try:
        from_core = gdb_snapshot(core=core, exe=PYTHONS[key])
    finally:
        core.unlink()
    for source, snap in (("live", live), ("core", from_core)):
        p = snap["processes"][0]
        assert p["python"]["free_threading"] is True and p["python"]["gil_enabled"] is False, source
        busy = {t["python_name"]: t for t in p["threads"] if (t.get("python_name") or "").startswith("busy-")}
        assert sorted(busy) == ["busy-%d" % i for i in range(8)], (source, sorted(busy))
        for name, t in busy.items():
            mine = [(f["function"], f["line"]) for f in _py(t["frames"])
                    if (f.get("file") or "").endswith(FT_BUSY.name)]
            assert mine == [("spin_inner", tags["inner"]), ("spin_outer", tags["outer"]),
                            ("worker", tags["worker"])] or (
                mine[1:] == [("spin_outer", tags["outer"]), ("worker", tags["worker"])]
                and mine[0][0] == "spin_inner" and tags["inner"] <= mine[0][1] <= tags["inner"] + 1), \
                (source, name, mine)
            assert t["merge"] == "merged", (source, name, t.get("notes"))
            assert t["state"]["gil"] is None, (source, name)


@pytest.mark.parametrize("name", BUILT_NAMES)
def test_built_interpreters_present(name):
    """scripts/pythons.sh (run by `make test`) built every interpreter, or said why it could not:
    a build it was asked for and missing for any other reason fails here, never silently skips the
    tests above (helpers.python_missing); where it never ran, the reason is the skip."""
    assert need_python(name) == built_pythons()[name]


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_shared_interpreters_present(name):
    """The same for CPython 3.8-3.13 (scripts/pythons.sh's cache or pyenv)."""
    assert need_python(name) == PYTHONS[name]
