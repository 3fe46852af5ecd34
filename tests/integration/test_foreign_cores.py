"""Cores from another machine (issue 13): ``--sysroot``, ``--solib-search-path``, the mapped-file
table (build-id in the core against the file found here: match, mismatch, missing) and
``--debuginfod`` (off unless asked).

The "other machine" is made real: the fixture executable and its NCCL-named library are copied to
a folder, run from there until they hang, and cored by gcore; then that folder is moved into a
sysroot tree (with copies of every system library the core maps), so the paths the core names no
longer exist.  The analysis with ``--sysroot`` must give the frames the original machine gave.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import (  # noqa: E402
    FIXTURES,
    assert_one_line_error,
    fixture_binary,
    gcore,
    run_hanganalyze,
    start_hung,
)

from hanganalyze.corefile import build_id_of_file, read_core  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

NCCL = "libnccl.so.2.28.9"
#: --sysroot works through gdb: the original machine's report is taken by gdb too.
GDB_ENGINE = ["--engine", "gdb"] if b"--engine" in run_hanganalyze(["--help"], timeout=60).stdout else []
#: Markup in the application folder's name: the table's paths must stay escaped in HTML.
APP_DIR = 'app<b>&"x'
EXIT_INPUT = 2


def replicate(path: str, root: Path) -> None:
    """Copy the file at `path` into `root` at the same place, recreating every symlink on the way
    (absolute link targets made relative, so nothing in the tree points back at this machine)."""
    parts = Path(path).parts
    cur = "/"
    for i, part in enumerate(parts[1:], 1):
        cur = os.path.join(cur, part)
        if os.path.islink(cur):
            target = os.readlink(cur)
            full = target if os.path.isabs(target) else os.path.normpath(os.path.join(os.path.dirname(cur), target))
            dst = root / cur.lstrip("/")
            if not os.path.lexists(dst):
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.path.relpath(full, os.path.dirname(cur)), dst)
            replicate(os.path.join(full, *parts[i + 1:]), root)
            return
    dst = root / path.lstrip("/")
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dst)


def ldd_paths(exe: Path) -> List[str]:
    """The dynamic linker's names of the executable's libraries (``/lib/x86_64-linux-gnu/libc.so.6``)."""
    out = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, timeout=60).stdout
    paths = []
    for line in out.splitlines():
        for word in line.split():
            if word.startswith("/"):
                paths.append(word)
    return paths


def frames(report: dict) -> List[List[tuple]]:
    return [[(f["kind"], f["function"], f["file"], f["line"], f["library"], f["address"]) for f in t["frames"]]
            for t in report["processes"][0]["threads"]]


def table(report: dict) -> Dict[str, dict]:
    return {r["path"]: r for r in report["processes"][0]["mapped_files"]}


def analyze(core: Path, *args: str, env=None):
    return run_hanganalyze([str(core), "--timeout", "120", *args], timeout=300)


def analyze_json(core: Path, *args: str) -> dict:
    res = analyze(core, "--format", "json", *args)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")[-3000:]
    assert b"Traceback" not in res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    """{"core", "orig" (the folder the process ran from, gone now), "root" (the sysroot), "base"
    (the report on the original machine), "exe", "lib"}."""
    tmp = tmp_path_factory.mktemp("foreign")
    orig = tmp / APP_DIR
    orig.mkdir()
    exe = orig / "sig_mimic"
    shutil.copy2(fixture_binary("sig_mimic"), exe)
    lib = orig / NCCL
    shutil.copy2(fixture_binary("libsig_nccl.so"), lib)
    h = start_hung([str(exe), "nccl-destroy", str(lib)])
    try:
        core = gcore(h.pid, tmp / "cores")
    finally:
        h.kill()
    # the original machine's report, by the reader --sysroot uses (gdb; the default may be another)
    base = analyze_json(core, *GDB_ENGINE)
    root = tmp / "sysroot"
    for f in read_core(core).files:
        if f.on_disk and not f.path.startswith(str(orig)):
            replicate(f.path, root)
    for p in ldd_paths(exe):
        replicate(p, root)
    dest = root / str(orig).lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(orig), str(dest))  # the original paths are gone from this machine
    assert not exe.exists() and not lib.exists()
    return {"core": core, "orig": orig, "root": root, "base": base, "exe": exe, "lib": lib, "tmp": tmp}


def test_original_machine_sees_the_bug(foreign):
    base = foreign["base"]
    assert "nccl-destroy-with-live-cuda-graph" in [f["signature"] for f in base["findings"]]
    rows = table(base)
    assert rows[str(foreign["lib"])]["status"] == "match"
    assert rows[str(foreign["exe"])]["status"] == "match"


def test_without_the_files_the_core_is_refused_in_one_line(foreign):
    res = analyze(foreign["core"])
    assert_one_line_error(res, EXIT_INPUT, "is gone")


def test_sysroot_gives_the_same_frames_as_the_original_machine(foreign):
    rep = analyze_json(foreign["core"], "--sysroot", str(foreign["root"]))
    base = foreign["base"]
    assert frames(rep) == frames(base)  # function, file, line, library (as the core names it), pc
    assert sum(len(t) for t in frames(rep)) > 20
    assert [f["signature"] for f in rep["findings"]] == [f["signature"] for f in base["findings"]]
    assert rep["bucket"] == base["bucket"]
    rows = table(rep)
    root = str(foreign["root"])
    lib = rows[str(foreign["lib"])]
    assert lib["status"] == "match" and lib["found"].startswith(root + "/")
    assert lib["build_id"] == build_id_of_file(lib["found"]) == table(base)[str(foreign["lib"])]["build_id"]
    libs = [r for r in rows.values() if ".so" in r["path"]]
    assert len(libs) >= 5
    for r in libs:  # every library came from the sysroot, none from this machine's own folders
        assert r["status"] == "match", r
        assert r["found"].startswith(root + "/"), r
    assert not any("may be wrong" in w for w in rep.get("warnings", []))


def test_solib_search_path_finds_a_library_by_name(foreign, tmp_path):
    """The library is not in the sysroot but in a flat folder: gdb's search path finds it."""
    root = foreign["root"]
    moved = root / str(foreign["lib"]).lstrip("/")
    flat = tmp_path / "libs"
    flat.mkdir()
    shutil.move(str(moved), str(flat / NCCL))
    try:
        rep = analyze_json(foreign["core"], "--sysroot", str(root), "--solib-search-path", str(flat))
    finally:
        shutil.move(str(flat / NCCL), str(moved))
    row = table(rep)[str(foreign["lib"])]
    assert row["status"] == "match" and row["found"] == str(flat / NCCL)
    assert frames(rep) == frames(foreign["base"])


@pytest.fixture(scope="module")
def other_build(tmp_path_factory):
    """The NCCL mimic built again with other options: another build-id, other code addresses."""
    out = tmp_path_factory.mktemp("otherbuild") / NCCL
    subprocess.run(["g++", "-O1", "-g", "-pthread", "-std=c++17", "-shared", "-fPIC", "-o", str(out),
                    str(FIXTURES / "libsig_nccl.cpp")], check=True, timeout=300)
    return out


def test_a_library_of_another_build_is_listed_as_mismatch(foreign, other_build):
    moved = foreign["root"] / str(foreign["lib"]).lstrip("/")
    keep = moved.with_name("keep")
    shutil.move(str(moved), str(keep))
    shutil.copy2(other_build, moved)
    try:
        res = analyze(foreign["core"], "--sysroot", str(foreign["root"]), "--format", "json")
        text = analyze(foreign["core"], "--sysroot", str(foreign["root"])).stdout.decode()
    finally:
        os.unlink(moved)
        shutil.move(str(keep), str(moved))
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode()[-2000:]
    rep = json.loads(res.stdout)
    row = table(rep)[str(foreign["lib"])]
    assert row["status"] == "mismatch"
    assert row["disk_build_id"] == build_id_of_file(str(other_build)) != row["build_id"]
    assert row["build_id"] == table(foreign["base"])[str(foreign["lib"])]["build_id"]
    others = [r for p, r in table(rep).items() if p != str(foreign["lib"]) and ".so" in p]
    assert others and all(r["status"] == "match" for r in others)
    # the doubt comes first in the text report, and the table row says which build is where
    head = text.split("FINDINGS")[0].split("No finding")[0]
    assert "is not the file the process mapped" in head and NCCL in head
    assert "mismatch  %s  build-id %s in the core, %s on disk" % (foreign["lib"], row["build_id"],
                                                                   row["disk_build_id"]) in text


def test_a_missing_library_still_names_its_frames_and_findings_are_made(foreign, tmp_path):
    """libnccl is not anywhere here: gdb shows ``?? ()`` for its frames (and cannot unwind past
    them without its unwind tables).  The frames are named after the library the core maps there,
    so a ``{function: "??", library: "libnccl.so*"}`` signature still matches."""
    sig = tmp_path / "sigs"
    sig.mkdir()
    (sig / "nccl_stripped.yaml").write_text("""\
signatures:
  - id: waits-inside-nccl
    title: A thread waits inside NCCL
    severity: hang
    cause: test signature for frames without symbols
    fix:
      - {kind: code, text: none}
    references: [https://example.org/x]
    match:
      threads:
        - rule: waiter
          stack:
            - {function: "re:pthread_cond_wait", within: 8}
            - {function: "??", library: "libnccl.so*", gap: 1}
""")
    moved = foreign["root"] / str(foreign["lib"]).lstrip("/")
    keep = moved.with_name("keep")
    shutil.move(str(moved), str(keep))
    try:
        rep = analyze_json(foreign["core"], "--sysroot", str(foreign["root"]), "--signatures", str(sig))
        md = analyze(foreign["core"], "--sysroot", str(foreign["root"]), "--format", "md").stdout.decode()
    finally:
        shutil.move(str(keep), str(moved))
    row = table(rep)[str(foreign["lib"])]
    assert row["status"] == "missing" and row["found"] is None and row["build_id"]
    main = rep["processes"][0]["threads"][0]
    unnamed = [f for f in main["frames"] if f["function"] is None and f["library"] == str(foreign["lib"])]
    assert unnamed, main["frames"]
    # past the missing library the unwind has no tables: an address in no mapped file names no library
    assert not any(f["library"] == str(foreign["exe"]) and f["function"] is None for f in main["frames"])
    assert "waits-inside-nccl" in [f["signature"] for f in rep["findings"]]
    assert any("not found under --sysroot" in w and "may be wrong" in w for w in rep["warnings"])
    assert "1 missing" in md and "missing   %s" % foreign["lib"] in md.replace("&lt;", "<").replace("&amp;", "&")


def test_reports_carry_the_table_and_html_escapes_it(foreign):
    res = analyze(foreign["core"], "--sysroot", str(foreign["root"]), "--format", "html")
    assert res.returncode in (0, 3, 5, 6)
    html = res.stdout.decode()
    assert "Mapped files of" in html and 'class="st-match"' in html
    assert 'app&lt;b&gt;&amp;&#34;x/%s' % NCCL in html  # the folder's markup, escaped
    assert "app<b>" not in html
    text = analyze(foreign["core"], "--sysroot", str(foreign["root"])).stdout.decode()
    assert "MAPPED FILES of" in text and "(found: %s/" % foreign["root"] in text


@pytest.mark.parametrize("args, words", [
    (["--sysroot", "/nonexistent/root"], "--sysroot /nonexistent/root: no such folder"),
    (["--solib-search-path", "/tmp:/nonexistent/libs"], "--solib-search-path /nonexistent/libs: no such folder"),
])
def test_bad_folders_are_one_line_errors(foreign, args, words):
    assert_one_line_error(analyze(foreign["core"], *args), EXIT_INPUT, words)


def test_executable_not_in_the_sysroot_is_one_line(foreign, tmp_path):
    empty = tmp_path / "empty-root"
    empty.mkdir()
    line = assert_one_line_error(analyze(foreign["core"], "--sysroot", str(empty)), EXIT_INPUT)
    assert "is not under --sysroot %s" % empty in line and "--exe" in line


# ------------------------------------------------------------------------------------ debuginfod


class _Debuginfod(http.server.BaseHTTPRequestHandler):
    """The debuginfod protocol's one request gdb makes here: GET /buildid/ID/debuginfo (404 else)."""

    files: Dict[str, Path] = {}
    requests: List[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).requests.append(self.path)
        parts = self.path.strip("/").split("/")
        f = self.files.get(parts[1]) if len(parts) == 3 and parts[0] == "buildid" and parts[2] == "debuginfo" else None
        if f is None:
            self.send_error(404)
            return
        data = f.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def debuginfod_server():
    _Debuginfod.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Debuginfod)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server, _Debuginfod
    server.shutdown()
    server.server_close()


def test_debuginfod_only_when_asked(debuginfod_server, tmp_path, monkeypatch):
    """A stripped executable's frames are ?? offline (the default, even with DEBUGINFOD_URLS set:
    no request reaches the server); with --debuginfod gdb fetches the debug info by build-id."""
    server, handler = debuginfod_server
    stripped = tmp_path / "cxx_mutex_deadlock"
    shutil.copy2(fixture_binary("cxx_mutex_deadlock.stripped"), stripped)
    full = fixture_binary("cxx_mutex_deadlock")
    bid = build_id_of_file(str(stripped))
    assert bid and bid == build_id_of_file(str(full))
    handler.files = {bid: full}
    h = start_hung([str(stripped)])
    try:
        core = gcore(h.pid, tmp_path / "cores")
    finally:
        h.kill()
    monkeypatch.setenv("DEBUGINFOD_URLS", "http://127.0.0.1:%d" % server.server_address[1])
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def names(rep):
        return {f["function"] for t in rep["processes"][0]["threads"] for f in t["frames"]}

    off = analyze_json(core)
    assert handler.requests == []  # offline by default
    assert "take_a_then_b" not in names(off)
    on = analyze_json(core, "--debuginfod")
    assert "/buildid/%s/debuginfo" % bid in handler.requests
    assert {"take_a_then_b", "take_b_then_a"} <= names(on)
    assert "deadlock-cycle" in [f["signature"] for f in on["findings"]]
    assert any(n.startswith("debuginfod on: gdb asked http://127.0.0.1:")
               for n in on["processes"][0].get("notes", []))


def test_gdb_settings_with_the_direct_engine_are_refused(foreign):
    if b"--engine" not in run_hanganalyze(["--help"], timeout=60).stdout:
        pytest.skip("no --engine option in this build")
    res = analyze(foreign["core"], "--sysroot", str(foreign["root"]), "--engine", "direct")
    assert_one_line_error(res, EXIT_INPUT, "are gdb's settings: use them without --engine direct")
