"""Line-number decoders checked against what each real interpreter says about its own code.

Each installed CPython (3.8-3.13) compiles a few stdlib modules and reports its raw table plus
the line it assigns to every instruction offset (``dis.findlinestarts`` / ``co_lines`` /
``co_positions``); our decoder must agree on every offset.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from helpers import pyenv_pythons  # noqa: E402

_LINETABLE = REPO / "gdbext" / "hanganalyze_gdbext" / "pyframes" / "linetable.py"
_spec = importlib.util.spec_from_file_location("pyf_linetable", _LINETABLE)
linetable = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(linetable)

DUMP = r'''
import dis, json, sys, types, threading, json.decoder
def collect(co, out):
    v = sys.version_info[:2]
    if v < (3, 10):
        starts = dict(dis.findlinestarts(co)); line = None; exp = []
        for off in range(0, len(co.co_code), 2):
            line = starts.get(off, line); exp.append((off, line))
        tab = co.co_lnotab
    elif v == (3, 10):
        exp = [(off, l) for s, e, l in co.co_lines() for off in range(s, e, 2)]
        tab = co.co_linetable
    else:
        exp = [(i, p[0]) for i, p in enumerate(co.co_positions())]
        tab = co.co_linetable
    out.append({"table": tab.hex(), "first": co.co_firstlineno, "exp": exp})
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            collect(c, out)
out = []
for mod in (threading, json.decoder):
    collect(compile(open(mod.__file__).read(), mod.__file__, "exec"), out)
print(json.dumps(out))
'''

PYTHONS = pyenv_pythons()


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_decoder_agrees_with_interpreter(version):
    out = subprocess.run([str(PYTHONS[version]), "-c", DUMP], capture_output=True, check=True, timeout=60)
    codes = json.loads(out.stdout)
    minor = int(version.split(".")[1])
    checked = 0
    for co in codes:
        table = bytes.fromhex(co["table"])
        for off, line in co["exp"]:
            if minor < 10:
                got = linetable.lnotab_line(table, co["first"], off)
            elif minor == 10:
                got = linetable.linetable310_line(table, co["first"], off)
            else:
                got = linetable.location_line(table, co["first"], off)
            if line is None and minor < 10:
                continue  # before the first line start: the interpreter has no answer either
            assert got == line, (version, off, co["first"])
            checked += 1
    assert checked > 1000


def test_before_first_instruction_is_firstlineno():
    assert linetable.lnotab_line(b"\x02\x01", 10, -1) == 10
    assert linetable.location_line(b"", 7, -1) == 7
    assert linetable.linetable310_line(b"\x02\x00", 5, -2) == 5


def test_corrupt_tables_do_not_raise():
    assert linetable.location_line(b"\x00\x01\x02", 1, 3) is None
    assert linetable.location_line(b"\xf8", 1, 0) is None  # code 15: no location
    assert linetable.linetable310_line(b"\x05", 1, 0) is None
