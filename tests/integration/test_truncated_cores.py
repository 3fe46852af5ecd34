"""Cores cut short, unfinished cores, and huge sparse cores (issue 13).

Real cores of GPU processes are usually cut short (systemd's ProcessSizeMax) or still being
written.  The kernel writes the notes (every thread's registers) first, then the memory in address
order: a core cut inside its memory is analyzed (every thread, its innermost frames, as far as its
stack is in the file), the report's first lines say how much is there.  A core cut inside its
headers or notes is unfinished: one error line, exit 2.  A core of hundreds of GB that are holes
costs what the same core without them costs.

The cores are real: gdb's ``gcore`` of hung fixtures, rewritten into the kernel's layout (gcore
writes the notes last; the kernel writes them first), which moves bytes and changes nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import (  # noqa: E402
    FIXTURES,
    PHDR,
    all_pythons,
    assert_one_line_error,
    fixture_binary,
    gcore,
    program_headers,
    run_hanganalyze,
    start_hung,
)

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

EXIT_INPUT = 2
PT_LOAD, PT_NOTE = 1, 4
GiB = 1 << 30
#: The sparse core: three anonymous read-write mappings of 100 GiB each (GPU processes map device
#: address ranges like these), stored as holes: 322 GB apparent, nothing more on disk.
SPARSE = [(0x100000000000, 100 * GiB), (0x600000000000, 100 * GiB), (0x700000000000, 100 * GiB)]


def kernel_layout(src: Path, dst: Path, sparse: Sequence[Tuple[int, int]] = ()) -> Path:
    """Write `src` as the kernel lays a core out: headers, notes, then PT_LOADs by address (each
    page-aligned).  ``sparse`` adds anonymous PT_LOADs (vaddr, size) whose bytes are holes."""
    with open(src, "rb") as f:
        head = bytearray(f.read(64))
        phoff = struct.unpack_from("<Q", head, 32)[0]
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        segs = [list(PHDR.unpack_from(table, k * phentsize)) + [True] for k in range(phnum)]
        segs += [[PT_LOAD, 6, 0, vaddr, 0, size, size, 1, False] for vaddr, size in sparse]
        order = [s for s in segs if s[0] == PT_NOTE] + sorted((s for s in segs if s[0] != PT_NOTE),
                                                               key=lambda s: s[3])
        struct.pack_into("<QQ", head, 32, 64, 0)  # e_phoff, e_shoff (no section headers: as the kernel)
        struct.pack_into("<HHHH", head, 56, len(segs), 0, 0, 0)  # e_phnum, e_shentsize, e_shnum, e_shstrndx
        pos = 64 + PHDR.size * len(segs)
        placed = []
        for s in order:
            if s[0] == PT_LOAD:
                pos = (pos + 4095) & ~4095
            placed.append((pos, s))
            pos += s[5]
        with open(dst, "wb") as out:
            out.write(head)
            for new_off, s in placed:
                out.write(PHDR.pack(s[0], s[1], new_off, s[3], s[4], s[5], s[6], s[7]))
            for new_off, s in placed:
                if not s[8]:
                    continue  # a hole: never written
                out.seek(new_off)
                f.seek(s[2])
                left = s[5]
                while left:
                    chunk = f.read(min(left, 8 << 20))
                    assert chunk, "short read from %s" % src
                    out.write(chunk)
                    left -= len(chunk)
            out.truncate(pos)
    return dst


def cut(src: Path, dst: Path, size: int) -> Path:
    with open(src, "rb") as f, open(dst, "wb") as out:
        left = size
        while left:
            chunk = f.read(min(left, 8 << 20))
            out.write(chunk)
            left -= len(chunk)
    return dst


def analyze(core: Path, *args: str):
    return run_hanganalyze([str(core), "--timeout", "120", *args], timeout=240)


def analyze_json(core: Path) -> dict:
    res = analyze(core, "--format", "json")
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")[-3000:]
    assert b"Traceback" not in res.stderr
    return json.loads(res.stdout)


def _gcore_of(argv: List[str], d: Path) -> Path:
    h = start_hung(argv)
    try:
        return gcore(h.pid, d)
    finally:
        h.kill()


@pytest.fixture(scope="module")
def raw_cores(tmp_path_factory) -> Dict[str, Path]:
    """{"cxx"|"py": gcore's core of the hung C++ / Python fixture} (py: when a CPython 3.11 is here)."""
    out = {"cxx": _gcore_of([str(fixture_binary("cxx_mutex_deadlock"))], tmp_path_factory.mktemp("cxx"))}
    py = all_pythons().get("3.11") or all_pythons().get("system-3.11")
    if py is not None:
        out["py"] = _gcore_of([str(py), str(FIXTURES / "py_deadlock.py"), "--rlock"], tmp_path_factory.mktemp("py"))
    return out


@pytest.fixture(scope="module")
def cores(raw_cores) -> Dict[str, Path]:
    """The same cores in the kernel's layout."""
    return {k: kernel_layout(v, v.parent / "core.kernel") for k, v in raw_cores.items()}


@pytest.fixture(scope="module")
def dense(cores) -> Dict[str, dict]:
    """The report of each whole core, to compare the cut ones with."""
    return {k: analyze_json(v) for k, v in cores.items()}


def _native(frames: List[dict]) -> List[Tuple]:
    return [(f.get("function"), f.get("address")) for f in frames if f["kind"] == "native" and not f.get("marker")]


def _cut_at(core: Path, point: str) -> int:
    size = core.stat().st_size
    if point == "after notes":
        note = next(p for p in program_headers(core) if p[0] == PT_NOTE)
        return note[2] + note[5]
    return size * int(point.rstrip("%")) // 100


@pytest.mark.parametrize("which", ["cxx", "py"])
@pytest.mark.parametrize("point", ["25%", "50%", "75%", "after notes"])
def test_core_cut_inside_its_memory_is_analyzed(cores, dense, tmp_path, which, point):
    if which not in cores:
        pytest.skip("no CPython 3.11 (pyenv or /usr/bin/python3.11)")
    whole = dense[which]
    p = cut(cores[which], tmp_path / "core.cut", _cut_at(cores[which], point))
    snap = analyze_json(p)
    # the truncation comes first in the warnings, with how much is there
    assert snap["warnings"][0].startswith("core truncated: "), snap["warnings"]
    assert "present (" in snap["warnings"][0] and "memory beyond that is missing" in snap["warnings"][0]
    # every thread, its innermost frame (registers are in the notes), its frames as far as they go
    want = {t["tid"]: t for t in whole["processes"][0]["threads"]}
    got = {t["tid"]: t for t in snap["processes"][0]["threads"]}
    assert sorted(got) == sorted(want)
    for tid, t in got.items():
        frames, full = _native(t["frames"]), _native(want[tid]["frames"])
        assert frames and frames[0] == full[0], (tid, frames[:2], full[:2])
        assert frames == full[: len(frames)], (tid, frames, full)
        if len(frames) < len(full):
            last = t["frames"][-1]
            assert last.get("marker") and "stack beyond the end of the truncated core" in last.get("note", ""), last
    # text: the report's first lines say it
    res = analyze(p)
    assert res.returncode in (0, 3, 5, 6)
    head = res.stdout.decode("utf-8", "replace").splitlines()[:5]
    assert any(line.startswith("WARNING: core truncated: ") for line in head), head


def test_cut_inside_memory_keeps_what_is_there(cores, dense, tmp_path):
    """At 75% of the C++ core the stacks of both deadlocked threads and the mutexes are in the
    file: the deadlock is still found, with its evidence."""
    p = cut(cores["cxx"], tmp_path / "core.cut", _cut_at(cores["cxx"], "75%"))
    snap = analyze_json(p)
    assert [f["signature"] for f in snap["findings"]] == [f["signature"] for f in dense["cxx"]["findings"]]


@pytest.mark.parametrize("where", ["ELF header", "program headers", "notes"])
def test_core_cut_inside_its_headers_or_notes_is_incomplete(cores, tmp_path, where):
    core = cores["cxx"]
    note = next(p for p in program_headers(core) if p[0] == PT_NOTE)
    size = {"ELF header": 40, "program headers": 64 + 56 * 3, "notes": note[2] + note[5] // 2}[where]
    p = cut(core, tmp_path / "core.cut", size)
    line = assert_one_line_error(analyze(p), EXIT_INPUT)
    assert "%s is incomplete: cut inside its %s (" % (p, where) in line, line
    assert line.endswith("still being written, or the disk filled up)"), line


def test_gcore_core_cut_before_its_notes_is_incomplete(raw_cores, tmp_path):
    """gdb's gcore writes the notes after the memory: cut anywhere before them, it is unfinished."""
    raw = raw_cores["cxx"]
    p = cut(raw, tmp_path / "core.cut", raw.stat().st_size // 2)
    line = assert_one_line_error(analyze(p), EXIT_INPUT)
    assert "is incomplete: cut before its notes" in line, line


def _measure(core: Path, out: Path) -> Tuple[float, int, int]:
    """(wall seconds, peak RSS in KiB of hanganalyze and gdb, exit code) of one run."""
    cmd = shutil.which("hanganalyze")
    argv = ([cmd] if cmd else [sys.executable, "-m", "hanganalyze"]) + [str(core), "--format", "json"]
    with open(out, "wb") as so:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=so, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)  # ru_maxrss covers the children it reaped (gdb)
        took = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return took, usage.ru_maxrss, p.returncode


def test_huge_sparse_core_costs_what_the_dense_one_costs(cores, tmp_path):
    """300 GB of holes: the same threads and frames, in the same time and memory (±20 %) as the
    same core without them.  A guard that nothing reads the holes, not a benchmark."""
    dense_core = cores["cxx"]
    sparse_core = kernel_layout(dense_core, tmp_path / "core.sparse", SPARSE)
    st = sparse_core.stat()
    assert st.st_size >= 300e9
    assert st.st_blocks * 512 < dense_core.stat().st_size + (4 << 20)  # a few MB on disk
    runs: Dict[str, List[Tuple[float, int, int]]] = {"dense": [], "sparse": []}
    for _ in range(3):  # interleaved: the machine's load hits both alike
        for name, core in (("dense", dense_core), ("sparse", sparse_core)):
            runs[name].append(_measure(core, tmp_path / ("%s.json" % name)))
    assert all(r[2] in (0, 3, 5, 6) for rs in runs.values() for r in rs), runs
    a, b = (json.loads((tmp_path / ("%s.json" % n)).read_text()) for n in ("dense", "sparse"))
    assert a["processes"][0]["threads"] == b["processes"][0]["threads"]
    assert a["findings"] == b["findings"] and a.get("warnings") == b.get("warnings")
    wall = {n: statistics.median(r[0] for r in rs) for n, rs in runs.items()}
    rss = {n: statistics.median(r[1] for r in rs) for n, rs in runs.items()}
    print("sparse core %.0f GB apparent, %.1f MB on disk: wall %.2f s vs %.2f s dense, peak RSS %d vs %d KiB"
          % (st.st_size / 1e9, st.st_blocks * 512 / 1e6, wall["sparse"], wall["dense"], rss["sparse"], rss["dense"]))
    assert wall["sparse"] <= 1.2 * wall["dense"] + 0.1, (wall, runs)  # + 0.1 s: sub-second runs jitter
    assert rss["sparse"] <= 1.2 * rss["dense"], (rss, runs)


def test_nccl_version_scan_skips_the_holes(cores, tmp_path, monkeypatch):
    """The bounded scan of a core's memory for NCCL's version string (processes with NCCL frames)
    reads data, not holes: before, a sparse core cost its 512 MiB budget in zeros."""
    from hanganalyze.acquire import embedded_versions

    sparse_core = kernel_layout(cores["cxx"], tmp_path / "core.sparse", SPARSE)
    scanned = []
    real = embedded_versions._first_match
    monkeypatch.setattr(embedded_versions, "_first_match",
                        lambda buf, start, end: scanned.append(end - start) or real(buf, start, end))
    assert embedded_versions.version_in_core(str(sparse_core)) is None
    assert 0 < sum(scanned) <= cores["cxx"].stat().st_size
