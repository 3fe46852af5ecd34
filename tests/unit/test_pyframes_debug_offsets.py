"""``_Py_DebugOffsets`` parsing: the real 3.13 build's bytes, and the documented 3.14 layout.

3.13: the struct is statically initialised at the start of libpython's ``.PyRuntime`` section,
so the test reads it straight from the ELF file (no process, no gdb) and checks the result
against the offsets measured from DWARF in ``tables.py``.  3.14 is not installed here: its
layout is checked from the field order in CPython's ``pycore_debug_offsets.h`` (3.14 branch).
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PY313 = Path.home() / ".pyenv" / "versions" / "3.13.0" / "lib" / "libpython3.13.so.1.0"


def _load(name):
    """Load gdbext/pyframes/<name>.py as part of a throwaway package (no gdb needed)."""
    pkg = "pyf_pkg"
    if pkg not in sys.modules:
        mod = types.ModuleType(pkg)
        mod.__path__ = [str(REPO / "gdbext" / "hanganalyze_gdbext" / "pyframes")]
        sys.modules[pkg] = mod
    path = REPO / "gdbext" / "hanganalyze_gdbext" / "pyframes" / ("%s.py" % name)
    spec = importlib.util.spec_from_file_location("%s.%s" % (pkg, name), path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    return m


tables = _load("tables")
dbg = _load("debug_offsets")


def _pyruntime_bytes(path: Path) -> bytes:
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as f:
        sec = ELFFile(f).get_section_by_name(".PyRuntime")
        assert sec is not None
        return sec.data()[: dbg.size_for((3, 13))]


@pytest.mark.skipif(not PY313.exists(), reason="pyenv 3.13.0 not installed")
def test_real_313_build_matches_dwarf_table():
    parsed = dbg.parse(_pyruntime_bytes(PY313))
    assert parsed is not None
    assert parsed.minor == (3, 13) and parsed.version_hex == 0x030D00F0 and not parsed.free_threaded
    table = dbg.to_table(parsed)
    expected = tables.TABLES[(3, 13)]
    for key, value in table.items():
        if key in expected:
            assert value == expected[key], key
    # the values the reference measured on this build
    assert table["rt.interpreters_head"] == 632 and table["is.threads_head"] == 7344
    assert table["gil.locked"] == 16 and table["gil.last_holder"] == 8 and table["ts.current_frame"] == 72


OBJECT_VALUES = {
    ("pyobject", "size"): 16, ("pyobject", "ob_type"): 8,
    ("tuple_object", "ob_size"): 16, ("tuple_object", "ob_item"): 24,
    ("list_object", "ob_size"): 16, ("list_object", "ob_item"): 24,
    ("bytes_object", "ob_size"): 16, ("bytes_object", "ob_sval"): 32,
    ("long_object", "lv_tag"): 16, ("long_object", "ob_digit"): 24,
    ("dict_object", "size"): 48, ("dict_object", "ma_keys"): 32, ("dict_object", "ma_values"): 40,
    ("unicode_object", "size"): 56, ("unicode_object", "state"): 32, ("unicode_object", "length"): 16,
    ("unicode_object", "asciiobject_size"): 40,
    ("thread_state", "current_frame"): 72, ("interpreter_frame", "owner"): 70,
    ("interpreter_state", "gil_runtime_state"): 9000,
    ("interpreter_state", "gil_runtime_state_locked"): 9016,
    ("interpreter_state", "gil_runtime_state_holder"): 9008,
}


def _synthetic(version_hex: int, layout) -> bytes:
    """Bytes laid out as ``layout`` with plausible, mostly distinct values: struct sizes large,
    offsets small, object headers as in every default (GIL) build."""
    values = []
    n = 1000
    for group, fields in layout:
        for field in fields:
            n += 8
            default = (1 << 20) if field == "size" else n
            values.append(OBJECT_VALUES.get((group, field), default))
    return struct.pack("<8sQQ", b"xdebugpy", version_hex, 0) + struct.pack("<%dQ" % len(values), *values)


@pytest.mark.parametrize("variant", [0, 1])
def test_314_layouts_from_documented_field_order(variant):
    layout = dbg.LAYOUTS[(3, 14)][variant]
    raw = _synthetic(0x030E00F0, layout)
    parsed = dbg.parse(raw + bytes(dbg.size_for((3, 14)) - len(raw)))
    assert parsed is not None and parsed.minor == (3, 14)
    g = parsed.groups
    assert [name for name, _ in layout] == list(g)  # the variant that was written is the one read
    assert list(g["interpreter_state"])[3:5] == ["threads_head", "threads_main"]
    assert "stackpointer" in g["interpreter_frame"] and "gen_object" in g and "set_object" in g
    assert ("tlbc_index" in g["interpreter_frame"]) == (variant == 0)
    assert ("co_tlbc" in g["code_object"]) == (variant == 0) and ("llist_node" in g) == (variant == 0)
    table = dbg.to_table(parsed)
    assert table["gil.locked"] == 16 and table["gil.last_holder"] == 8
    assert table["ts.current_frame"] == 72 and table["ifr.owner"] == 70
    assert table["is.threads_head"] == g["interpreter_state"]["threads_head"]
    assert table["long.size"] == 16 and table["str.ascii_size"] == 40


def test_wrong_layout_or_cookie_is_refused():
    raw = _synthetic(0x030E00F0, dbg.LAYOUTS[(3, 14)][0])
    # a 3.14 struct read with the 3.13 field order fails the sanity checks
    assert dbg.parse(raw[:8] + struct.pack("<Q", 0x030D00F0) + raw[16:]) is None
    # ...and so does a 3.13 struct labelled 3.14
    raw13 = _synthetic(0x030D00F0, dbg.LAYOUTS[(3, 13)][0])
    assert dbg.parse(raw13) is not None
    padded = raw13[:8] + struct.pack("<Q", 0x030E00F0) + raw13[16:] + bytes(1024)
    assert dbg.parse(padded) is None
    assert dbg.parse(b"notdebug" + raw[8:]) is None
    assert dbg.parse(raw[:100]) is None
    assert dbg.parse(struct.pack("<8sQQ", b"xdebugpy", 0x030C01F0, 0) + raw[24:]) is None  # no 3.12 layout
    assert dbg.peek_version(raw) == 0x030E00F0 and dbg.peek_version(b"x" * 24) is None
