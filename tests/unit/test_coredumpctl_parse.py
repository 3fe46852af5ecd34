"""coredumpctl's output as the real binary printed it (tests/data/coredumpctl, systemd 252): the
list JSON, the info text, and what hanganalyze keeps of them.  The live tests are in
tests/integration/test_coredumpctl.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze.acquire.coredumpctl import StoredCore, newest, parse_info, parse_list, record
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Process, Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "coredumpctl"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_list_present_newest_is_the_python_crash():
    entries = parse_list(read("list-present.json"))
    assert [e["pid"] for e in entries] == [4495, 4513]
    e = newest(entries)
    assert e["pid"] == 4513 and e["sig"] == 11 and e["corefile"] == "present"
    assert e["exe"] == "/root/.pyenv/versions/3.11.7/bin/python3.11"


def test_list_mixed_storage_states():
    entries = parse_list(read("list-mixed.json"))
    assert [e["corefile"] for e in entries] == ["missing", "missing", "journal"]
    assert newest(entries)["pid"] == 4537
    assert newest(list(reversed(entries)))["pid"] == 4537  # by time, not by position


def test_info_present():
    info = parse_info(read("info-present.txt"))
    assert info["PID"] == "4513 (python3.11)"
    assert info["Signal"] == "11 (SEGV)"
    assert info["Command Line"] == ("/root/.pyenv/versions/3.11.7/bin/python3.11 "
                                    "/work/main/tests/fixtures/py_deadlock.py --rlock")
    assert info["Hostname"] == "vm"
    assert info["Storage"].endswith(".4513.1795443500000000.zst (present)")
    assert "\\x2e" in info["Storage"]  # systemd escapes the '.' of the command name in the file name
    # the message (stack traces, "ELF object binary architecture: ...") is not taken for fields
    assert "ELF object binary architecture" not in info and "Message" not in info


def test_record_keeps_what_the_report_shows():
    entry = newest(parse_list(read("list-present.json")))
    meta = record(entry, parse_info(read("info-present.txt")))
    assert meta == {
        "from": "coredumpctl", "pid": 4513, "signal": "SIGSEGV", "time": "2026-11-23 14:18:21 UTC",
        "executable": "/root/.pyenv/versions/3.11.7/bin/python3.11",
        "cmdline": "/root/.pyenv/versions/3.11.7/bin/python3.11 /work/main/tests/fixtures/py_deadlock.py --rlock",
        "hostname": "vm", "uid": 0, "corefile": "present",
        "storage": "/var/lib/systemd/coredump/core.python3\\x2e11.0.fdebc3a8b6394a9e8c58ebcf38080640.4513."
                   "1795443500000000.zst",
    }


@pytest.mark.parametrize("name, storage", [("info-missing.txt", "missing"), ("info-journal.txt", "journal")])
def test_info_of_missing_and_journal_cores(name, storage):
    info = parse_info(read(name))
    assert info["Signal"] == "6 (ABRT)"
    if storage == "journal":
        assert info["Storage"] == "journal"
    else:
        assert info["Storage"].endswith(".zst (missing)")
        meta = record({"pid": 4495, "sig": 6, "corefile": "missing"}, info)
        assert not meta["storage"].endswith(")")


@pytest.mark.parametrize("text", ["", "not json", "{}", "[1, 2]", '{"pid": 1}', "[" * 100000])
def test_bad_list_output_is_one_line_or_empty(text):
    try:
        entries = parse_list(text)
    except InputError as e:
        assert "\n" not in str(e)
        return
    assert newest(entries) is None


def test_apply_sets_the_signal_only_where_the_core_has_none():
    meta = record(newest(parse_list(read("list-present.json"))), parse_info(read("info-present.txt")))
    stored = StoredCore(path=Path("/x"), meta=meta)
    snap = Snapshot(processes=[Process(source="core", signal=None, executable=meta["executable"]),
                               Process(source="core", signal="SIGABRT", executable="/other")])
    stored.apply(snap)
    first, second = snap.processes
    assert first.signal == "SIGSEGV" and first.coredump.pid == 4513
    assert first.argv == meta["cmdline"].split()
    assert second.signal == "SIGABRT"
    assert any("systemd-coredump recorded SIGSEGV, the core's notes say SIGABRT" in n for n in second.notes)
    assert any("recorded the executable" in n for n in second.notes)
