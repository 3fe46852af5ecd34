"""Per-version CPython struct offsets (x86-64, default GIL builds), as plain data.

One dict per minor version, flat ``"struct.field" -> byte offset`` keys, plus a few ``"model.*"``
keys that say which layout family the walker must use.  Values were read from the DWARF of the
pyenv builds 3.8.18 ... 3.13.0 (``(long)&((T*)0)->field`` in gdb) and cross-checked against the
stripped Debian 3.11.2 build, which walks correctly with the 3.11.7 numbers.  3.13+ normally
come from ``_Py_DebugOffsets`` at run time (see ``debug_offsets.py``); the 3.13/3.14 rows here are
the fallback and the values the run-time table is checked against.

Key prefixes: ``rt`` _PyRuntimeState, ``is`` PyInterpreterState, ``gil`` _gil_runtime_state,
``ts`` PyThreadState, ``cf`` _PyCFrame, ``fo`` PyFrameObject (3.8-3.10), ``ifr``
_PyInterpreterFrame (3.11+), ``co`` PyCodeObject, ``tp``/``ht`` type objects, ``mod`` module,
``dict``/``dk``/``dv`` dicts, ``str``/``bytes``/``long`` objects.
"""

from typing import Dict, Optional, Tuple

Table = Dict[str, int]

_COMMON: Table = {
    "ob.type": 8,
    "tp.name": 24,
    "tp.basicsize": 32,
    "tp.flags": 168,
    "tp.dictoffset": 288,
    "tp.dict": 264,
    "mod.md_dict": 16,
    "dict.ma_used": 16,
    "dict.ma_keys": 32,
    "dict.ma_values": 40,
    "str.length": 16,
    "str.state": 32,
    "bytes.ob_size": 16,
    "bytes.ob_sval": 32,
    "long.size": 16,  # ob_size (<=3.11) or lv_tag (3.12+)
    "long.digit": 24,
}

_V38: Table = dict(_COMMON)
_V38.update({
    "model.frames": 0,  # 0: PyFrameObject chain; 1: _PyInterpreterFrame chain
    "model.lines": 0,  # 0: lnotab + byte lasti; 1: 3.10 linetable; 2: 3.11+ location table
    "model.gil": 0,  # 0: in _PyRuntime (gilstate.tstate_current); 1: per interpreter (ceval.gil)
    "model.dict": 0,  # 0: 3.6-3.10 keys (dk_size); 1: 3.11+ keys (dk_log2_*)
    "model.long": 0,  # 0: ob_size digits; 1: lv_tag
    "model.instdict": 0,  # 0: tp_dictoffset; 1: 3.11 pre-header; 2: 3.12 tagged; 3: 3.13 inline values
    "rt.interpreters_head": 32,
    "rt.tstate_current": 1368,
    "rt.gil_last_holder": 1160,
    "rt.gil_locked": 1168,
    "rt.gc_collecting": 544,
    "is.next": 0,
    "is.id": 16,
    "is.threads_head": 8,
    "is.modules": 56,
    "ts.next": 8,
    "ts.interp": 16,
    "ts.frame": 24,
    "ts.thread_id": 176,
    "fo.f_back": 24,
    "fo.f_code": 32,
    "fo.f_lasti": 104,
    "co.firstlineno": 40,
    "co.filename": 104,
    "co.name": 112,
    "co.linetable": 120,  # co_lnotab
    "ht.cached_keys": 872,
    "dk.size": 8,
    "dk.nentries": 32,
    "dk.indices": 40,
    "str.ascii_size": 48,
    "str.compact_size": 72,
})

_V39: Table = dict(_V38)
_V39.update({
    "rt.tstate_current": 568,
    "rt.gil_last_holder": 360,
    "rt.gil_locked": 368,
    "is.id": 24,
    "is.modules": 856,
    "is.gc_collecting": 816,
    "ht.cached_keys": 864,
})
del _V39["rt.gc_collecting"]

_V310: Table = dict(_V39)
_V310.update({
    "model.lines": 1,
    "fo.f_lasti": 96,
    "ht.cached_keys": 872,
})

_V311: Table = dict(_COMMON)
_V311.update({
    "model.frames": 1,
    "model.lines": 2,
    "model.gil": 0,
    "model.dict": 1,
    "model.long": 0,
    "model.instdict": 1,
    "rt.interpreters_head": 40,
    "rt.tstate_current": 576,
    "rt.gil_last_holder": 368,
    "rt.gil_locked": 376,
    "is.next": 0,
    "is.id": 48,
    "is.threads_head": 16,
    "is.modules": 888,
    "is.gc_collecting": 848,
    "ts.next": 8,
    "ts.interp": 16,
    "ts.cframe": 56,
    "ts.thread_id": 152,
    "ts.native_thread_id": 160,
    "cf.current_frame": 8,
    "cf.previous": 16,
    "ifr.previous": 48,
    "ifr.code": 32,
    "ifr.instr": 56,  # prev_instr
    "ifr.is_entry": 68,
    "ifr.owner": 69,
    "co.firstlineno": 72,
    "co.filename": 112,
    "co.name": 120,
    "co.qualname": 128,
    "co.linetable": 136,
    "co.nlocalsplus": 76,  # int; the pylocks readers name locals with it
    "co.code_adaptive": 184,
    "ht.cached_keys": 872,
    "dk.log2_size": 8,
    "dk.log2_index_bytes": 9,
    "dk.kind": 10,
    "dk.nentries": 24,
    "dk.indices": 32,
    "dv.values": 0,
    "str.ascii_size": 48,
    "str.compact_size": 72,
})

_V312: Table = dict(_V311)
_V312.update({
    "model.gil": 1,
    "model.long": 1,
    "model.instdict": 2,
    "is.id": 8,
    "is.threads_head": 72,
    "is.modules": 944,  # imports.modules
    "is.gc_collecting": 312,
    "is.ceval_gil": 384,
    "gil.last_holder": 8,
    "gil.locked": 16,
    "ts.thread_id": 136,
    "ts.native_thread_id": 144,
    "cf.current_frame": 0,
    "cf.previous": 8,
    "ifr.previous": 8,
    "ifr.code": 0,
    "ifr.instr": 56,  # prev_instr
    "ifr.owner": 70,
    "co.firstlineno": 68,
    "co.nlocalsplus": 72,
    "co.code_adaptive": 192,
    "ht.cached_keys": 880,
    "str.ascii_size": 40,
    "str.compact_size": 56,
})
for _k in ("rt.tstate_current", "rt.gil_last_holder", "rt.gil_locked", "ifr.is_entry"):
    del _V312[_k]

_V313: Table = dict(_V312)
_V313.update({
    "model.instdict": 3,
    "rt.interpreters_head": 632,
    "is.next": 7264,
    "is.id": 7272,
    "is.threads_head": 7344,
    "is.modules": 7656,
    "is.gc_collecting": 7600,
    "is.ceval_gil": 16,
    "ts.current_frame": 72,
    "ts.thread_id": 152,
    "ts.native_thread_id": 160,
    "ifr.instr": 56,  # instr_ptr
    "co.code_adaptive": 200,
    "dv.values": 8,
})
del _V313["ts.cframe"], _V313["cf.current_frame"], _V313["cf.previous"]

#: 3.14 has no fallback numbers for the runtime structs: they come from _Py_DebugOffsets.  The
#: object-layout rows (dict, str, type) are those of 3.13, checked against the DWARF of Debian's
#: 3.14.10 (tp_basicsize 32, tp_dictoffset 288, ht_cached_keys 880, md_dict 16, dk_* 8/9/10/24/32,
#: PyDictValues.values 8, sizeof(PyCompactUnicodeObject) 56).  What 3.14 changed that the walker
#: reads comes from _Py_DebugOffsets: _PyInterpreterFrame.owner 70 -> 74 and localsplus 72 -> 80
#: (return_offset/visited moved), co_code_adaptive 200 -> 208, the tuple's items 24 -> 32 (ob_hash).
_V314_OBJECTS: Table = {k: v for k, v in _V313.items() if k.split(".")[0] in (
    "model", "ob", "tp", "ht", "mod", "dict", "dk", "dv", "str", "bytes", "long")}
_V314_OBJECTS["model.frames"] = 1
_V314_OBJECTS["model.tagged_executable"] = 1  # f_executable is a _PyStackRef: mask the low bits
_V314_OBJECTS["tuple.ob_item"] = 32  # PyTupleObject.ob_hash (3.14) sits before the items

TABLES: Dict[Tuple[int, int], Table] = {
    (3, 8): _V38,
    (3, 9): _V39,
    (3, 10): _V310,
    (3, 11): _V311,
    (3, 12): _V312,
    (3, 13): _V313,
    (3, 14): _V314_OBJECTS,
}

#: Free-threaded builds (3.13t, 3.14t) put a larger header on every object (``ob_tid``,
#: ``ob_flags``, ``ob_mutex``, ``ob_gc_bits``, ``ob_ref_local``, ``ob_ref_shared``: 32 bytes, not
#: 16).  _Py_DebugOffsets gives the fields it covers; every other table key inside an object
#: (a struct that starts with PyObject_HEAD) moves by the same amount.  Checked against the DWARF
#: of the 3.13.15t build: tp_basicsize 48, tp_dictoffset 304, tp_dict 280, ht_cached_keys 896,
#: md_dict 32, ma_used 32, sizeof(PyCompactUnicodeObject) 72.  Dict keys/values are not objects.
FT_OBJECT_KEYS = ("tp.basicsize", "tp.dictoffset", "tp.dict", "ht.cached_keys", "mod.md_dict",
                  "dict.ma_used", "str.compact_size", "co.nlocalsplus")

#: Per (minor version, free-threaded) facts that are neither offsets nor in _Py_DebugOffsets:
#:   ``ob.managed_dict``: where a managed ``__dict__`` pointer sits before the object
#:     (MANAGED_DICT_OFFSET: -3 words; free-threaded builds have no PyGC_Head pre-header: -1 word);
#:   ``str.kind_shift``: the bit of ``PyASCIIObject.state.kind`` (``interned`` takes 2 bits, a whole
#:     byte in 3.14t where it is accessed atomically), ``compact`` and ``ascii`` follow it.
BUILD_FACTS: Dict[Tuple[Tuple[int, int], bool], Table] = {
    ((3, 13), True): {"ob.managed_dict": -8, "str.kind_shift": 2},
    ((3, 14), True): {"ob.managed_dict": -8, "str.kind_shift": 8},  # from CPython 3.14 sources
}
DEFAULT_BUILD_FACTS: Table = {"ob.managed_dict": -24, "str.kind_shift": 2}


def free_threaded_table(t: Table, version: Tuple[int, int]) -> Table:
    """Adjust a table for a free-threaded build: object-relative keys move by the header growth,
    plus that version's ``BUILD_FACTS``.  ``t["ob.head"]`` (from _Py_DebugOffsets) is the header
    size; keys _Py_DebugOffsets already set (``shifted`` below excludes them) are not moved twice."""
    out = dict(t)
    delta = t.get("ob.head", 32) - 16
    for k in FT_OBJECT_KEYS:
        if k in out:
            out[k] += delta
    out.update(BUILD_FACTS.get((version, True), BUILD_FACTS[max(BUILD_FACTS)]))
    out["model.free_threaded"] = 1
    return out


#: Frame owners (``_PyInterpreterFrame.owner``) at or above this value are C-stack entry/shim
#: frames, not Python code: 3 = FRAME_OWNED_BY_CSTACK in 3.12/3.13; 3.14 renumbers (3 =
#: INTERPRETER, 4 = CSTACK), neither of which is a Python function either.
SHIM_OWNER_MIN = 3

#: Type flags that matter for reading an instance's attributes (3.11+).
TPFLAGS_INLINE_VALUES = 1 << 2  # 3.13+
TPFLAGS_MANAGED_DICT = 1 << 4  # 3.11+


def table_for(version: Tuple[int, int]) -> Optional[Table]:
    """The offsets table for a (major, minor) version, or None when we have none."""
    t = TABLES.get(version)
    return dict(t) if t is not None else None
