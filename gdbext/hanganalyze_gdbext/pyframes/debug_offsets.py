"""Parse ``_Py_DebugOffsets`` (CPython 3.13+), the table CPython itself puts at ``&_PyRuntime``.

The struct is a cookie ``b"xdebugpy"``, ``uint64 version`` (PY_VERSION_HEX), ``uint64
free_threaded`` and then groups of ``uint64`` offsets.  Its field order is stable only within a
minor version, so the order is data here (``LAYOUTS``): candidate layouts per minor version,
written from CPython's ``Include/internal/pycore_runtime.h`` (3.13) and
``pycore_debug_offsets.h`` (3.14).
``parse`` is pure (bytes in, dict out) so it is unit-tested without gdb; ``to_table`` maps the
parsed groups onto the walker's flat table keys (see ``tables.py``).
"""

import struct
from typing import Dict, List, Optional, Tuple

COOKIE = b"xdebugpy"
HEADER = struct.Struct("<8sQQ")

Layout = List[Tuple[str, List[str]]]

_RUNTIME: Layout = [("runtime_state", ["size", "finalizing", "interpreters_head"])]
_INTERP_313 = ["size", "id", "next", "threads_head", "gc", "imports_modules", "sysdict", "builtins", "ceval_gil",
               "gil_runtime_state", "gil_runtime_state_enabled", "gil_runtime_state_locked",
               "gil_runtime_state_holder"]
_INTERP_314 = _INTERP_313[:4] + ["threads_main"] + _INTERP_313[4:]
_THREAD: Layout = [("thread_state", ["size", "prev", "next", "interp", "current_frame", "thread_id",
                                     "native_thread_id", "datastack_chunk", "status"])]
_FRAME_313 = ["size", "previous", "executable", "instr_ptr", "localsplus", "owner"]
_CODE_313 = ["size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount", "localsplusnames",
             "localspluskinds", "co_code_adaptive"]
_OBJECTS_HEAD: Layout = [
    ("pyobject", ["size", "ob_type"]),
    ("type_object", ["size", "tp_name", "tp_repr", "tp_flags"]),
    ("tuple_object", ["size", "ob_item", "ob_size"]),
    ("list_object", ["size", "ob_item", "ob_size"]),
]
_SET: Layout = [("set_object", ["size", "used", "table", "mask"])]
_OBJECTS_TAIL: Layout = [
    ("dict_object", ["size", "ma_keys", "ma_values"]),
    ("float_object", ["size", "ob_fval"]),
    ("long_object", ["size", "lv_tag", "ob_digit"]),
    ("bytes_object", ["size", "ob_size", "ob_sval"]),
    ("unicode_object", ["size", "state", "length", "asciiobject_size"]),
    ("gc", ["size", "collecting"]),
]
_GEN: Layout = [("gen_object", ["size", "gi_name", "gi_iframe", "gi_frame_state"])]
_LLIST: Layout = [("llist_node", ["next", "prev"])]
_DEBUGGER: Layout = [("debugger_support", ["eval_breaker", "remote_debugger_support", "remote_debugging_enabled",
                                           "debugger_pending_call", "debugger_script_path",
                                           "debugger_script_path_size"])]

#: Candidate layouts per minor version, most likely first.  3.13 is measured (the real build's
#: bytes parse and match DWARF); so is 3.14.0's layout (Debian's 3.14.10: ``ptype/o struct
#: _Py_DebugOffsets`` of its DWARF equals the first 3.14 layout field for field).  The header changed
#: during the 3.14 cycle (``threads_main``, ``stackpointer``, ``set_object``, ``gen_object``,
#: ``debugger_support`` early; ``code_object_generation``, ``tlbc_generation``, ``tlbc_index``,
#: ``co_tlbc``, ``llist_node`` later), so each variant is tried and the first whose values pass
#: ``sane`` wins: a misaligned read fails the object-header invariants checked there.
LAYOUTS: Dict[Tuple[int, int], List[Layout]] = {
    (3, 13): [
        _RUNTIME + [("interpreter_state", _INTERP_313)] + _THREAD + [("interpreter_frame", _FRAME_313),
                                                                   ("code_object", _CODE_313)]
        + _OBJECTS_HEAD + _OBJECTS_TAIL,
    ],
    (3, 14): [
        # 3.14.0 as released (pycore_debug_offsets.h on the 3.14 branch)
        _RUNTIME + [("interpreter_state", _INTERP_314 + ["code_object_generation", "tlbc_generation"])] + _THREAD
        + [("interpreter_frame", _FRAME_313 + ["stackpointer", "tlbc_index"]),
           ("code_object", _CODE_313 + ["co_tlbc"])]
        + _OBJECTS_HEAD + _SET + _OBJECTS_TAIL + _GEN + _LLIST + _DEBUGGER,
        # 3.14 pre-releases without the generation counters and thread-local bytecode fields
        _RUNTIME + [("interpreter_state", _INTERP_314)] + _THREAD
        + [("interpreter_frame", _FRAME_313 + ["stackpointer"]), ("code_object", _CODE_313)]
        + _OBJECTS_HEAD + _SET + _OBJECTS_TAIL + _GEN + _DEBUGGER,
    ],
}


class DebugOffsets:
    """Parsed ``_Py_DebugOffsets``: ``version_hex``, ``free_threaded`` and ``groups[g][f]``."""

    def __init__(self, version_hex: int, free_threaded: bool, groups: Dict[str, Dict[str, int]]):
        self.version_hex = version_hex
        self.free_threaded = free_threaded
        self.groups = groups

    @property
    def minor(self) -> Tuple[int, int]:
        return (self.version_hex >> 24) & 0xFF, (self.version_hex >> 16) & 0xFF

    def get(self, group: str, field: str) -> Optional[int]:
        return self.groups.get(group, {}).get(field)


def _layout_size(layout: Layout) -> int:
    return HEADER.size + 8 * sum(len(fields) for _, fields in layout)


def size_for(version: Tuple[int, int]) -> int:
    """Bytes to read at &_PyRuntime to parse any candidate layout of that version."""
    layouts = LAYOUTS.get(version) or LAYOUTS[max(LAYOUTS)]
    return max(_layout_size(lay) for lay in layouts)


def peek_version(head: bytes) -> Optional[int]:
    """PY_VERSION_HEX from the first 24 bytes at &_PyRuntime, or None when the cookie is absent."""
    if len(head) < HEADER.size:
        return None
    cookie, version, _ = HEADER.unpack_from(head, 0)
    return version if cookie == COOKIE else None


def _parse_layout(data: bytes, layout: Layout, version: int, free_threaded: int) -> Optional[DebugOffsets]:
    need = _layout_size(layout)
    if len(data) < need:
        return None
    values = struct.unpack_from("<%dQ" % ((need - HEADER.size) // 8), data, HEADER.size)
    groups: Dict[str, Dict[str, int]] = {}
    i = 0
    for gname, fields in layout:
        groups[gname] = dict(zip(fields, values[i:i + len(fields)]))
        i += len(fields)
    return DebugOffsets(version, bool(free_threaded), groups)


def parse(data: bytes) -> Optional[DebugOffsets]:
    """Parse the struct; None when the cookie is missing, the version has no layout here, the
    buffer is short, or no candidate layout passes the sanity checks (a misread layout must
    never be used)."""
    if len(data) < HEADER.size:
        return None
    cookie, version, free_threaded = HEADER.unpack_from(data, 0)
    if cookie != COOKIE:
        return None
    minor = ((version >> 24) & 0xFF, (version >> 16) & 0xFF)
    for layout in LAYOUTS.get(minor, ()):
        parsed = _parse_layout(data, layout, version, free_threaded)
        if parsed is not None and sane(parsed):
            return parsed
    return None


def sane(d: DebugOffsets) -> bool:
    """Invariants of CPython's object headers and struct sizes that any shifted or misordered
    read breaks: ``ob_size``/``lv_tag``/``length`` follow the object header, item arrays the
    size field, every offset lies inside its struct, GIL fields inside the interpreter."""
    g = d.groups
    try:
        head = g["pyobject"]["size"]
        ok = (
            head in (16, 32)  # 32: free-threaded header
            and g["pyobject"]["ob_type"] == head - 8
            # 3.14 caches the hash in the tuple (ob_hash) before the items
            and g["tuple_object"]["ob_size"] == head and g["tuple_object"]["ob_item"] in (head + 8, head + 16)
            and g["list_object"]["ob_size"] == head and g["list_object"]["ob_item"] == head + 8
            and g["bytes_object"]["ob_size"] == head and g["long_object"]["lv_tag"] == head
            and g["unicode_object"]["length"] == head
            and g["dict_object"]["ma_keys"] < g["dict_object"]["size"]
            and g["unicode_object"]["asciiobject_size"] < g["unicode_object"]["size"]
            and g["runtime_state"]["interpreters_head"] < g["runtime_state"]["size"]
        )
        for group in ("interpreter_state", "thread_state", "interpreter_frame", "code_object", "gc"):
            fields = g[group]
            ok = ok and all(v < fields["size"] for k, v in fields.items()
                            if k != "size" and not k.startswith("gil_runtime_state_enabled"))
        isg = g["interpreter_state"]
        ok = ok and 0 <= isg["gil_runtime_state_locked"] - isg["gil_runtime_state"] < 256
        ok = ok and 0 <= isg["gil_runtime_state_holder"] - isg["gil_runtime_state"] < 256
        return bool(ok)
    except KeyError:
        return False


def to_table(d: DebugOffsets) -> Dict[str, int]:
    """Map parsed debug offsets onto the flat walker keys they cover."""
    g = d.groups
    isg, ts, fr, co = g["interpreter_state"], g["thread_state"], g["interpreter_frame"], g["code_object"]
    gil_base = isg["gil_runtime_state"]
    t = {
        "rt.interpreters_head": g["runtime_state"]["interpreters_head"],
        "is.next": isg["next"],
        "is.id": isg["id"],
        "is.threads_head": isg["threads_head"],
        "is.modules": isg["imports_modules"],
        "is.gc_collecting": isg["gc"] + g["gc"]["collecting"],
        "is.ceval_gil": isg["ceval_gil"],
        "gil.locked": isg["gil_runtime_state_locked"] - gil_base,
        "gil.last_holder": isg["gil_runtime_state_holder"] - gil_base,
        "ts.next": ts["next"],
        "ts.interp": ts["interp"],
        "ts.current_frame": ts["current_frame"],
        "ts.thread_id": ts["thread_id"],
        "ts.native_thread_id": ts["native_thread_id"],
        "ifr.previous": fr["previous"],
        "ifr.code": fr["executable"],
        "ifr.instr": fr["instr_ptr"],
        "ifr.owner": fr["owner"],
        "co.filename": co["filename"],
        "co.name": co["name"],
        "co.qualname": co["qualname"],
        "co.linetable": co["linetable"],
        "co.firstlineno": co["firstlineno"],
        "co.code_adaptive": co["co_code_adaptive"],
        "ob.type": g["pyobject"]["ob_type"],
        "tp.name": g["type_object"]["tp_name"],
        "tp.flags": g["type_object"]["tp_flags"],
        "dict.ma_keys": g["dict_object"]["ma_keys"],
        "dict.ma_values": g["dict_object"]["ma_values"],
        "long.size": g["long_object"]["lv_tag"],
        "long.digit": g["long_object"]["ob_digit"],
        "bytes.ob_size": g["bytes_object"]["ob_size"],
        "bytes.ob_sval": g["bytes_object"]["ob_sval"],
        "str.state": g["unicode_object"]["state"],
        "str.length": g["unicode_object"]["length"],
        "str.ascii_size": g["unicode_object"]["asciiobject_size"],
    }
    t.update({
        "var.ob_size": g["tuple_object"]["ob_size"],
        "tuple.ob_item": g["tuple_object"]["ob_item"],
        "list.ob_item": g["list_object"]["ob_item"],
        "ob.head": g["pyobject"]["size"],
        "ifr.localsplus": fr["localsplus"],
        "co.localsplusnames": co["localsplusnames"],
    })
    if d.free_threaded:
        enabled = isg["gil_runtime_state_enabled"]
        t["gil.enabled"] = enabled - gil_base if enabled >= gil_base else enabled
        # 3.14t: thread-local bytecode; instr_ptr points into co_tlbc[tlbc_index]
        if fr.get("tlbc_index") and co.get("co_tlbc"):
            t["ifr.tlbc_index"] = fr["tlbc_index"]
            t["co.tlbc"] = co["co_tlbc"]
    return t
