"""Version conditions never hide a finding silently (issue 15, item 4).

``nccl-destroy-with-live-cuda-graph`` needs NCCL >= 2.26.  With NCCL linked statically (no
libnccl.so mapped) the version comes from NCCL's embedded ``NCCL version 2.x.y+cudaX.Y`` string:
in the mapped files (core, live pid), in the core's memory, or in the log (text).  A KNOWN older
version drops the match; an unknown one keeps it at lower confidence, saying so.

Real parts only: tests/fixtures/sig_static_nccl.cpp (NCCL 2.27.3 linked in) and
sig_static_nccl_old.cpp (2.18.1), blocked in the real graph-destroy stack, cored by gcore,
snapshotted by gdb + gdbext + the analyzer's acquire code, matched by the real matcher.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import fixture_binary, gcore, gdb_batch, run_hanganalyze, start_hung  # noqa: E402

from hanganalyze.acquire.engine import EngineRequest, from_core, from_pid  # noqa: E402
from hanganalyze.analyze.conditions import MISSING_LIBRARY_FACTOR  # noqa: E402
from hanganalyze.analyze.match import match_snapshot  # noqa: E402
from hanganalyze.analyze.signatures import load_signatures  # noqa: E402

SIG = "nccl-destroy-with-live-cuda-graph"

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None or shutil.which("gcore") is None,
                                reason="needs gdb and gcore")


@pytest.fixture(scope="module")
def db():
    return load_signatures()


def _core(name: str, tmp: Path):
    exe = fixture_binary(name)
    h = start_hung([exe])
    try:
        core = gcore(h.pid, tmp)
    finally:
        h.kill()
    return core, exe


@pytest.fixture(scope="module")
def new_core(tmp_path_factory):
    return _core("sig_static_nccl", tmp_path_factory.mktemp("static-nccl"))


@pytest.fixture(scope="module")
def old_core(tmp_path_factory):
    return _core("sig_static_nccl_old", tmp_path_factory.mktemp("static-nccl-old"))


def _finding(snap, db):
    return {f.signature: f for f in match_snapshot(snap, db)}.get(SIG)


def test_static_nccl_version_read_from_executable_in_core(new_core, db):
    core, exe = new_core
    snap = from_core(core, EngineRequest(engine="gdb"), exe)
    proc = snap.processes[0]
    assert not any("libnccl" in lib.path.split(" (static")[0] for lib in proc.libraries)  # nothing mapped
    static = [lib for lib in proc.libraries if lib.path.endswith(" (static libnccl.so)")]
    assert [lib.version for lib in static] == ["2.27.3"]
    assert static[0].path.startswith(str(exe))
    f = _finding(snap, db)
    assert f is not None
    assert f.confidence == 1.0
    assert any("version 2.27.3" in e.text for e in f.evidence if e.frame is None)
    assert "version unknown" not in f.summary


def test_static_nccl_version_read_from_core_memory(tmp_path):
    """No file to read (the executable is gone): the core's own memory is scanned.  gcore leaves
    read-only file pages out, so the string is found where NCCL_DEBUG=VERSION printed it (the
    stdio buffer on the heap), and attributed to the core's memory."""
    from hanganalyze.acquire.embedded_versions import add_embedded_versions

    h = start_hung([fixture_binary("sig_static_nccl")], env={"NCCL_DEBUG": "VERSION"})
    try:
        core = gcore(h.pid, tmp_path)
    finally:
        h.kill()
    libs = add_embedded_versions([], [str(tmp_path / "gone")], str(tmp_path / "gone"), core=str(core))
    assert [lib.version for lib in libs] == ["2.27.3"]
    assert libs[0].path == "memory of %s (static libnccl.so)" % core


def test_old_static_nccl_is_not_the_graph_destroy_hang(old_core, db):
    """Near miss: same stack, NCCL 2.18.1 linked in: the known version fails >=2.26."""
    core, exe = old_core
    snap = from_core(core, EngineRequest(engine="gdb"), exe)
    static = [lib for lib in snap.processes[0].libraries if lib.path.endswith(" (static libnccl.so)")]
    assert [lib.version for lib in static] == ["2.18.1"]
    assert _finding(snap, db) is None


def test_cli_on_static_nccl_core(new_core):
    core, exe = new_core
    res = run_hanganalyze([core, "--exe", exe, "--format", "json"])
    data = json.loads(res.stdout)
    f = next(f for f in data["findings"] if f["signature"] == SIG)
    assert f["confidence"] == 1.0
    text = run_hanganalyze([core, "--exe", exe]).stdout.decode()
    assert "libnccl.so 2.27.3 (static)" in text  # the report's library line says where the version came from


def test_live_pid_reads_static_nccl_version(db):
    h = start_hung([fixture_binary("sig_static_nccl")])
    try:
        snap = from_pid(h.pid, EngineRequest(engine="gdb"))
    finally:
        h.kill()
    static = [lib for lib in snap.processes[0].libraries if lib.path.endswith(" (static libnccl.so)")]
    assert [lib.version for lib in static] == ["2.27.3"]
    f = _finding(snap, db)
    assert f is not None and f.confidence == 1.0


@pytest.fixture(scope="module")
def paste(new_core):
    """Real `thread apply all bt` text of the hung fixture (no library list, no NCCL log line)."""
    core, exe = new_core
    text = gdb_batch(["thread apply all bt"], core=core, exe=exe)
    assert "commDestroySync" in text and "ncclCommFinalize" in text
    return text


def test_text_without_version_matches_lower_and_says_why(paste, tmp_path):
    p = tmp_path / "bt.txt"
    p.write_text(paste)
    data = json.loads(run_hanganalyze([p, "--format", "json"]).stdout)
    f = next(f for f in data["findings"] if f["signature"] == SIG)
    assert f["confidence"] == pytest.approx(MISSING_LIBRARY_FACTOR)
    assert "NCCL version unknown: the fix applies from 2.26" in f["summary"]


def test_text_with_nccl_log_line_uses_that_version(paste, tmp_path):
    for version, found in (("2.27.3", True), ("2.18.1", False)):
        p = tmp_path / ("bt-%s.txt" % version)
        p.write_text("host:1234:1234 [0] NCCL INFO NCCL version %s+cuda12.8\n%s" % (version, paste))
        data = json.loads(run_hanganalyze([p, "--format", "json"]).stdout)
        f = next((f for f in data["findings"] if f["signature"] == SIG), None)
        if found:
            assert f is not None and f["confidence"] == 1.0
            assert "version unknown" not in f["summary"]
        else:
            assert f is None
