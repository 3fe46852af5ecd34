"""--sysroot / --solib-search-path: gdb's lookup order on real folders, the checks on the options,
and the mapped-file table in every report format (escaping, redaction, size limits)."""

from __future__ import annotations

import json

import pytest

from hanganalyze.acquire.sysroot import GdbOptions, table_counts
from hanganalyze.analyze.redact import redact
from hanganalyze.errors import InputError
from hanganalyze.render import render
from hanganalyze.render.markdown import LIMIT
from hanganalyze_gdbext.model import CoreDump, Frame, MappedFile, Process, Snapshot, Thread


def _touch(p):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"x")
    return str(p)


def test_sysroot_first_then_search_path_by_relative_path_then_by_name(tmp_path):
    root, a, b = tmp_path / "root", tmp_path / "a", tmp_path / "b"
    for d in (root, a, b):
        d.mkdir()
    opts = GdbOptions.from_cli(str(root), ["%s:%s" % (a, b)])
    assert opts.locate("/opt/lib/libx.so") is None
    by_name = _touch(b / "libx.so")
    assert opts.locate("/opt/lib/libx.so") == by_name
    by_rel = _touch(b / "opt" / "lib" / "libx.so")
    assert opts.locate("/opt/lib/libx.so") == by_rel  # the relative path beats the base name
    in_root = _touch(root / "opt" / "lib" / "libx.so")
    assert opts.locate("/opt/lib/libx.so") == in_root


def test_with_a_sysroot_the_hosts_own_file_is_never_used(tmp_path):
    host_file = _touch(tmp_path / "host" / "libc.so.6")
    root = tmp_path / "root"
    root.mkdir()
    assert GdbOptions.from_cli(str(root)).locate(host_file) is None
    assert GdbOptions.from_cli(None).locate(host_file) == host_file
    assert GdbOptions.from_cli(None, [str(tmp_path)]).locate(host_file) == host_file


def test_settings_go_to_gdb_before_the_files(tmp_path):
    opts = GdbOptions.from_cli(str(tmp_path), [str(tmp_path)], debuginfod=True)
    assert opts.settings() == ["set debuginfod enabled on", "set sysroot %s" % tmp_path,
                               "set solib-search-path %s" % tmp_path]
    assert GdbOptions.from_cli(None).settings() == []
    assert GdbOptions.from_cli("/").sysroot is None  # the host's root is gdb's default


@pytest.mark.parametrize("sysroot, search, words", [
    ("/no/such/root", [], "--sysroot /no/such/root: no such folder"),
    (None, ["/no/such/dir"], "--solib-search-path /no/such/dir: no such folder"),
    ("/tmp\nset confirm on", [], "not a usable folder name"),
    (" /tmp", [], "not a usable folder name"),
])
def test_bad_options_are_one_line(sysroot, search, words):
    with pytest.raises(InputError, match=words) as e:
        GdbOptions.from_cli(sysroot, search)
    assert "\n" not in str(e.value)


def _snapshot(n_files: int = 3) -> Snapshot:
    rows = [
        {"path": "/home/alice/app/<b>lib&.so", "build_id": "aa" * 20, "found": "/sysroot/home/alice/app/<b>lib&.so",
         "disk_build_id": "bb" * 20, "status": "mismatch"},
        {"path": "/opt/libgone.so.1", "build_id": "cc" * 20, "found": None, "disk_build_id": None,
         "status": "missing"},
    ]
    rows += [{"path": "/usr/lib/lib%d.so" % i, "build_id": "%040x" % i, "found": "/usr/lib/lib%d.so" % i,
              "disk_build_id": "%040x" % i, "status": "match"} for i in range(n_files)]
    proc = Process(source="core", pid=7, executable="/home/alice/app/prog", threads=[
        Thread(tid=7, frames=[Frame(kind="native", function=None, library="/opt/libgone.so.1", address=0x1000)])])
    proc.mapped_files = [MappedFile(**r) for r in rows]
    proc.coredump = CoreDump(from_="coredumpctl", pid=7, signal="SIGABRT", time="2026-01-02 03:04:05 UTC",
                             hostname="gpu-node-17", cmdline="/home/alice/app/prog --token=hunter2",
                             storage="/var/lib/systemd/coredump/core.prog.zst")
    return Snapshot(processes=[proc])


def test_table_in_every_format_with_escaping():
    snap = _snapshot()
    text = render(snap, "text")
    assert "mapped     5 files: 1 mismatch, 1 missing, 3 match" in text
    assert "mismatch  /home/alice/app/<b>lib&.so  build-id %s in the core, %s on disk" % ("aa" * 20, "bb" * 20) in text
    assert text.index("mismatch  /home") < text.index("missing   /opt/libgone") < text.index("match     /usr")
    assert "dumped     2026-01-02 03:04:05 UTC on host gpu-node-17 by systemd-coredump (pid 7, SIGABRT)" in text
    html = render(snap, "html")
    assert "&lt;b&gt;lib&amp;.so" in html and "<b>lib&" not in html
    assert 'class="st-mismatch"' in html and 'class="st-missing"' in html
    md = render(snap, "md")
    assert "Mapped files of" in md and "1 mismatch" in md and "| dumped |" in md
    data = json.loads(render(snap, "json"))
    assert data["processes"][0]["mapped_files"][0]["status"] == "mismatch"
    assert data["processes"][0]["coredump"]["hostname"] == "gpu-node-17"
    assert table_counts(snap.processes[0].mapped_files) == {"match": 3, "mismatch": 1, "missing": 1}
    assert data["processes"][0]["coredump"] == {
        "from": "coredumpctl", "pid": 7, "signal": "SIGABRT", "time": "2026-01-02 03:04:05 UTC",
        "cmdline": "/home/alice/app/prog --token=hunter2", "hostname": "gpu-node-17",
        "storage": "/var/lib/systemd/coredump/core.prog.zst"}


def test_huge_tables_stay_within_the_markdown_limit_and_doubtful_rows_come_first():
    snap = _snapshot(5000)
    md = render(snap, "md")
    assert len(md) < LIMIT
    assert "mismatch  /home/alice" in md and "more rows (the JSON and HTML reports list every one)" in md
    text = render(snap, "text")
    assert "... 4602 more (the JSON and HTML reports list every one)" in text
    assert render(snap, "html").count("<tr class=\"st-") == 5002


def test_redaction_covers_the_table_and_the_record():
    out = redact(_snapshot(), hostnames=[], users=[])
    blob = json.dumps(out.to_dict())
    assert "alice" not in blob and "gpu-node-17" not in blob and "hunter2" not in blob
    assert out.processes[0].mapped_files[0].status == "mismatch"

