"""End to end through the installed CLI: a pasted dump as a file and on stdin."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_hanganalyze

DATA = Path(__file__).resolve().parents[1] / "data" / "text"


def _json(res):
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode()
    return json.loads(res.stdout)


def test_file_to_json():
    res = run_hanganalyze([DATA / "gdb_joinable_abort_bt.txt", "--format", "json"], timeout=120)
    snap = _json(res)
    assert snap["schema"] == "hanganalyze/1"
    (proc,) = snap["processes"]
    assert proc["source"] == "text" and proc["signal"] == "SIGABRT"
    assert [t["tid"] for t in proc["threads"]] == [8363, 8362, 8359]
    names = [f["function"] for f in proc["threads"][2]["frames"]]
    assert "std::thread::~thread" in names and "start_and_forget" in names
    assert "terminate called without an active exception" in proc["messages"]


def test_stdin_with_forced_format():
    text = (DATA / "pyspy_dump.txt").read_bytes()
    res = run_hanganalyze(["-", "--format", "json", "--input-format", "pyspy"], stdin=text, timeout=120)
    (proc,) = _json(res)["processes"]
    assert proc["pid"] == 10719
    assert [t["name"] for t in proc["threads"]] == ["MainThread", "loader-a", "loader-b", "heartbeat"]


def test_stdin_crlf_and_colours_detected():
    text = (DATA / "faulthandler_abort.txt").read_text().replace("\n", "\r\n")
    text = text.replace("Fatal Python error", "\x1b[31mFatal Python error\x1b[0m")
    res = run_hanganalyze(["-", "--format", "json"], stdin=text.encode(), timeout=120)
    (proc,) = _json(res)["processes"]
    assert proc["signal"] == "SIGABRT"
    assert "Fatal Python error: Aborted" in proc["messages"]


def test_unknown_text_is_one_line_exit_2(tmp_path):
    paste = tmp_path / "paste.txt"
    paste.write_text("nothing to see here\njust words\n")
    res = run_hanganalyze([paste, "--format", "json"], timeout=120)
    assert res.returncode == 2
    err = res.stderr.decode().strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert "could not recognise the text as any known dump format" in err and "--input-format" in err
    binary = bytes(range(256)) * 40
    res = run_hanganalyze(["-"], stdin=binary, timeout=120)
    assert res.returncode == 2 and res.stderr.decode().count("\n") == 1


def test_unknown_input_format_lists_the_choices():
    res = run_hanganalyze(["-", "--input-format", "dtrace"], stdin=b"#0 f ()\n", timeout=120)
    assert res.returncode == 2
    err = res.stderr.decode()
    assert "unknown --input-format 'dtrace'" in err and "pyspy-json" in err and "faulthandler" in err
