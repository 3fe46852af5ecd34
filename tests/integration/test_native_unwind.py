"""gdbext/native.py against a real gdb and core: the quick answer to gdb's per-frame Python
unwinder question is used only while no Python unwinder exists, is restored afterwards, and does
not change the stacks; NativeFrame keeps gdb's frame object."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import fixture_binary, gcore, gdb_batch, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

PKG = "hanganalyze_gdbext"


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    exe = fixture_binary("cxx_mutex_deadlock")
    h = start_hung([str(exe)])
    try:
        return exe, gcore(h.pid, tmp_path_factory.mktemp("native"))
    finally:
        h.kill()


PROBE = (
    "python import gdb, {pkg}.native as n\n"
    "orig = gdb._execute_unwinders\n"
    "with n.quick_unwinder_sniffing():\n"
    "    print('INSIDE', gdb._execute_unwinders is orig)\n"
    "    natives = n.unwind(n.LibraryMap())\n"
    "print('AFTER', gdb._execute_unwinders is orig)\n"
    "print('FRAMES', len(natives), all(x.gdb_frame is not None and x.gdb_frame.pc() == x.pc for x in natives))\n"
)


def _probe(exe, core, before=""):
    script = Path(core).parent / ("probe%d.py" % len(before))
    script.write_text(before + PROBE.format(pkg=PKG).replace("python ", "", 1))
    out = gdb_batch(["source %s" % script], core=core, exe=exe)
    return {ln.split()[0]: ln.split()[1:] for ln in out.splitlines() if ln.split() and ln.split()[0] in
            ("INSIDE", "AFTER", "FRAMES")}


def test_replaced_only_while_no_python_unwinder(core):
    exe, c = core
    got = _probe(exe, c)
    assert got["INSIDE"] == ["False"] and got["AFTER"] == ["True"], got
    assert int(got["FRAMES"][0]) >= 3 and got["FRAMES"][1] == "True", got


def test_kept_when_a_python_unwinder_is_registered(core):
    exe, c = core
    reg = (
        "import gdb\n"
        "from gdb.unwinder import Unwinder, register_unwinder\n"
        "class Never(Unwinder):\n"
        "    def __init__(self):\n"
        "        super().__init__('never')\n"
        "    def __call__(self, pending_frame):\n"
        "        return None\n"
        "register_unwinder(None, Never())\n"
    )
    got = _probe(exe, c, before=reg)
    assert got["INSIDE"] == ["True"] and got["AFTER"] == ["True"], got


def test_hang_dump_stacks_are_the_same_either_way(core, tmp_path):
    exe, c = core
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    gdb_batch(["hang-dump %s" % a], core=c, exe=exe)
    # the collector alone, without the quick answer
    gdb_batch(["python import json, %s.collect as k; open(%r, 'w').write(json.dumps(k.collect_snapshot().to_dict()))"
               % (PKG, str(b))], core=c, exe=exe)
    ta = json.loads(a.read_text())["processes"][0]["threads"]
    tb = json.loads(b.read_text())["processes"][0]["threads"]
    assert ta == tb and len(ta) >= 3
