"""Every bad input ends in ONE line on stderr (``hanganalyze: error: ...``), a non-zero exit, no
traceback, nothing on stdout, and no leftover process, well within the time limit."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import assert_one_line_error, fixture_binary, gcore, run_hanganalyze, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

EXIT_INPUT, EXIT_TOOL = 2, 4


def one_line_error(args, code=None, match=None, timeout=60.0) -> str:
    t0 = time.monotonic()
    res = run_hanganalyze([str(a) for a in args], timeout=timeout)
    line = assert_one_line_error(res, code, match)
    assert time.monotonic() - t0 < timeout
    return line


@pytest.fixture(scope="module")
def real_core(tmp_path_factory):
    h = start_hung([str(fixture_binary("cxx_mutex_deadlock"))])
    try:
        return gcore(h.pid, tmp_path_factory.mktemp("bad_inputs"))
    finally:
        h.kill()


def test_missing_file(tmp_path):
    one_line_error([tmp_path / "no-such-core"], EXIT_INPUT, "no such file")


def test_empty_file(tmp_path):
    p = tmp_path / "core.empty"
    p.write_bytes(b"")
    one_line_error([p], EXIT_INPUT, "empty")


def test_directory(tmp_path):
    one_line_error([tmp_path], EXIT_INPUT, "directory")


def test_random_binary_is_not_sent_to_the_text_parsers(tmp_path):
    p = tmp_path / "core.random"
    rng = random.Random(7)
    p.write_bytes(bytes(rng.getrandbits(8) for _ in range(64 * 1024)))
    one_line_error([p], EXIT_INPUT, "neither an ELF core nor a text file")


@pytest.mark.parametrize("tool, kind", [("gzip", "gzip"), ("xz", "xz"), ("zstd", "zstd")])
def test_compressed_part_of_a_core_is_a_truncated_core(real_core, tmp_path, tool, kind):
    """Compressed cores are decompressed (tests/integration/test_compressed_cores.py); a complete
    stream of the first MiB of a core is then a truncated core, named by the compressed file."""
    if shutil.which(tool) is None:
        pytest.skip("%s not installed" % tool)
    packed = tmp_path / "core.packed"
    with open(real_core, "rb") as src, open(packed, "wb") as dst:
        head = src.read(1 << 20)
        subprocess.run([tool, "-c"], input=head, stdout=dst, check=True)
    line = one_line_error([packed], EXIT_INPUT, str(packed))
    assert str(1 << 20) in line and "hanganalyze-core-" not in line  # the decompressed size


def test_garbage_text(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello\nthis is not a stack dump at all\n" * 20)
    one_line_error([p], EXIT_INPUT)


def test_gcore_core_cut_in_half_is_incomplete(real_core, tmp_path):
    """gcore writes the notes after the memory: half of such a core has no notes, it is unfinished.
    (A core cut inside its memory, notes present, is analyzed: test_truncated_cores.py.)"""
    size = real_core.stat().st_size
    p = tmp_path / "core.truncated"
    with open(real_core, "rb") as src, open(p, "wb") as dst:
        dst.write(src.read(size // 2))
    line = one_line_error([p], EXIT_INPUT, "%s is incomplete: cut before its notes" % p)
    assert "the file has %d bytes" % (size // 2) in line
    start = int(line.split("the notes start at ")[1].split(";")[0])
    assert size // 2 < start < size
    assert "still being written, or the disk filled up" in line


def test_elf_executable_is_not_a_core():
    exe = fixture_binary("cxx_mutex_deadlock")
    one_line_error([exe], EXIT_INPUT, "is an ELF executable, not a core")


def test_shared_object_is_not_a_core():
    lib = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not lib.exists():
        pytest.skip("no libstdc++ at the Debian path")
    one_line_error([lib], EXIT_INPUT, "is an ELF shared object, not a core")


@pytest.fixture(scope="module")
def core_of_deleted_exe(tmp_path_factory):
    d = tmp_path_factory.mktemp("gone")
    copy = d / "deadlock-copy"
    shutil.copy2(fixture_binary("cxx_mutex_deadlock"), copy)
    h = start_hung([str(copy)])
    try:
        core = gcore(h.pid, d)
    finally:
        h.kill()
    copy.unlink()
    return copy, core


def test_core_whose_executable_is_gone(core_of_deleted_exe):
    copy, core = core_of_deleted_exe
    line = one_line_error([core], EXIT_INPUT, "is gone")
    assert str(copy) in line and "--exe" in line


def test_executable_deleted_while_running(tmp_path):
    """Deployments replace binaries under running jobs: the mappings then say "(deleted)"."""
    app = tmp_path / "app"
    shutil.copy2(fixture_binary("cxx_mutex_deadlock"), app)
    h = start_hung([str(app)])
    try:
        app.unlink()
        core = gcore(h.pid, tmp_path)
    finally:
        h.kill()
    line = one_line_error([core], EXIT_INPUT, "was deleted while the process ran")
    assert str(app) + "," in line and "(deleted)" not in line


def test_exe_option_rescues_core_whose_executable_is_gone(core_of_deleted_exe):
    """The same binary elsewhere (same build-id) is accepted with --exe, without a warning."""
    _copy, core = core_of_deleted_exe
    exe = fixture_binary("cxx_mutex_deadlock")
    res = run_hanganalyze([core, "--exe", exe, "--format", "json"], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    import json

    snap = json.loads(res.stdout)
    assert not [w for w in snap.get("warnings", []) if "build-id" in w], snap.get("warnings")
    names = [f.get("function") for t in snap["processes"][0]["threads"] for f in t["frames"]]
    assert "take_a_then_b" in names


@pytest.mark.parametrize(
    "args, match",
    [
        (["a", "b"], "a: no such file"),
        (["--no-such-option"], "No such option"),
        (["--format", "xml", "core"], "--format"),
        (["signatures", "frobnicate"], "No such command"),
    ],
)
def test_command_line_mistakes(args, match):
    one_line_error(args, EXIT_INPUT, match)


def test_nonpositive_timeout(real_core):
    one_line_error([real_core, "--timeout", "0"], EXIT_INPUT, "--timeout must be a positive")


def test_pid_that_does_not_exist():
    p = subprocess.Popen(["true"])
    p.wait()  # reaped: its pid is free now
    one_line_error(["--pid", p.pid], EXIT_INPUT, "no process with pid %d" % p.pid)


def test_missing_gdb_binary(real_core, tmp_path):
    one_line_error([real_core, "--gdb", tmp_path / "no-gdb-here"], EXIT_INPUT, "no such executable")


def _script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "fake-gdb"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return p


def _pids_with_arg(arg: str):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if arg.encode() in f.read():
                        out.append(int(d))
            except OSError:
                pass
    return out


def test_gdb_that_hangs_is_killed_with_its_children(real_core, tmp_path):
    marker = "1%d.%s" % (os.getpid(), uuid.uuid4().int % 10**6)  # a sleep nobody else runs
    fake = _script(tmp_path, "sleep %s &\nwait\n" % marker)
    t0 = time.monotonic()
    one_line_error([real_core, "--gdb", fake, "--timeout", "2"], EXIT_TOOL, "timed out after 2 s while starting gdb")
    assert time.monotonic() - t0 < 20
    time.sleep(0.2)
    assert _pids_with_arg(marker) == []  # the whole process group went


def test_gdb_that_crashes(real_core, tmp_path):
    fake = _script(tmp_path, "echo 'fake gdb: boom' >&2\nkill -SEGV $$\n")
    one_line_error([real_core, "--gdb", fake, "--timeout", "10"], EXIT_TOOL, "gdb died of SIGSEGV while starting gdb")


def test_exe_option_that_is_not_an_executable(real_core, tmp_path):
    bogus = tmp_path / "not-an-exe"
    bogus.write_text("#!/bin/sh\n")
    one_line_error([real_core, "--exe", bogus], EXIT_INPUT, "is not an ELF executable")


def test_executable_rebuilt_since_the_core_is_a_warning(tmp_path):
    """The binary at the recorded path is not the one that ran (other build-id): the analysis
    goes on, and the report says plainly that its stacks may be wrong."""
    import json

    app = tmp_path / "app"
    shutil.copy2(fixture_binary("cxx_mutex_deadlock"), app)
    h = start_hung([str(app)])
    try:
        core = gcore(h.pid, tmp_path)
    finally:
        h.kill()
    shutil.copy2(fixture_binary("cxx_thread_terminate"), app)  # "rebuilt"
    res = run_hanganalyze([core, "--format", "json"], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    warnings = json.loads(res.stdout).get("warnings", [])
    assert any(str(app) in w and "build-id" in w and "may be wrong" in w for w in warnings), warnings


def test_pid_of_a_zombie():
    p = subprocess.Popen(["true"])
    try:
        for _ in range(100):  # not reaped yet: it stays a zombie until wait()
            if Path("/proc/%d/status" % p.pid).read_text().find("State:\tZ") >= 0:
                break
            time.sleep(0.05)
        one_line_error(["--pid", p.pid], EXIT_INPUT, "zombie")
    finally:
        p.wait()


def _children() -> set:
    kids = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            kids.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            pass
    return kids


@pytest.mark.parametrize("body", ["sleep 30 &\nwait\n", "kill -SEGV $$\n", "exit 7\n"])
def test_driver_leaves_no_child_behind(real_core, tmp_path, body):
    """In-process: a hung, crashing or exiting gdb ends in GdbError and no child (no zombie)."""
    from hanganalyze.acquire.engine import EngineRequest, from_core
    from hanganalyze.errors import GdbError

    before = _children()
    fake = _script(tmp_path, body)
    with pytest.raises(GdbError, match="while starting gdb"):
        from_core(real_core, EngineRequest(engine="gdb", gdb=str(fake), timeout=1.5))
    assert _children() - before == set()


def test_gdb_crashing_mid_session_names_the_step(real_core, tmp_path):
    """A real gdb that segfaults once it reads the executable: the error names that step."""
    crash = "python import gdb, os; gdb.events.new_objfile.connect(lambda e: os.kill(os.getpid(), 11))"
    fake = _script(tmp_path, 'exec %s "$@" -iex "%s"\n' % (shutil.which("gdb"), crash))
    one_line_error(
        [real_core, "--gdb", fake, "--timeout", "30"], EXIT_TOOL, "gdb died of SIGSEGV while loading the executable"
    )
