"""Bugs the fuzzing campaign (scripts/fuzz.py, issue 13) found, each kept as a test of its own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hanganalyze.analyze.signatures import load_signatures
from hanganalyze.cli import run
from hanganalyze.corefile import CoreMemory
from hanganalyze.errors import SignatureError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import GOOD_SIGNATURE_YAML  # noqa: E402

SIGNATURE = GOOD_SIGNATURE_YAML


def test_program_header_offset_past_any_file(tmp_path):
    """core-notes: a PT_LOAD whose p_offset is near 2**64 (or negative once added up) made
    CoreMemory's seek raise ValueError ("cannot fit 'int' into an offset-sized integer"): a
    traceback instead of a report.  Such memory is now simply not in the core."""
    data = tmp_path / "mem"
    data.write_bytes(b"\x7fELF" + b"\0" * 60)
    with open(data, "rb") as fh:
        mem = CoreMemory(fh, [(0x1000, 0x1000, (1 << 64) - 16, 0x1000), (0x4000, 0x1000, -64, 0x1000),
                              (0x8000, 0x1000, 0, 0x1000)])
        assert mem.read(0x1000, 8) is None and mem.read_cstring(0x1000) is None
        assert mem.read(0x4000, 8) is None
        assert mem.read(0x8000, 4) == b"\x7fELF"


@pytest.mark.parametrize("char", ["\x1b", "\x00", "\x07", "\ufffe"])
def test_control_character_in_a_signature_file(tmp_path, char):
    """signature-yaml: PyYAML checks every character when its loader is built, before parsing;
    that ReaderError was raised outside the code that turns YAML errors into one line, so a
    signature file with an ESC or a NUL ended in a traceback."""
    folder = tmp_path / "sigs"
    folder.mkdir()
    lines = SIGNATURE.splitlines(keepends=True)
    lines[4] = "    cause: The worker%swaits.\n" % char
    (folder / "mine.yaml").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(SignatureError) as e:
        load_signatures([folder], use_cache=False)
    msg = str(e.value)
    assert "\n" not in msg and "mine.yaml:5: invalid YAML: character U+%04X is not allowed" % ord(char) in msg


def test_control_character_in_a_signature_file_through_the_cli(tmp_path, capsys):
    folder = tmp_path / "sigs"
    folder.mkdir()
    (folder / "mine.yaml").write_text(SIGNATURE.replace("My own hang", "My\x1b[2J hang"), encoding="utf-8")
    assert run(["signatures", "validate", "--signatures", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hanganalyze: error: ")
    assert "mine.yaml:3: invalid YAML: character U+001B" in err
