"""The gdb commands' argument parsing (argparse, as in pwndbg): ``-h`` prints the usage and the
options, a bad argument is one error line naming the command and its usage, and the
``hang-traceback`` switch shows the traceback behind a failing command's one-line error."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import gdb_batch  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

COMMANDS = ["hang-bt", "hang-bt-filter", "hang-dump", "hang-locks", "hang-analyze", "hang-traceback"]


def _between(out: str, start: str, end: str) -> str:
    return out.split(start, 1)[1].split(end, 1)[0]


def test_help_prints_usage_and_options_and_runs_nothing():
    cmds = []
    for i, name in enumerate(COMMANDS):
        cmds += ["echo BEGIN%d\\n" % i, "%s %s" % (name, "-h" if i % 2 else "--help"), "echo END%d\\n" % i]
    out = gdb_batch(cmds, timeout=60)
    for i, name in enumerate(COMMANDS):
        text = _between(out, "BEGIN%d" % i, "END%d" % i)
        assert "usage: %s" % name in text and "-h, --help" in text, out
        assert "Traceback" not in text and "no process" not in text, out  # help only: nothing ran


@pytest.mark.parametrize(
    "cmd, words",
    [
        ("hang-bt --bogus", ["hang-bt: unrecognized arguments: --bogus", "(usage: hang-bt [-a])"]),
        ("hang-dump a b", ["hang-dump: unrecognized arguments: b", "usage: hang-dump"]),
        ("hang-bt-filter", ["hang-bt-filter: the following arguments are required", "usage: hang-bt-filter on|off"]),
        ("hang-traceback maybe", ["hang-traceback: argument state: invalid choice", "usage: hang-traceback on|off"]),
        ("hang-analyze --output", ["hang-analyze: --output needs a value", "usage: hang-analyze"]),
    ],
)
def test_bad_argument_is_one_error_line(cmd, words):
    out = gdb_batch(["echo BEGIN\\n", cmd, "echo END\\n"], timeout=60)
    lines = [ln for ln in _between(out, "BEGIN", "END").splitlines() if ln.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), out


def test_traceback_switch_for_a_parsed_command():
    """A command declared with a parser that fails unexpectedly: one line, and with
    ``hang-traceback on`` the traceback behind it (its parsed arguments reached the function)."""
    define = ("python exec(\"from hanganalyze_gdbext import commands as c\\n"
              "p = c.parser('hang-test-fail', 'hang-test-fail [-n N]', 'test')\\n"
              "p.add_argument('-n', type=int, default=0)\\n"
              "def fail(args, from_tty):\\n    raise ValueError('n was %d' % args.n)\\n"
              "c._GdbCommand('hang-test-fail', fail, 'test', p)\")")
    out = gdb_batch([define, "hang-test-fail -n 7", "echo MARK1\\n", "hang-traceback on", "hang-test-fail -n 8",
                     "echo MARK2\\n", "hang-test-fail -n x", "echo MARK3\\n"], timeout=60)
    first, rest = out.split("MARK1", 1)
    second, third = rest.split("MARK2", 1)
    assert "hanganalyze: ValueError: n was 7" in first and "Traceback" not in first, out
    assert "Traceback (most recent call last)" in second and "in fail" in second, out
    assert second.count("hanganalyze: ValueError: n was 8") == 1, out
    # a bad argument is the user's error, not a bug: no traceback even with the switch on
    third = third.split("MARK3", 1)[0]
    assert "hang-test-fail: argument -n: invalid int value: 'x'" in third and "Traceback" not in third, out
