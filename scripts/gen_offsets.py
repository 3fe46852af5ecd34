#!/usr/bin/env python3
"""Regenerate the CPython offset tables (``gdbext/pyframes/tables.py``) from an interpreter's
DWARF, and diff them with the tables.

    python3 scripts/gen_offsets.py [PYTHON ...]            JSON {version: {key: offset}} on stdout
    python3 scripts/gen_offsets.py --diff [PYTHON ...]     every key whose DWARF value differs; exit 1
    python3 scripts/gen_offsets.py --diff --json [...]     the same as one JSON report per version

PYTHON is an interpreter (``~/.pyenv/versions/3.12.1/bin/python3.12``) or a libpython with debug
info (``libpython3.12.so.1.0``); none means every pyenv CPython 3.8+ in ``$PYENV_ROOT/versions``
plus the builds of ``scripts/pythons.sh`` (``$HANGANALYZE_PYTHONS``).  The interpreter is run once
(``sys.version_info``, ``Py_GIL_DISABLED``, and the libpython it maps, from ``/proc/self/maps``);
when it cannot run, the version comes from the file name (or ``--version 3.12``) and its own file
is read.  One ``gdb -nx -batch`` per interpreter, with no process: the DWARF file is loaded with
``file`` and gdb's Python evaluates ``(long)&((T *)0)->field`` for every key, inside gdb.

What each key means is data, below: ``EXPRESSIONS`` maps a table key to ``"Type->field.path"``
(``"sizeof Type"`` for a struct size), or to ``{first version: spec}`` where a field was renamed or
moved.  Keys that are not DWARF facts (build facts) are listed in ``NOT_OFFSETS`` and reported as
skipped (the layout families, ``tables.FEATURES``, are named features, not table keys).  A table
key with neither an expression nor a reason is an error: the mapping must grow with the tables.
Free-threaded builds (3.13t, 3.14t) have no table of their own: they are compared with
``tables.free_threaded_table(TABLES[version])``, except the keys the walker takes from
``_Py_DebugOffsets`` at run time (``debug_offsets.to_table``).

Exit status: 0 all compared keys match (or JSON written), 1 a difference, an unmapped key or a
key gdb could not evaluate, 2 an interpreter or gdb could not be used.  Standard library only.
"""

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

REPO = Path(__file__).resolve().parents[1]
TABLES_PY = REPO / "gdbext" / "hanganalyze_gdbext" / "pyframes" / "tables.py"
DEBUG_OFFSETS_PY = REPO / "gdbext" / "hanganalyze_gdbext" / "pyframes" / "debug_offsets.py"

Version = Tuple[int, int]
Spec = Union[str, Dict[Version, str]]

#: Table key -> where DWARF has it: ``"Type->member.path"`` (an offset), ``"sizeof Type"`` (a size:
#: the ``str.*_size`` keys are where a compact string's characters start), or ``{since: spec}``
#: (the spec of the highest ``since`` <= the version applies).  One entry per key, every version.
EXPRESSIONS: Dict[str, Spec] = {
    # objects
    "ob.type": "PyObject->ob_type",
    "tp.name": "PyTypeObject->tp_name",
    "tp.basicsize": "PyTypeObject->tp_basicsize",
    "tp.flags": "PyTypeObject->tp_flags",
    "tp.dictoffset": "PyTypeObject->tp_dictoffset",
    "tp.dict": "PyTypeObject->tp_dict",
    "ht.cached_keys": "PyHeapTypeObject->ht_cached_keys",
    "tuple.ob_item": "PyTupleObject->ob_item",
    "mod.md_dict": "PyModuleObject->md_dict",
    "dict.ma_used": "PyDictObject->ma_used",
    "dict.ma_keys": "PyDictObject->ma_keys",
    "dict.ma_values": "PyDictObject->ma_values",
    "dk.size": "PyDictKeysObject->dk_size",
    "dk.log2_size": "PyDictKeysObject->dk_log2_size",
    "dk.log2_index_bytes": "PyDictKeysObject->dk_log2_index_bytes",
    "dk.kind": "PyDictKeysObject->dk_kind",
    "dk.nentries": "PyDictKeysObject->dk_nentries",
    "dk.indices": "PyDictKeysObject->dk_indices",
    "dv.values": "PyDictValues->values",
    "str.length": "PyASCIIObject->length",
    "str.state": "PyASCIIObject->state",
    "str.ascii_size": "sizeof PyASCIIObject",
    "str.compact_size": "sizeof PyCompactUnicodeObject",
    "rlock.owner": {(3, 8): "rlockobject->rlock_owner", (3, 14): "rlockobject->lock.thread"},
    "rlock.count": {(3, 8): "rlockobject->rlock_count", (3, 14): "rlockobject->lock.level"},
    "weakref.object": "PyWeakReference->wr_object",
    "cell.ref": "PyCellObject->ob_ref",
    "bytes.ob_size": "PyBytesObject->ob_base.ob_size",
    "bytes.ob_sval": "PyBytesObject->ob_sval",
    "long.size": {(3, 8): "PyLongObject->ob_base.ob_size", (3, 12): "PyLongObject->long_value.lv_tag"},
    "long.digit": {(3, 8): "PyLongObject->ob_digit", (3, 12): "PyLongObject->long_value.ob_digit"},
    # runtime, interpreter, GIL
    "rt.interpreters_head": "_PyRuntimeState->interpreters.head",
    "rt.tstate_current": "_PyRuntimeState->gilstate.tstate_current",
    "rt.gil_last_holder": "_PyRuntimeState->ceval.gil.last_holder",
    "rt.gil_locked": "_PyRuntimeState->ceval.gil.locked",
    "rt.gc_collecting": "_PyRuntimeState->gc.collecting",
    "is.next": "PyInterpreterState->next",
    "is.id": "PyInterpreterState->id",
    "is.threads_head": {(3, 8): "PyInterpreterState->tstate_head", (3, 11): "PyInterpreterState->threads.head"},
    "is.modules": {(3, 8): "PyInterpreterState->modules", (3, 12): "PyInterpreterState->imports.modules"},
    "is.gc_collecting": "PyInterpreterState->gc.collecting",
    "is.ceval_gil": "PyInterpreterState->ceval.gil",
    "gil.last_holder": "struct _gil_runtime_state->last_holder",
    "gil.locked": "struct _gil_runtime_state->locked",
    # threads and frames
    "ts.next": "PyThreadState->next",
    "ts.interp": "PyThreadState->interp",
    "ts.frame": "PyThreadState->frame",
    "ts.cframe": "PyThreadState->cframe",
    "ts.current_frame": "PyThreadState->current_frame",
    "ts.thread_id": "PyThreadState->thread_id",
    "ts.native_thread_id": "PyThreadState->native_thread_id",
    "ts.on_delete_data": "PyThreadState->on_delete_data",
    "cf.current_frame": "_PyCFrame->current_frame",
    "cf.previous": "_PyCFrame->previous",
    "fo.f_back": "PyFrameObject->f_back",
    "fo.f_code": "PyFrameObject->f_code",
    "fo.f_lasti": "PyFrameObject->f_lasti",
    "fo.f_globals": "PyFrameObject->f_globals",
    "fo.localsplus": "PyFrameObject->f_localsplus",
    "ifr.previous": "_PyInterpreterFrame->previous",
    "ifr.code": {(3, 11): "_PyInterpreterFrame->f_code", (3, 13): "_PyInterpreterFrame->f_executable"},
    "ifr.instr": {(3, 11): "_PyInterpreterFrame->prev_instr", (3, 13): "_PyInterpreterFrame->instr_ptr"},
    "ifr.is_entry": "_PyInterpreterFrame->is_entry",
    "ifr.owner": "_PyInterpreterFrame->owner",
    "ifr.globals": "_PyInterpreterFrame->f_globals",
    "ifr.localsplus": "_PyInterpreterFrame->localsplus",
    # code objects
    "co.firstlineno": "PyCodeObject->co_firstlineno",
    "co.filename": "PyCodeObject->co_filename",
    "co.name": "PyCodeObject->co_name",
    "co.qualname": "PyCodeObject->co_qualname",
    "co.linetable": {(3, 8): "PyCodeObject->co_lnotab", (3, 10): "PyCodeObject->co_linetable"},
    "co.nlocalsplus": "PyCodeObject->co_nlocalsplus",
    "co.code_adaptive": "PyCodeObject->co_code_adaptive",
    "co.nlocals": "PyCodeObject->co_nlocals",
    "co.varnames": "PyCodeObject->co_varnames",
    "co.localsplusnames": "PyCodeObject->co_localsplusnames",
}

#: Keys (or ``"prefix."``) whose values are not DWARF facts, and why: never compared.
NOT_OFFSETS: Dict[str, str] = {
    "ob.managed_dict": "MANAGED_DICT_OFFSET, a macro (build fact), not in DWARF",
    "str.kind_shift": "a bit position inside a bit-field (build fact), not a byte offset",
}

FT_RUNTIME_REASON = "free-threaded build: the walker takes it from _Py_DebugOffsets at run time"

GDB_PROGRAM = r'''
import json
import gdb
gdb.execute("set language c")
out = {}
for key, expr in json.loads(%r).items():
    try:
        out[key] = int(gdb.parse_and_eval(expr))
    except Exception as e:  # gdb.error: no such type or member
        out[key] = "%%s: %%s" %% (type(e).__name__, e)
print("@@GEN_OFFSETS@@" + json.dumps(out))
'''

PROBE = r'''
import json, os, sys, sysconfig
lib = ""
try:
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            path = parts[5].strip() if len(parts) > 5 else ""
            if os.path.basename(path).startswith("libpython") and ".so" in path:
                lib = path
                break
except OSError:
    pass
print(json.dumps({"version": list(sys.version_info[:2]), "ft": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                  "lib": lib}))
'''


def _load(path: Path) -> Any:
    """Import a gdbext file by location (they import only the standard library), not its package:
    ``gdbext/pyframes/__init__.py`` pulls in the walker."""
    spec = importlib.util.spec_from_file_location("_gen_offsets_" + path.stem, str(path))
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def spec_for(key: str, version: Version) -> Optional[str]:
    """The DWARF spec of a key for a version, or None when the mapping has none."""
    spec = EXPRESSIONS.get(key)
    if isinstance(spec, dict):
        since = [v for v in spec if v <= version]
        return spec[max(since)] if since else None
    return spec


def c_expression(spec: str) -> str:
    """``"T->a.b"`` -> ``(long)&((T *)0)->a.b``; ``"sizeof T"`` -> ``(long)sizeof(T)``."""
    if spec.startswith("sizeof "):
        return "(long)sizeof(%s)" % spec[len("sizeof "):]
    typ, _, member = spec.partition("->")
    return "(long)&((%s *)0)->%s" % (typ, member)


def not_offset(key: str) -> Optional[str]:
    for k, why in NOT_OFFSETS.items():
        if key == k or (k.endswith(".") and key.startswith(k)):
            return why
    return None


class Interpreter:
    def __init__(self, path: Path, version: Version, free_threaded: bool, dwarf: Path):
        self.path = path
        self.version = version
        self.free_threaded = free_threaded
        self.dwarf = dwarf

    @property
    def label(self) -> str:
        return "%d.%d%s" % (self.version + ("t" if self.free_threaded else "",))


def probe(path: Path, forced: Optional[str] = None) -> Interpreter:
    """Version, free-threading and the file with CPython's DWARF (the libpython it maps, else itself)."""
    path = Path(os.path.abspath(str(path)))
    if not path.exists():
        raise SystemExit("gen_offsets: %s does not exist" % path)
    info: Optional[Dict[str, Any]] = None
    if not forced and os.access(str(path), os.X_OK) and ".so" not in path.name:
        try:
            r = subprocess.run([str(path), "-I", "-S", "-c", PROBE], capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                info = json.loads(r.stdout.strip().splitlines()[-1])
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            info = None
    if info is not None:
        lib = Path(info["lib"]) if info["lib"] else path
        return Interpreter(path, (info["version"][0], info["version"][1]), info["ft"], lib)
    m = re.search(r"(\d+)\.(\d+)(t?)", forced or "") or re.search(r"python(\d+)\.(\d+)(t?)", path.name)
    if not m:
        raise SystemExit("gen_offsets: cannot tell the CPython version of %s: run it here or pass --version X.Y" % path)
    return Interpreter(path, (int(m.group(1)), int(m.group(2))), bool(m.group(3)), path)


def run_gdb(dwarf: Path, exprs: Dict[str, str], gdb: str = "gdb", timeout: int = 300) -> Dict[str, Union[int, str]]:
    """{key: value, or gdb's error text} for C expressions evaluated against a file's DWARF, one gdb run."""
    with tempfile.TemporaryDirectory(prefix="gen_offsets.") as tmp:
        prog = Path(tmp) / "eval.py"
        prog.write_text(GDB_PROGRAM % json.dumps(exprs))
        argv = [gdb, "-nx", "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
                "-ex", "file %s" % dwarf, "-x", str(prog)]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SystemExit("gen_offsets: gdb on %s failed: %s" % (dwarf, e)) from None
    for line in r.stdout.splitlines():
        if line.startswith("@@GEN_OFFSETS@@"):
            return json.loads(line[len("@@GEN_OFFSETS@@"):])
    raise SystemExit("gen_offsets: gdb on %s gave no result (exit %d): %s"
                     % (dwarf, r.returncode, (r.stderr or r.stdout).strip()[-2000:]))


def expected_for(version: Version, free_threaded: bool) -> Tuple[Dict[str, Tuple[int, str]], Dict[str, str]]:
    """({key: (value, source)} to check, {key: why skipped}) from tables.py.  A version with no
    table gets the keys of the newest older table (values to regenerate, the diff then compares
    with that older table)."""
    tables = _load(TABLES_PY)
    older = [v for v in tables.TABLES if v <= version]
    tv = version if version in tables.TABLES else (max(older) if older else min(tables.TABLES))
    table = dict(tables.TABLES[tv])
    tname = "tables.py %d.%d" % tv
    runtime_keys: set = set()
    if free_threaded:
        table = tables.free_threaded_table(table, tv)
        tname += " (free_threaded_table)"
        dbg = _load(DEBUG_OFFSETS_PY)
        layouts = dbg.LAYOUTS.get(version) or dbg.LAYOUTS[max(dbg.LAYOUTS)]
        groups = {g: dict.fromkeys(fields, 0) for g, fields in layouts[0]}
        runtime_keys = set(dbg.to_table(dbg.DebugOffsets(0, True, groups)))
    want: Dict[str, Tuple[int, str]] = {}
    skipped: Dict[str, str] = {}
    for key, value in table.items():
        why = not_offset(key) or (FT_RUNTIME_REASON if key in runtime_keys else None)
        if why is not None:
            skipped[key] = why
        else:
            want[key] = (value, tname)
    return want, skipped


def check(interp: Interpreter, gdb: str = "gdb") -> Dict[str, Any]:
    """Evaluate every comparable key of an interpreter's tables against its DWARF."""
    want, skipped = expected_for(interp.version, interp.free_threaded)
    exprs: Dict[str, str] = {"@sizeof(PyObject)": c_expression("sizeof PyObject")}
    unmapped: List[str] = []
    for key in want:
        spec = spec_for(key, interp.version)
        if spec is None:
            unmapped.append(key)
        else:
            exprs[key] = c_expression(spec)
    got = run_gdb(interp.dwarf, exprs, gdb)
    head = got.pop("@sizeof(PyObject)")
    if not isinstance(head, int):
        raise SystemExit("gen_offsets: %s has no DWARF for CPython's types (%s)" % (interp.dwarf, head))
    if (head == 32) != interp.free_threaded:
        raise SystemExit("gen_offsets: %s: sizeof(PyObject) is %d in DWARF but the interpreter says %s"
                         % (interp.dwarf, head, "free-threaded" if interp.free_threaded else "GIL build"))
    offsets = {k: v for k, v in got.items() if isinstance(v, int)}
    errors = {k: v for k, v in got.items() if not isinstance(v, int)}
    differ = {k: {"table": want[k][0], "dwarf": v, "source": want[k][1], "spec": spec_for(k, interp.version)}
              for k, v in offsets.items() if v != want[k][0]}
    return {
        "label": interp.label, "python": str(interp.path), "dwarf_file": str(interp.dwarf),
        "version": "%d.%d" % interp.version, "free_threaded": interp.free_threaded,
        "offsets": offsets, "compared": sorted(offsets), "differ": differ, "errors": errors,
        "unmapped": unmapped, "skipped": skipped,
        "specs": {k: spec_for(k, interp.version) for k in exprs if not k.startswith("@")},
    }


def discover() -> List[Path]:
    """Every pyenv CPython 3.8+ and every finished scripts/pythons.sh build with debug info."""
    found: List[Path] = []
    vdir = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))) / "versions"
    if vdir.is_dir():
        for d in sorted(vdir.iterdir(), key=lambda p: [int(x) if x.isdigit() else 0 for x in p.name.split(".")]):
            m = re.fullmatch(r"3\.(\d+)\.\d+", d.name)
            exe = d / "bin" / ("python3.%s" % m.group(1)) if m else None
            if exe is not None and int(m.group(1)) >= 8 and exe.exists():
                found.append(exe)
    cache = Path(os.environ.get("HANGANALYZE_PYTHONS", str(Path.home() / ".cache" / "hanganalyze" / "pythons")))
    if cache.is_dir():
        for d in sorted(cache.iterdir()):
            exe = d / "bin" / ("python%s" % d.name)
            if (d / ".done").is_file() and exe.exists():
                found.append(exe)
    return found


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pythons", nargs="*", type=Path, help="interpreters or libpython files (default: discover)")
    ap.add_argument("--diff", action="store_true", help="print the keys whose DWARF value differs from the tables")
    ap.add_argument("--json", action="store_true", help="with --diff: a JSON report per version")
    ap.add_argument("--version", help="X.Y[t] for a file that cannot be run here (one PYTHON)")
    ap.add_argument("--gdb", default="gdb", help="the gdb to run (default: gdb)")
    args = ap.parse_args(argv)
    pythons = args.pythons or discover()
    if not pythons:
        print("gen_offsets: no interpreter given and none found under $PYENV_ROOT/versions", file=sys.stderr)
        return 2
    if args.version and len(pythons) != 1:
        ap.error("--version needs exactly one PYTHON")
    try:
        results = [check(probe(p, args.version), args.gdb) for p in pythons]
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    bad = any(r["differ"] or r["errors"] or r["unmapped"] for r in results)
    labels = [r["label"] for r in results]
    names = [lab if labels.count(lab) == 1 else "%s (%s)" % (lab, r["python"]) for lab, r in zip(labels, results)]
    if not args.diff:
        json.dump({n: r["offsets"] for n, r in zip(names, results)}, sys.stdout, indent=1, sort_keys=True)
        print()
        for n, r in zip(names, results):
            for k, e in sorted(r["errors"].items()):
                print("%s %s: not evaluated: %s" % (n, k, e), file=sys.stderr)
            for k in r["unmapped"]:
                print("%s %s: no DWARF expression in EXPRESSIONS" % (n, k), file=sys.stderr)
        return 1 if any(r["errors"] or r["unmapped"] for r in results) else 0
    if args.json:
        json.dump({n: r for n, r in zip(names, results)}, sys.stdout, indent=1, sort_keys=True)
        print()
        return 1 if bad else 0
    for n, r in zip(names, results):
        print("%s (%s, DWARF of %s): %d keys compared, %d differ, %d not evaluated, %d unmapped, %d skipped"
              % (n, r["python"], r["dwarf_file"], len(r["compared"]), len(r["differ"]), len(r["errors"]),
                 len(r["unmapped"]), len(r["skipped"])))
        for k, d in sorted(r["differ"].items()):
            print("  DIFFER %s: %s has %d, DWARF %d (%s)" % (k, d["source"], d["table"], d["dwarf"], d["spec"]))
        for k, e in sorted(r["errors"].items()):
            print("  ERROR %s: %s (%s)" % (k, e, r["specs"][k]))
        for k in r["unmapped"]:
            print("  UNMAPPED %s: no DWARF expression in EXPRESSIONS, nor a reason in NOT_OFFSETS" % k)
        for k, why in sorted(r["skipped"].items()):
            print("  skipped %s: %s" % (k, why))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
