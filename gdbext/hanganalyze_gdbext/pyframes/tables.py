"""Per-version CPython struct offsets (x86-64, default GIL builds), as plain data.

One dict per minor version, flat ``"struct.field" -> byte offset`` keys, and one ``Features`` per
minor version: the named layout families the readers choose between.  Values were read from the DWARF of the
pyenv builds 3.8.18 ... 3.13.0 (``(long)&((T*)0)->field`` in gdb) and cross-checked against the
stripped Debian 3.11.2 build, which walks correctly with the 3.11.7 numbers.  3.13+ normally
come from ``_Py_DebugOffsets`` at run time (see ``debug_offsets.py``); the 3.13/3.14 rows here are
the fallback and the values the run-time table is checked against.

Key prefixes: ``rt`` _PyRuntimeState, ``is`` PyInterpreterState, ``gil`` _gil_runtime_state,
``ts`` PyThreadState, ``cf`` _PyCFrame, ``fo`` PyFrameObject (3.8-3.10), ``ifr``
_PyInterpreterFrame (3.11+), ``co`` PyCodeObject, ``tp``/``ht`` type objects, ``mod`` module,
``dict``/``dk``/``dv`` dicts, ``str``/``bytes``/``long`` objects, ``rlock``/``weakref``/``cell``
the objects the lock analysis reads (``gdbext/pylocks.py``).  ``scripts/gen_offsets.py --diff``
checks every key against an interpreter's DWARF (``tests/integration/test_offset_tables.py``).
"""

from typing import Dict, NamedTuple, Optional, Tuple

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
    # rlockobject: rlock_owner / rlock_count (3.14: its _PyRecursiveMutex's thread / level)
    "rlock.owner": 24,
    "rlock.count": 32,
    "weakref.object": 16,  # PyWeakReference.wr_object
    "cell.ref": 16,  # PyCellObject.ob_ref
}

_V38: Table = dict(_COMMON)
_V38.update({
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
    "ts.on_delete_data": 208,  # a weakref to the thread's _tstate_lock (3.8-3.12): Thread.join's target
    "fo.f_back": 24,
    "fo.f_code": 32,
    "fo.f_globals": 48,
    "fo.f_lasti": 104,
    "fo.localsplus": 360,  # the fast locals: where pylocks names a lock by the local holding it
    "co.nlocals": 28,
    "co.firstlineno": 40,
    "co.varnames": 72,  # names of the fast locals
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
    "fo.f_lasti": 96,
    "fo.localsplus": 352,
    "ht.cached_keys": 872,
})

_V311: Table = dict(_COMMON)
_V311.update({
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
    "ts.on_delete_data": 192,
    "cf.current_frame": 8,
    "cf.previous": 16,
    "ifr.globals": 8,
    "ifr.previous": 48,
    "ifr.code": 32,
    "ifr.instr": 56,  # prev_instr
    "ifr.is_entry": 68,
    "ifr.owner": 69,
    "ifr.localsplus": 72,
    "co.firstlineno": 72,
    "co.filename": 112,
    "co.name": 120,
    "co.qualname": 128,
    "co.linetable": 136,
    "co.nlocalsplus": 76,  # int: locals, cells and free variables (pylocks names locals with it)
    "co.localsplusnames": 96,
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
    "is.id": 8,
    "is.threads_head": 72,
    "is.modules": 944,  # imports.modules
    "is.gc_collecting": 312,
    "is.ceval_gil": 384,
    "gil.last_holder": 8,
    "gil.locked": 16,
    "ts.thread_id": 136,
    "ts.native_thread_id": 144,
    "ts.on_delete_data": 176,
    "cf.current_frame": 0,
    "cf.previous": 8,
    "ifr.previous": 8,
    "ifr.code": 0,
    "ifr.globals": 24,
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
del _V313["ts.on_delete_data"]  # joins go through thread handles from 3.13 on

#: 3.14 has no fallback numbers for the runtime structs: they come from _Py_DebugOffsets.  The
#: object-layout rows (dict, str, type) are those of 3.13, checked against the DWARF of Debian's
#: 3.14.10 (tp_basicsize 32, tp_dictoffset 288, ht_cached_keys 880, md_dict 16, dk_* 8/9/10/24/32,
#: PyDictValues.values 8, sizeof(PyCompactUnicodeObject) 56).  What 3.14 changed that the walker
#: reads comes from _Py_DebugOffsets: _PyInterpreterFrame.owner 70 -> 74 and localsplus 72 -> 80
#: (return_offset/visited moved), co_code_adaptive 200 -> 208, the tuple's items 24 -> 32 (ob_hash).
#: Not in _Py_DebugOffsets, from the DWARF of 3.14.4: f_globals 24, co_localsplusnames 96.
_V314_OBJECTS: Table = {k: v for k, v in _V313.items() if k.split(".")[0] in (
    "ob", "tp", "ht", "mod", "dict", "dk", "dv", "str", "bytes", "long", "rlock", "weakref", "cell")}
_V314_OBJECTS.update({"tuple.ob_item": 32,  # PyTupleObject.ob_hash (3.14) sits before the items
                      "ifr.globals": 24, "co.localsplusnames": 96, "co.nlocalsplus": 72})

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
                  "dict.ma_used", "str.compact_size", "co.nlocalsplus", "rlock.owner", "rlock.count",
                  "weakref.object", "cell.ref")

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
    return out


class Features(NamedTuple):
    """The layout families of one CPython version: which reader applies, by name."""

    frames: str  # "frame_objects" (PyFrameObject chain, 3.8-3.10) | "interpreter_frames" (3.11+)
    lines: str  # "lnotab" (+ byte lasti) | "linetable" (3.10) | "locations" (3.11+ location table)
    gil: str  # "runtime" (_PyRuntime.gilstate/ceval, 3.8-3.11) | "interpreter" (interp->ceval.gil)
    dict_keys: str  # "dk_size" (3.8-3.10) | "dk_log2" (3.11+ dk_log2_size/dk_kind)
    long: str  # "ob_size" (signed digit count) | "lv_tag" (3.12+)
    #: where an instance keeps its attributes: "dictoffset" (tp_dictoffset), "preheader_values"
    #: (3.11: values before the object), "tagged_values" (3.12: a tagged pointer), "inline_values"
    #: (3.13+: values after the object)
    instance_dict: str
    tagged_executable: bool = False  # 3.14: f_executable and fast locals are _PyStackRefs (low bits tag)
    #: 3.14: an RLock is a _PyRecursiveMutex whose ``level`` does not count the first acquisition
    rlock_count_extra: int = 0
    free_threaded: bool = False  # Py_GIL_DISABLED (3.13t, 3.14t): no GIL state to read


_F38 = Features("frame_objects", "lnotab", "runtime", "dk_size", "ob_size", "dictoffset")
_F311 = Features("interpreter_frames", "locations", "runtime", "dk_log2", "ob_size", "preheader_values")
_F312 = _F311._replace(gil="interpreter", long="lv_tag", instance_dict="tagged_values")
_F313 = _F312._replace(instance_dict="inline_values")
FEATURES: Dict[Tuple[int, int], Features] = {
    (3, 8): _F38,
    (3, 9): _F38,
    (3, 10): _F38._replace(lines="linetable"),
    (3, 11): _F311,
    (3, 12): _F312,
    (3, 13): _F313,
    (3, 14): _F313._replace(tagged_executable=True, rlock_count_extra=1),
}


def features_for(version: Tuple[int, int], free_threaded: bool = False) -> Optional[Features]:
    """The layout families of a (major, minor) version (a newer one: the newest known)."""
    f = FEATURES.get(version)
    if f is None and version > max(FEATURES):
        f = FEATURES[max(FEATURES)]
    return f._replace(free_threaded=free_threaded) if f is not None else None


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
