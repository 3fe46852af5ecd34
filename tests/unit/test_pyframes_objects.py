"""Object readers (str, int, dict, instance attributes) on real interpreter memory, no gdb.

Each installed CPython loads ``gdbext/pyframes/objects.py`` and reads its *own* objects through
``/proc/self/mem`` with that version's offsets table: combined and split dicts, 3.11 pre-header
values, 3.12 tagged values pointers, 3.13 inline values, non-ASCII strings, big ints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from helpers import OWN_LAYOUT_PROBE, own_memory_pythons  # noqa: E402

PROBE = OWN_LAYOUT_PROBE + r'''
import threading
o = objects.Objects(objects.Memory(read), t, features)

class Plain:
    def __init__(self):
        self.alpha = "A"; self._name = "plain-name"; self.omega = 3
p1, p2 = Plain(), Plain()            # shared-key (split / inline) instance dicts
p2.__dict__                           # materialise p2's dict
th = threading.Thread(name="näme-ü", target=lambda: None)
big = 2 ** 70 + 12345
d = {"x": 1, "threading": big, "y": "ÿ", "z": "日本"}
assert o.str(id("hello")) == "hello"
assert o.str(id("日本")) == "日本" and o.str(id("ÿ")) == "ÿ"
assert o.int(id(big)) == big and o.int(id(-7)) == -7 and o.int(id(0)) == 0
items = {o.str(k): v for k, v in o.dict_items(id(d))}
assert set(items) == {"x", "threading", "y", "z"} and items["threading"] == id(big)
assert o.dict_get_str(id(d), "z") == id(d["z"])
for obj in (p1, p2):
    assert o.instance_attr(id(obj), "_name") == id(obj._name)
    assert o.instance_attr(id(obj), "missing") is None
assert o.str(o.instance_attr(id(th), "_name")) == "näme-ü"
mods = o.dict_items(id(sys.modules))
assert len(mods) == len(sys.modules)
print("OK", sys.version_info[:2])
'''

PYTHONS = own_memory_pythons()


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_object_readers_on_own_memory(version):
    res = subprocess.run([str(PYTHONS[version]), "-c", PROBE, str(REPO / "gdbext" / "hanganalyze_gdbext")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
