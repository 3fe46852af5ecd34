"""The gdb commands under misuse: no process, bogus arguments, unwritable or precious output files.
Each ends in one gdb error line (never a Python traceback), and nothing is written or destroyed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import fixture_binary, gcore, gdb_batch, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    h = start_hung([str(fixture_binary("cxx_mutex_deadlock"))])
    try:
        return gcore(h.pid, tmp_path_factory.mktemp("gdbcmds"))
    finally:
        h.kill()


def _our_lines(out: str):
    assert "Traceback" not in out and 'File "' not in out, out
    return [ln for ln in out.splitlines() if ln.startswith(("hang-", "usage: hang-", "hanganalyze:"))]


def test_no_process_is_an_error_not_an_empty_report(tmp_path):
    out_file = tmp_path / "snap.json"
    out = gdb_batch(["hang-dump %s" % out_file, "hang-analyze", "hang-bt", "hang-dump"], timeout=60)
    lines = _our_lines(out)
    assert lines.count("hang-dump: no process: load a core (core-file CORE) or attach (attach PID) first") == 2
    assert "hang-analyze: no process: load a core (core-file CORE) or attach (attach PID) first" in lines
    assert "hang-bt: no thread selected" in lines
    assert not out_file.exists()
    assert "threads    0" not in out  # no report of nothing


def test_executable_without_process_is_no_process():
    out = gdb_batch(["hang-dump"], exe=fixture_binary("cxx_mutex_deadlock"), timeout=60)
    assert "hang-dump: no process" in out


@pytest.mark.parametrize(
    "cmd, line",
    [
        ("hang-bt --bogus", "usage: hang-bt [-a]"),
        ("hang-bt-filter maybe", "usage: hang-bt-filter on|off"),
        ("hang-locks foo", "usage: hang-locks [--no-python]"),
        ("hang-dump a b", "usage: hang-dump [--no-python] [--no-locks] [FILE]"),
        ("hang-dump --bogus", "usage: hang-dump [--no-python] [--no-locks] [FILE]"),
        ("hang-analyze --format bogus", "hang-analyze: --format must be one of text, json, md"),
        ("hang-analyze --timeout nan", "hang-analyze: --timeout must be a positive number of seconds"),
        ("hang-analyze --timeout -3", "hang-analyze: --timeout must be a positive number of seconds"),
        ("hang-analyze --timeout", "hang-analyze: --timeout needs a value"),
        ("hang-analyze 'unbalanced", "hang-analyze: No closing quotation"),
    ],
)
def test_bogus_arguments_are_one_error_line(core, cmd, line, tmp_path):
    out = gdb_batch([cmd, "echo AFTER\\n"], core=core, exe=fixture_binary("cxx_mutex_deadlock"), timeout=60)
    lines = _our_lines(out)
    assert len([ln for ln in lines if line in ln]) == 1, out[-2000:]
    assert "AFTER" in out  # an error line, not a dead gdb
    assert not (tmp_path / "a").exists()


def test_unwritable_output_is_one_line(core, tmp_path):
    out = gdb_batch(
        ["hang-dump %s/missing/x.json" % tmp_path],
        core=core, exe=fixture_binary("cxx_mutex_deadlock"), timeout=60,
    )
    assert "hang-dump: cannot write %s/missing/x.json: No such file or directory" % tmp_path in _our_lines(out)


def test_dump_never_overwrites_the_core(core):
    before = core.read_bytes()[:4096], core.stat().st_size
    out = gdb_batch(["hang-dump %s" % core], core=core, exe=fixture_binary("cxx_mutex_deadlock"), timeout=60)
    assert "is an ELF file (a core or a binary?): not overwritten" in out
    assert (core.read_bytes()[:4096], core.stat().st_size) == before


def test_hang_traceback_switch_shows_what_is_behind_the_one_line_error():
    """An unexpected exception inside a command: one line by default; with ``hang-traceback on``
    the traceback is printed before it (for bug reports), and ``off`` hides it again."""
    define = ("python exec(\"from hanganalyze_gdbext.commands import _GdbCommand\\n"
              "def boom(argv, from_tty):\\n    raise KeyError('deliberate')\\n"
              "_GdbCommand('hang-test-boom', boom, 'test')\")")
    out = gdb_batch([define, "hang-test-boom", "echo MARK1\\n", "hang-traceback on", "hang-test-boom",
                     "echo MARK2\\n", "hang-traceback off", "hang-test-boom", "echo MARK3\\n"], timeout=60)
    first, rest = out.split("MARK1", 1)
    second, third = rest.split("MARK2", 1)
    assert "hanganalyze: KeyError: 'deliberate'" in first and "Traceback" not in first, out
    assert "Traceback (most recent call last)" in second and "in boom" in second, out
    assert second.count("hanganalyze: KeyError: 'deliberate'") == 1
    assert "Traceback" not in third.split("MARK3")[0] and "hanganalyze: KeyError" in third, out
