"""``hanganalyze --coredumpctl [PID|latest|MATCH]`` against the real systemd-coredump (issue 13).

The real systemd-journald, systemd-coredump and coredumpctl run in a private mount namespace
(``tests/coredump_world.py``); each crash's core is a gcore of a hung fixture handed to
systemd-coredump the way the kernel hands it (the machine's core_pattern is not ours to change).
systemd-coredump compresses it with zstd into /var/lib/systemd/coredump/ and records it in the
journal; hanganalyze finds it with coredumpctl and reports the record: signal, time, host, command
line.  With ``Storage=journal`` the core lives in the journal and coredumpctl dumps it for us.

The parsing of coredumpctl's output is also tested on output captured from the real binary
(tests/data/coredumpctl/, see its README), which runs anywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import coredump_world  # noqa: E402
from helpers import FIXTURES, REPO, all_pythons, assert_one_line_error, fixture_binary  # noqa: E402

WHY_NOT = coredump_world.available()
HANGANALYZE = shutil.which("hanganalyze")
EXIT_INPUT = 2


def _out(world: Path, name: str):
    return ((world / (name + ".out")).read_bytes(), (world / (name + ".err")).read_bytes(),
            int((world / (name + ".rc")).read_text()))


class Res:
    def __init__(self, world: Path, name: str):
        self.stdout, self.stderr, self.returncode = _out(world, name)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if WHY_NOT:
        pytest.skip("systemd-coredump cannot run here: " + WHY_NOT)
    out = tmp_path_factory.mktemp("coredump-world")
    (out / "tmp").mkdir()
    cxx = str(fixture_binary("cxx_mutex_deadlock"))
    py = all_pythons().get("3.11") or all_pythons().get("system-3.11")
    ha = [HANGANALYZE, "--timeout", "120"]
    env = {"TMPDIR": str(out / "tmp")}
    plan = [
        {"run": ha + ["--coredumpctl"], "name": "empty"},
        {"crash": [cxx], "signal": 6, "name": "cxx"},
    ]
    if py is not None:
        plan.append({"crash": [str(py), str(FIXTURES / "py_deadlock.py"), "--rlock"], "signal": 11, "name": "py"})
    plan += [
        {"run": ["coredumpctl", "--no-pager", "--json=short", "list"], "name": "list"},
        {"run": ["coredumpctl", "--no-pager", "-1", "info", "COREDUMP_PID={PID:cxx}"], "name": "info"},
        {"run": ha + ["--coredumpctl", "--format", "json"], "name": "latest", "env": env},
        {"run": ha + ["--coredumpctl", "{PID:cxx}", "--format", "json"], "name": "bypid", "env": env},
        {"run": ha + ["--coredumpctl", "cxx_mutex_deadl", "-o", str(out / "bycomm.md")], "name": "bycomm"},
        {"run": ha + ["--coredumpctl=%s" % cxx, "--format", "text"], "name": "byexe"},
        {"run": ha + ["--coredumpctl", "no_such_program"], "name": "nomatch"},
        {"storage": "journal"},
        {"crash": [cxx], "signal": 6, "name": "injournal"},
        {"run": ha + ["--coredumpctl", "{PID:injournal}", "--format", "json"], "name": "journal", "env": env},
        {"shell": "rm -f /var/lib/systemd/coredump/*"},
        {"run": ha + ["--coredumpctl", "{PID:cxx}", "-o", str(out / "gone.html")], "name": "gone"},
    ]
    (out / "plan.json").write_text(json.dumps(plan))
    subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                    str(REPO / "tests" / "coredump_world.py"), str(out / "plan.json"), str(out)],
                   check=True, timeout=1200, cwd=str(REPO))
    return {"dir": out, "py": py is not None, "cxx": cxx,
            "pids": {p.stem: int(p.read_text()) for p in out.glob("*.pid")}}


def report(world, name: str) -> dict:
    out, err, rc = _out(world["dir"], name)
    assert rc in (0, 3, 5, 6), err.decode("utf-8", "replace")[-3000:]
    assert b"Traceback" not in err
    return json.loads(out)


def test_no_core_dump_yet_is_one_line(world):
    assert_one_line_error(Res(world["dir"], "empty"), EXIT_INPUT, "coredumpctl found no core dump")


def test_real_coredumpctl_output_has_what_we_parse(world):
    from hanganalyze.acquire.coredumpctl import newest, parse_info, parse_list

    entries = parse_list(_out(world["dir"], "list")[0].decode())
    assert {e["pid"] for e in entries} >= {world["pids"]["cxx"]}
    assert all(e["corefile"] == "present" for e in entries)
    info = parse_info(_out(world["dir"], "info")[0].decode())
    assert info["PID"].startswith("%d " % world["pids"]["cxx"])
    assert info["Signal"] == "6 (ABRT)"
    assert info["Command Line"] == world["cxx"]
    assert info["Storage"].startswith("/var/lib/systemd/coredump/core.cxx_mutex_deadl.") and \
        info["Storage"].endswith(".zst (present)")
    assert newest(entries)["pid"] == max(world["pids"].get("py", 0), world["pids"]["cxx"]) or world["py"]


def test_by_pid_reads_the_stored_zst_and_reports_the_record(world):
    rep = report(world, "bypid")
    p = rep["processes"][0]
    cd = p["coredump"]
    assert cd["pid"] == world["pids"]["cxx"] and cd["from"] == "coredumpctl"
    assert cd["signal"] == "SIGABRT" and p["signal"] == "SIGABRT"  # the kernel's record: the core has none
    assert cd["executable"] == world["cxx"] and cd["cmdline"] == world["cxx"]
    assert cd["storage"].startswith("/var/lib/systemd/coredump/") and cd["storage"].endswith(".zst")
    assert cd["time"].endswith(" UTC") and cd["hostname"]
    assert "deadlock-cycle" in [f["signature"] for f in rep["findings"]]
    assert any("core decompressed from zstd" in w for w in rep.get("warnings", []) + p.get("notes", []))
    assert not os.listdir(world["dir"] / "tmp")  # the decompressed core is gone


def test_latest_is_the_newest_crash(world):
    rep = report(world, "latest")
    p = rep["processes"][0]
    newest = "py" if world["py"] else "cxx"
    assert p["coredump"]["pid"] == world["pids"][newest]
    if world["py"]:
        assert p["coredump"]["signal"] == "SIGSEGV" == p["signal"]
        assert p["coredump"]["cmdline"].endswith("py_deadlock.py --rlock")
        assert p["python"] and p["python"]["version"].startswith("3.11")
        assert p["argv"][-2:] == [str(FIXTURES / "py_deadlock.py"), "--rlock"]


def test_by_command_name_and_by_executable_in_markdown_and_text(world):
    res = Res(world["dir"], "bycomm")
    wrote = ("hanganalyze: wrote %s (md)\n" % (world["dir"] / "bycomm.md")).encode()  # -o's one line (issue 30)
    assert res.returncode == 5 and res.stderr == wrote, res.stderr  # a deadlock (killed by SIGABRT for its core)
    md = (world["dir"] / "bycomm.md").read_text()
    assert "| dumped |" in md and "by systemd-coredump (pid %d, SIGABRT)" % world["pids"]["cxx"] in md
    text = Res(world["dir"], "byexe").stdout.decode()
    assert "dumped" in text and "stored     /var/lib/systemd/coredump/core.cxx_mutex_deadl." in text


def test_no_match_is_one_line(world):
    assert_one_line_error(Res(world["dir"], "nomatch"), EXIT_INPUT,
                          "coredumpctl found no core dump matching no_such_program")


def test_core_stored_in_the_journal_is_dumped_by_coredumpctl(world):
    rep = report(world, "journal")
    cd = rep["processes"][0]["coredump"]
    assert cd["pid"] == world["pids"]["injournal"] and cd["corefile"] == "journal" and cd["dumped"] is True
    assert cd["storage"] == "journal"
    assert "deadlock-cycle" in [f["signature"] for f in rep["findings"]]
    assert not os.listdir(world["dir"] / "tmp")  # coredumpctl's dump is removed after the run


def test_core_file_gone_is_one_line_and_leaves_no_report(world):
    line = assert_one_line_error(Res(world["dir"], "gone"), EXIT_INPUT)
    assert "has no core file (coredumpctl: missing)" in line and "pid %d" % world["pids"]["cxx"] in line
    assert not (world["dir"] / "gone.html").exists()


def test_coredumpctl_not_installed_is_one_line(tmp_path):
    """Works anywhere: a PATH without coredumpctl."""
    res = subprocess.run([HANGANALYZE or sys.executable, "--coredumpctl", "latest"], capture_output=True,
                         timeout=60, env=dict(os.environ, PATH=str(tmp_path)))
    assert_one_line_error(res, EXIT_INPUT, "coredumpctl is not installed (apt-get install systemd-coredump)")


def test_option_without_value_means_latest():
    from hanganalyze.cli import _optional_value

    assert _optional_value(["--coredumpctl"], "--coredumpctl", "latest") == ["--coredumpctl", "latest"]
    assert _optional_value(["--coredumpctl", "-o", "x.md"], "--coredumpctl", "latest") == \
        ["--coredumpctl", "latest", "-o", "x.md"]
    assert _optional_value(["--coredumpctl", "1234"], "--coredumpctl", "latest") == ["--coredumpctl", "1234"]
    assert _optional_value(["--", "--coredumpctl"], "--coredumpctl", "latest") == ["--", "--coredumpctl"]
