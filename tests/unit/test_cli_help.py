"""``--help`` fits 80 columns (issue 30): plain text built from ``cli.OPTIONS``, no boxes, no line over
80 columns and no word split, every option's text kept."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from hanganalyze import cli


def _words(text: str) -> list:
    return re.findall(r"\S+", text)


@pytest.mark.parametrize("columns", [80, 60])
def test_help_fits_the_terminal(columns):
    env = dict(os.environ, COLUMNS=str(columns))
    res = subprocess.run([sys.executable, "-m", "hanganalyze", "--help"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert res.returncode == 0 and res.stderr == ""
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert not any(ch in res.stdout for ch in "╭│╰─…")  # no boxes, nothing cut
    body = " ".join(lines)
    words = set(_words(body))
    for o in cli.OPTIONS:
        for flag in o.flags:
            assert flag in words or flag + "," in words, flag
        # every word of the option's text is there whole (none split across lines)
        for w in _words(o.help):
            assert w in words, (o.key, w)
    assert cli.EXIT_HELP.split(":")[0] in body and "signatures list|validate" in body
    if columns == 80:
        assert len(lines) < 82  # was ~108 lines of boxes (81 with --gpu-kernels)


def test_help_is_asked_before_double_dash_only(capsys):
    assert cli.run(["--help"]) == 0 and "usage: hanganalyze" in capsys.readouterr().out
    assert cli.run(["signatures", "list", "-h"]) == 0
    out = capsys.readouterr().out
    assert "usage: hanganalyze signatures list" in out and "--signatures PATH" in out
    assert not cli._help_asked(["--", "--help"])
