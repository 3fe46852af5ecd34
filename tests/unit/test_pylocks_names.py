"""Naming a lock by the attribute that holds it, on real interpreter memory, no gdb.

Each installed CPython loads ``gdbext/pyframes/objects.py`` and ``gdbext/pylocks.py`` and reads
its *own* frames and objects through ``/proc/self/mem``: the new readers (tuple and list items,
every attribute of an instance however the version stores it) and ``PyLocks.attribute_name``
from the locals of a running frame (``f_localsplus`` 3.8-3.10, ``localsplus`` 3.11+).
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
import struct, threading
pylocks = importlib.import_module("g.pylocks")
mem = objects.Memory(read)
o = objects.Objects(mem, t, features)

class Account:
    def __init__(self, name):
        self.name = name; self.balance = 100; self._lock = threading.RLock()

class Store:
    def __init__(self):
        self.locks = [threading.Lock(), threading.RLock()]; self.pair = (threading.Lock(), threading.Lock())

class Slotted:
    __slots__ = ("lock",)
    def __init__(self):
        self.lock = threading.Lock()

a, b, store, slotted = Account("A"), Account("B"), Store(), Slotted()
b.__dict__  # a materialised dict next to shared-key values
assert o.tuple_items(id((1, "x", None))) == [id(1), id("x"), id(None)]
assert o.list_items(id(store.locks)) == [id(x) for x in store.locks]
assert o.tuple_items(id(tuple(range(100))), 5) == [id(i) for i in range(5)]
for acct in (a, b):
    got = {o.str(k): v for k, v in o.instance_items(id(acct))}
    assert got == {"name": id(acct.name), "balance": id(acct.balance), "_lock": id(acct._lock)}, got
assert o.instance_items(id(slotted)) == [] and o.instance_items(id(3)) == []

#: PyFrameObject.f_frame (3.11+): after the object header and f_back
FRAME_F_FRAME = t.get("ob.head", 16) + 8

def fresh():
    """A new reader: Memory caches pages for one walk of a stopped process, and this one runs."""
    global py, mem
    mem = objects.Memory(read)
    p = walker.PyProcess(mem, t, features, sys.version_info[:2], sys.version.split()[0], "test", 0)
    py = pylocks.PyLocks(p)

def frame_addr(f):
    """The frame the walker hands over: the frame object (3.8-3.10) or its interpreter frame."""
    fresh()
    return id(f) if sys.version_info < (3, 11) else mem.u64(id(f) + FRAME_F_FRAME)

def transfer(self, dst, amount):
    here = frame_addr(sys._getframe())
    names = dict((n, v) for n, v in py.frame_locals(here))
    assert names["self"] == id(self) and names["dst"] == id(dst) and names["amount"] == id(amount), names
    assert py.attribute_name([here], id(dst._lock)) == ("Account._lock", "dst._lock")
    assert py.attribute_name([here], id(self._lock)) == ("Account._lock", "self._lock")
    return here

def shard(store, i, cls, sl):
    here = frame_addr(sys._getframe())
    assert py.attribute_name([here], id(store.locks[i])) == ("Store.locks[%d]" % i, "store.locks[%d]" % i)
    assert py.attribute_name([here], id(store.pair[1])) == ("Store.pair[1]", "store.pair[1]")
    assert py.attribute_name([here], id(Holder.shared)) == ("Holder.shared", "cls.shared")  # a class in a local
    assert py.attribute_name([here], id(threading.Lock())) is None  # nobody holds it
    assert py.attribute_name([here], id(sl.lock)) is None  # __slots__: no dict to search

class Holder:
    shared = threading.Lock()

def helper(lock):  # a lock passed down: only the caller's locals know whose it is
    inner = frame_addr(sys._getframe())
    outer = id(sys._getframe(1)) if sys.version_info < (3, 11) else mem.u64(id(sys._getframe(1)) + FRAME_F_FRAME)
    assert py.attribute_name([inner], id(lock)) is None
    assert py.attribute_name([inner, outer], id(lock)) == ("Account._lock", "acct._lock")

def withdraw(acct):
    helper(acct._lock)

transfer(a, b, 10)
withdraw(b)
shard(store, 1, Holder, slotted)
shard(store, 0, Holder, slotted)
fresh()
assert py.attribute_name([0, 12345, 1 << 60], id(a._lock)) is None  # bad frames: no name, no error
print("OK", sys.version_info[:2])
'''

PYTHONS = own_memory_pythons()


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_attribute_names_on_own_memory(version):
    res = subprocess.run([str(PYTHONS[version]), "-c", PROBE, str(REPO / "gdbext" / "hanganalyze_gdbext")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
