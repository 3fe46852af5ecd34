"""The fuzzing campaign's smoke run (issue 13): scripts/fuzz.py at 2 % of its size, about 180
mutated inputs of every kind (core headers and notes in-process, texts, snapshot JSON and
signature YAML through the CLI's entry, a dozen cores mutated in their headers, notes, thread
stacks and interpreter memory through the installed command with real gdb).  ``make fuzz`` runs
the whole campaign (8,800 inputs)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


def test_fuzz_smoke(tmp_path):
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "fuzz.py"), "--seed", "2026", "--scale", "0.02",
                          "--workdir", str(tmp_path / "work"), "--hang", "60", "--cli-hang", "300"],
                         capture_output=True, text=True, timeout=900)
    out = res.stdout
    print(out[-3000:])
    m = re.search(r"fuzz seed 2026: (\d+) inputs, (\d+) problems", out)
    assert m, out[-3000:] + res.stderr[-3000:]
    assert int(m.group(1)) >= 170
    assert int(m.group(2)) == 0, "\n".join(line for line in out.splitlines() if line.startswith("PROBLEM"))
    for category in ("core-notes", "text", "snapshot-json", "signature-yaml", "core-cli"):
        assert re.search(r"^%s\s+\d+ inputs .*'ok': \d+" % re.escape(category), out, re.M), category
    for part in ("elf-header", "program-headers", "notes", "thread-stacks", "interpreter-memory"):
        assert "core-cli/%s" % part in out
    assert res.returncode == 0
    assert not (tmp_path / "work").exists()  # the campaign cleans up after itself
