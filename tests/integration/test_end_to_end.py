"""`hanganalyze CORE --format json` on cores of real hung / crashed programs, run as a user would.

One core per fixture program (module-scoped), one CLI run per core; each test checks one thing
the report must get right: process metadata from the core's notes and the frames gdb unwound.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import (  # noqa: E402
    FIXTURES,
    core_at_abort,
    fixture_binary,
    gcore,
    pyenv_pythons,
    run_hanganalyze,
    start_hung,
)

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

HEX40 = re.compile(r"^[0-9a-f]{40}$")


def _line_of(source: Path, marker: str) -> int:
    for n, line in enumerate(source.read_text().splitlines(), 1):
        if marker in line:
            return n
    raise AssertionError("%r not in %s" % (marker, source))


def _analyze(core: Path, *extra) -> dict:
    res = run_hanganalyze([str(core), "--format", "json", *extra], timeout=300)
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode in (0, 3, 5, 6), "exit %d: %s" % (res.returncode, err)
    assert "Traceback" not in err
    return json.loads(res.stdout)  # stdout is the JSON and nothing else (no gdb noise)


def _functions(thread: dict):
    return [f.get("function") or "" for f in thread["frames"]]


def _index(names, pred) -> int:
    for i, n in enumerate(names):
        if pred(n):
            return i
    return -1


# ------------------------------------------------------------------------------- C++ deadlock


@pytest.fixture(scope="module")
def cxx_deadlock(tmp_path_factory):
    exe = fixture_binary("cxx_mutex_deadlock")
    argv = [str(exe), "--ranks", "two words"]
    h = start_hung(argv)
    try:
        core = gcore(h.pid, tmp_path_factory.mktemp("cxx_deadlock"))
    finally:
        h.kill()
    return {"pid": h.pid, "exe": str(exe), "argv": argv, "core": core, "snap": _analyze(core)}


def test_cxx_deadlock_process_metadata(cxx_deadlock):
    snap = cxx_deadlock["snap"]
    assert snap["schema"] == "hanganalyze/1"
    (proc,) = snap["processes"]
    assert proc["source"] == "core"
    assert proc["pid"] == cxx_deadlock["pid"]
    assert proc["executable"] == cxx_deadlock["exe"]
    assert proc["argv"] == cxx_deadlock["argv"]  # the argument with a space survives
    assert proc["signal"] is None  # gcore of a running process: no fatal signal
    assert len(proc["threads"]) == 3
    assert cxx_deadlock["pid"] in [t["tid"] for t in proc["threads"]]
    libc = [lib for lib in proc["libraries"] if os.path.basename(lib["path"]).startswith("libc.so")]
    assert libc and HEX40.match(libc[0]["build_id"] or ""), proc["libraries"]


@pytest.mark.parametrize(
    "func, marker", [("take_a_then_b", "blocks: take_b_then_a"), ("take_b_then_a", "blocks: take_a_then_b")]
)
def test_cxx_deadlock_threads_block_in_mutex_lock_at_source_line(cxx_deadlock, func, marker):
    (proc,) = cxx_deadlock["snap"]["processes"]
    src = FIXTURES / "cxx_mutex_deadlock.cpp"
    threads = [t for t in proc["threads"] if func in _functions(t)]
    assert len(threads) == 1, [_functions(t) for t in proc["threads"]]
    frames = threads[0]["frames"]
    names = _functions(threads[0])
    at = names.index(func)
    fixture_frame = frames[at]
    assert fixture_frame["file"].endswith("cxx_mutex_deadlock.cpp")
    assert fixture_frame["line"] == _line_of(src, marker)
    assert fixture_frame["library"] == cxx_deadlock["exe"]
    assert fixture_frame["address"] > 0
    # innermost first: the lock wait sits above the fixture's function
    lock = _index(names, lambda n: "pthread_mutex_lock" in n)
    wait = _index(names, lambda n: "lll_lock_wait" in n)
    assert 0 <= wait < lock < at, names
    assert frames[lock]["library"].endswith(".so.6") and "libc" in frames[lock]["library"]


def test_cxx_deadlock_finding_names_the_two_workers(cxx_deadlock):
    snap = cxx_deadlock["snap"]
    (proc,) = snap["processes"]
    workers = sorted(t["tid"] for t in proc["threads"] if t["tid"] != cxx_deadlock["pid"])
    cycles = [f for f in snap["findings"] if f["signature"] == "deadlock-cycle"]
    assert len(cycles) == 1, snap["findings"]
    assert cycles[0]["severity"] == "deadlock" and sorted(cycles[0]["threads"]) == workers


def test_core_path_with_spaces(cxx_deadlock, tmp_path):
    d = tmp_path / "dir with space"
    d.mkdir()
    core = d / "my core"
    shutil.copy(cxx_deadlock["core"], core)
    snap = _analyze(core)
    assert [t["tid"] for t in snap["processes"][0]["threads"]] == [
        t["tid"] for t in cxx_deadlock["snap"]["processes"][0]["threads"]
    ]


def test_cxx_deadlock_main_thread_joins(cxx_deadlock):
    (proc,) = cxx_deadlock["snap"]["processes"]
    main = [t for t in proc["threads"] if t["tid"] == cxx_deadlock["pid"]][0]
    names = _functions(main)
    assert "main" in names and _index(names, lambda n: n.startswith("std::thread::join")) >= 0, names


# ----------------------------------------------------------------------- C++ terminate (abort)


@pytest.fixture(scope="module")
def cxx_terminate(tmp_path_factory):
    exe = fixture_binary("cxx_thread_terminate")
    argv = [str(exe), "shutdown-path"]
    core = core_at_abort(argv, tmp_path_factory.mktemp("cxx_terminate"))
    return {"exe": str(exe), "argv": argv, "core": core, "snap": _analyze(core)}


def test_abort_core_metadata(cxx_terminate):
    (proc,) = cxx_terminate["snap"]["processes"]
    assert proc["signal"] == "SIGABRT"
    assert proc["executable"] == cxx_terminate["exe"]
    assert proc["argv"] == cxx_terminate["argv"]
    assert isinstance(proc["pid"], int) and proc["pid"] > 0
    assert len(proc["threads"]) == 2  # main + the forgotten worker


def test_abort_core_frames_show_thread_destructor_terminate_abort(cxx_terminate):
    (proc,) = cxx_terminate["snap"]["processes"]
    current = [t for t in proc["threads"] if t.get("current")]
    assert len(current) == 1
    names = _functions(current[0])
    abort = _index(names, lambda n: "abort" in n)
    terminate = _index(names, lambda n: n.startswith("std::terminate"))
    dtor = _index(names, lambda n: n.startswith("std::thread::~thread"))
    caller = names.index("start_worker_and_forget")
    assert 0 <= abort < terminate < dtor < caller, names
    frame = current[0]["frames"][caller]
    src = FIXTURES / "cxx_thread_terminate.cpp"
    assert frame["file"].endswith("cxx_thread_terminate.cpp")
    assert frame["line"] == _line_of(src, "~thread() runs here")
    other = [t for t in proc["threads"] if not t.get("current")][0]
    assert "background_work" in _functions(other)


def test_abort_core_finding(cxx_terminate):
    """The joinable-thread abort core is matched end to end to its seed signature."""
    ids = [f["signature"] for f in cxx_terminate["snap"]["findings"]]
    assert "std-thread-joinable-terminate" in ids, ids


# --------------------------------------------------------------------------- Python deadlock


def _python():
    py = pyenv_pythons().get("3.11")
    if py is None:
        pytest.skip("pyenv python 3.11 not installed")
    return py


def _py_deadlock_core(tmp_path_factory, *flags):
    py = _python()
    script = FIXTURES / "py_deadlock.py"
    argv = [str(py), str(script), *flags]
    h = start_hung(argv)
    try:
        core = gcore(h.pid, tmp_path_factory.mktemp("py_deadlock"))
    finally:
        h.kill()
    return {"pid": h.pid, "py": py, "argv": argv, "core": core, "snap": _analyze(core)}


@pytest.fixture(scope="module")
def py_deadlock(tmp_path_factory):
    return _py_deadlock_core(tmp_path_factory)


@pytest.fixture(scope="module")
def py_rlock_deadlock(tmp_path_factory):
    return _py_deadlock_core(tmp_path_factory, "--rlock")


def test_py_deadlock_metadata(py_deadlock):
    (proc,) = py_deadlock["snap"]["processes"]
    assert proc["pid"] == py_deadlock["pid"]
    assert proc["argv"] == py_deadlock["argv"]
    assert os.path.realpath(proc["executable"]) == os.path.realpath(py_deadlock["py"])
    assert proc["signal"] is None
    assert len(proc["threads"]) == 3  # main (joining) + worker-a + worker-b
    assert any("libpython3.11" in lib["path"] for lib in proc["libraries"])


def test_py_deadlock_every_thread_waits_in_lock_acquire(py_deadlock):
    (proc,) = py_deadlock["snap"]["processes"]
    for t in proc["threads"]:
        names = _functions(t)
        # Lock.acquire (workers) and Thread.join (main: waits on the tstate lock) both end here
        assert _index(names, lambda n: "PyThread_acquire_lock_timed" in n) >= 0, names
        assert _index(names, lambda n: "_PyEval_EvalFrameDefault" in n) >= 0, names


def test_py_deadlock_python_frames(py_deadlock):
    """The workers' Python frames name the fixture's functions at the blocking lines."""
    (proc,) = py_deadlock["snap"]["processes"]
    pyframes = [
        (t, f) for t in proc["threads"] for f in t["frames"] + t.get("python_frames", []) if f["kind"] == "python"
    ]
    assert pyframes, "no Python frames in the snapshot"
    src = FIXTURES / "py_deadlock.py"
    got = {(f["function"], f["line"]) for _, f in pyframes}
    assert ("take_a_then_b", _line_of(src, "blocks forever: worker-b")) in got, got
    assert ("take_b_then_a", _line_of(src, "blocks forever: worker-a")) in got, got
    names = {t.get("name") for t, _ in pyframes}
    assert {"worker-a", "worker-b"} <= names, names


def test_py_rlock_deadlock_is_a_deadlock_finding(py_rlock_deadlock):
    """RLocks record their owner, so the core proves the cycle: exit 3 territory, and the
    finding names exactly the two workers."""
    snap = py_rlock_deadlock["snap"]
    (proc,) = snap["processes"]
    assert proc["argv"][-1] == "--rlock"
    workers = sorted(t["tid"] for t in proc["threads"] if t["tid"] != py_rlock_deadlock["pid"])
    cycles = [f for f in snap["findings"] if f["signature"] == "deadlock-cycle"]
    assert len(cycles) == 1 and sorted(cycles[0]["threads"]) == workers, snap["findings"]


# ------------------------------------------------------------------- a core the kernel wrote


def _kernel_core(argv, cwd: Path) -> Path:
    """Run argv with RLIMIT_CORE unlimited in cwd until it dies; the kernel's core, if the
    system writes cores to files there (not piped to systemd-coredump/apport)."""
    import resource
    import subprocess

    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern.startswith("|") or "/" in pattern:
        pytest.skip("kernel cores go to %r here" % pattern)

    def unlimited():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    res = subprocess.run(argv, cwd=str(cwd), preexec_fn=unlimited, capture_output=True, timeout=60)
    assert res.returncode < 0 or res.returncode > 128, res.returncode
    cores = [p for p in cwd.iterdir() if p.name.startswith("core")]
    if not cores:
        pytest.skip("the kernel wrote no core (pattern %r)" % pattern)
    return cores[0]


def test_kernel_written_abort_core(tmp_path):
    exe = fixture_binary("cxx_thread_terminate")
    argv = [str(exe), "kernel", "two words"]
    core = _kernel_core(argv, tmp_path)
    snap = _analyze(core)
    (proc,) = snap["processes"]
    assert proc["signal"] == "SIGABRT"
    assert proc["argv"] == argv  # from the stack: NT_PRPSINFO would have split "two words"
    assert proc["executable"] == str(exe)
    assert len(proc["threads"]) == 2
    current = [t for t in proc["threads"] if t.get("current")][0]
    assert "start_worker_and_forget" in _functions(current)
    assert not [n for n in proc.get("notes", []) if "gcore" in n]
