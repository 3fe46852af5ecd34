"""Compressed cores, read directly (systemd-coredump's .zst, .lz4, .xz; .gz): a real gcore core of a
real hung process, compressed by the real command-line tools, gives the same report as the raw
core; the decompressed copy is sparse and always removed; broken streams are one-line errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import (  # noqa: E402
    REPO,
    assert_one_line_error,
    fixture_binary,
    gcore,
    run_hanganalyze,
    sigint_default,
    start_hung,
)

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

EXIT_INPUT = 2
TOOLS = {"zstd": ("zstd", "-q", "-c"), "lz4": ("lz4", "-q", "-c"), "xz": ("xz", "-c"), "gzip": ("gzip", "-c")}
SUFFIX = {"zstd": ".zst", "lz4": ".lz4", "xz": ".xz", "gzip": ".gz"}
NOTE = re.compile(r"core decompressed from (\w+) \(([\d.]+) MB -> ([\d.]+) MB apparent, ([\d.]+) MB on disk\)")


def compress(tool: str, src: Path, dest: Path) -> Path:
    if shutil.which(tool) is None:
        pytest.skip("%s not installed" % tool)
    with open(src, "rb") as fin, open(dest, "wb") as fout:
        subprocess.run(list(TOOLS[tool]), stdin=fin, stdout=fout, check=True, timeout=60)
    return dest


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    h = start_hung([str(fixture_binary("cxx_mutex_deadlock"))])
    try:
        return gcore(h.pid, tmp_path_factory.mktemp("compressed"))
    finally:
        h.kill()


@pytest.fixture(scope="module")
def raw_report(core):
    res = run_hanganalyze([core, "--format", "json"], timeout=120)
    assert res.returncode == 5, res.stderr  # the deadlock is found
    return json.loads(res.stdout)


@pytest.fixture
def tmpdir_env(tmp_path, monkeypatch):
    """A private, empty TMPDIR for the CLI run: whatever it leaves there is ours."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    return d


def comparable(report: dict) -> dict:
    """The report without what legitimately differs: the decompression note."""
    report = json.loads(json.dumps(report))
    for p in report["processes"]:
        p["notes"] = [n for n in p.get("notes", []) if not NOTE.fullmatch(n)]
    return report


@pytest.mark.parametrize("tool", ["zstd", "lz4", "xz", "gzip"])
def test_compressed_core_gives_the_raw_core_report(core, raw_report, tmp_path, tmpdir_env, tool):
    packed = compress(tool, core, tmp_path / (core.name + SUFFIX[tool]))
    res = run_hanganalyze([packed, "--format", "json"], timeout=120)
    assert res.returncode == 5, res.stderr
    report = json.loads(res.stdout)
    assert comparable(report) == comparable(raw_report)
    proc = report["processes"][0]
    assert proc["source"] == "core"
    assert [f["signature"] for f in report["findings"]] == [f["signature"] for f in raw_report["findings"]]
    notes = [m for m in map(NOTE.fullmatch, proc["notes"]) if m]
    assert len(notes) == 1 and notes[0].group(1) == tool, proc["notes"]
    compressed_mb, apparent_mb = float(notes[0].group(2)), float(notes[0].group(3))
    assert abs(compressed_mb - packed.stat().st_size / 1e6) < 0.06
    assert abs(apparent_mb - core.stat().st_size / 1e6) < 0.06
    assert "hanganalyze-core-" not in res.stdout.decode() + res.stderr.decode()
    assert list(tmpdir_env.iterdir()) == []  # the decompressed copy is gone


def test_decompressed_core_is_sparse_and_removed(core, tmp_path):
    """The gcore core is mostly zero pages: the copy gdb reads keeps them as holes."""
    from hanganalyze.acquire.compressed import acquire_compressed
    from hanganalyze_gdbext.model import Snapshot

    packed = compress("zstd", core, tmp_path / "core.zst")
    work = tmp_path / "work"
    work.mkdir()
    seen = {}

    def on_core(path: Path):
        st = path.stat()
        seen.update(path=path, size=st.st_size, disk=st.st_blocks * 512, mode=st.st_mode & 0o777)
        assert path.read_bytes() == core.read_bytes()  # byte for byte the core
        return Snapshot()

    acquire_compressed(packed, "zstd", None, on_core, lambda text: None, tmpdir=str(work))
    print("compressed %d B, apparent %d B, on disk %d B" % (packed.stat().st_size, seen["size"], seen["disk"]))
    assert seen["size"] == core.stat().st_size
    assert seen["disk"] < seen["size"] / 4, seen
    assert seen["mode"] == 0o600
    assert not seen["path"].exists() and list(work.iterdir()) == []


def test_interrupt_removes_the_decompressed_core(core, tmp_path):
    """Ctrl-C (KeyboardInterrupt) while gdb reads the copy: the copy is removed all the same."""
    from hanganalyze.acquire.compressed import acquire_compressed

    packed = compress("gzip", core, tmp_path / "core.gz")
    work = tmp_path / "work"
    work.mkdir()

    def interrupted(path: Path):
        assert path.exists()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        acquire_compressed(packed, "gzip", None, interrupted, lambda text: None, tmpdir=str(work))
    assert list(work.iterdir()) == []


def test_ctrl_c_during_the_analysis_leaves_no_file(core, tmp_path, tmpdir_env):
    """The real CLI, a gdb that never answers, SIGINT once the copy exists: exit, nothing left."""
    packed = compress("zstd", core, tmp_path / "core.zst")
    fake = tmp_path / "fake-gdb"
    fake.write_text("#!/bin/sh\nsleep 30 &\nwait\n")
    fake.chmod(0o755)
    exe = shutil.which("hanganalyze")
    cmd = [exe] if exe else [sys.executable, "-m", "hanganalyze"]
    proc = subprocess.Popen(cmd + [str(packed), "--gdb", str(fake), "--timeout", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_default)
    try:
        deadline = time.monotonic() + 15
        while not any(p.name.startswith("hanganalyze-core-") for p in tmpdir_env.iterdir()):
            assert time.monotonic() < deadline and proc.poll() is None, "no decompressed copy appeared"
            time.sleep(0.02)
        time.sleep(0.3)  # gdb (the fake) is being waited for
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0 and b"interrupted" in err, err
    assert list(tmpdir_env.iterdir()) == []


def test_truncated_zst_is_one_line(core, tmp_path, tmpdir_env):
    whole = compress("zstd", core, tmp_path / "whole.zst").read_bytes()
    cut = tmp_path / "core.zst"
    cut.write_bytes(whole[: len(whole) // 2])
    res = run_hanganalyze([cut], timeout=60)
    line = assert_one_line_error(res, EXIT_INPUT, "truncated zstd data")
    assert str(cut) in line
    assert list(tmpdir_env.iterdir()) == []


def test_corrupt_xz_is_one_line(core, tmp_path, tmpdir_env):
    data = bytearray(compress("xz", core, tmp_path / "whole.xz").read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = bytes(b ^ 0x5A for b in data[mid : mid + 64])
    bad = tmp_path / "core.xz"
    bad.write_bytes(bytes(data))
    line = assert_one_line_error(run_hanganalyze([bad], timeout=60), EXIT_INPUT, str(bad))
    assert re.search(r": (corrupt|truncated) xz data", line), line  # xz's checks: corrupt, almost always
    assert list(tmpdir_env.iterdir()) == []


def test_not_enough_space_stops_with_one_line(core, tmp_path, monkeypatch):
    """Real statvfs, a reserve larger than the disk: the run stops before writing, names TMPDIR."""
    from hanganalyze.acquire import compressed
    from hanganalyze.errors import InputError

    packed = compress("zstd", core, tmp_path / "core.zst")
    work = tmp_path / "work"
    work.mkdir()
    st = os.statvfs(str(work))
    monkeypatch.setattr(compressed, "MIN_FREE_BYTES", st.f_blocks * st.f_frsize + 1)
    with pytest.raises(InputError) as e:
        compressed.acquire_compressed(packed, "zstd", None, lambda p: pytest.fail("analyzed"), lambda t: None,
                                      tmpdir=str(work))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("not enough space in TMPDIR (%s) to decompress %s: need at least " % (work, packed))
    assert msg.endswith("set TMPDIR to a folder on a larger disk")
    assert list(work.iterdir()) == []


def test_compressed_executable_is_named_by_the_compressed_file(tmp_path, tmpdir_env):
    packed = compress("gzip", fixture_binary("cxx_mutex_deadlock"), tmp_path / "app.gz")
    line = assert_one_line_error(run_hanganalyze([packed], timeout=60), EXIT_INPUT)
    assert line.endswith("%s is an ELF executable, not a core" % packed), line
    assert list(tmpdir_env.iterdir()) == []


def test_gzipped_text_paste_is_parsed_as_text(tmp_path):
    paste = REPO / "tests" / "data" / "text" / "gdb_mutex_hang_bt.txt"
    packed = compress("gzip", paste, tmp_path / "paste.txt.gz")
    plain = run_hanganalyze([paste, "--format", "json"], timeout=60)
    res = run_hanganalyze([packed, "--format", "json"], timeout=60)
    assert res.returncode == plain.returncode and res.returncode in (0, 3, 5, 6), res.stderr
    assert json.loads(res.stdout) == json.loads(plain.stdout)
    assert json.loads(res.stdout)["processes"][0]["source"] == "text"


def test_gzipped_binary_data_is_refused(tmp_path):
    blob = tmp_path / "blob"
    blob.write_bytes(bytes(range(256)) * 64)
    packed = compress("gzip", blob, tmp_path / "blob.gz")
    assert_one_line_error(run_hanganalyze([packed], timeout=60), EXIT_INPUT, "neither an ELF core nor a text file")


def test_folder_with_a_compressed_core(core, raw_report, tmp_path, tmpdir_env):
    """A folder of per-rank snapshots where one is still compressed: both are analyzed."""
    folder = tmp_path / "snaps"
    folder.mkdir()
    compress("zstd", core, folder / "rank0.zst")
    shutil.copy(core, folder / "rank1")
    res = run_hanganalyze([folder, "--format", "json"], timeout=120)
    assert res.returncode == 5, res.stderr
    procs = json.loads(res.stdout)["processes"]
    assert [p.get("rank") for p in procs] == [0, 1] and not any(p.get("error") for p in procs)
    want = raw_report["processes"][0]["threads"]
    assert procs[0]["threads"] == want and procs[1]["threads"] == want
    assert list(tmpdir_env.iterdir()) == []
