"""Round trip: what gdb's ``bt`` prints with gdbext loaded, parsed back as pasted text, gives
the same merged stacks as ``hang-dump`` of the same core (real gdb, real cores).

Users paste plain ``thread apply all bt`` output; with gdbext sourced it carries ``[py]``
lines (``gdbext/framefilter.py``).  If the filter's format and the text parser
(``analyzer/acquire/text/gdb.py``) drift apart, this test says so on every interpreter kind.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from helpers import FIXTURES, all_pythons, gcore, gdb_batch, start_hung

from hanganalyze.acquire.text import parse_text

PYTHONS = all_pythons()
KEYS = [k for k in ("3.8", "3.12", "system-3.11") if k in PYTHONS]


@pytest.fixture(scope="module", params=KEYS)
def dumped(request, tmp_path_factory):
    """(hang-dump JSON of a core, the text of ``thread apply all bt`` on the same core)."""
    exe = PYTHONS[request.param]
    h = start_hung([exe, FIXTURES / "py_named_threads.py"], ready="READY", settle=0.5)
    try:
        core = gcore(h.pid, tmp_path_factory.mktemp("ff-%s" % request.param))
    finally:
        h.kill()
    fd, out = tempfile.mkstemp(suffix=".json")
    try:
        text = gdb_batch(["hang-dump %s" % out, "echo BT-BEGINS\\n", "thread apply all bt"], core=core, exe=exe)
        snap = json.loads(Path(out).read_text())
    finally:
        Path(out).unlink()
        core.unlink()
    return snap, text.split("BT-BEGINS", 1)[1]


def _key(frames):
    return [(f["kind"], f.get("function") or None, f.get("line") if f["kind"] == "python" else None)
            for f in frames]


def test_pasted_bt_matches_hang_dump(dumped):
    snap, text = dumped
    want = {t["tid"]: t for t in snap["processes"][0]["threads"]}
    parsed = parse_text(text).processes
    assert len(parsed) == 1
    got = {t.tid: t for t in parsed[0].threads}
    assert set(got) == set(want)
    merged = seen_libs = 0
    for tid, t in want.items():
        g = got[tid].to_dict()
        assert g["merge"] == t["merge"] or (t["merge"] == "native-only" and g["merge"] == "native-only"), tid
        # gdb prints "??" for nameless frames: the parser makes them None, like hang-dump
        assert _key(g["frames"]) == _key(t["frames"]), tid
        assert [f.get("file") for f in g["frames"] if f["kind"] == "python"] == \
            [f.get("file") for f in t["frames"] if f["kind"] == "python"], tid
        # a frame without line info shows its shared object ("at LIB" under the filter)
        libs = [(gf.get("library"), tf.get("library")) for gf, tf in zip(g["frames"], t["frames"]) if gf.get("library")]
        assert all(a == b for a, b in libs), (tid, libs)
        seen_libs += len(libs)
        merged += t["merge"] == "merged"
    assert merged >= 6  # every thread of the fixture that runs Python code
    assert seen_libs > 0  # libffi (ctypes) frames have no line info in any build
