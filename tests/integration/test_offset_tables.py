"""The offset tables (gdbext/pyframes/tables.py) equal what each real
interpreter's DWARF says: ``scripts/gen_offsets.py --diff`` (one gdb run, no process) for every
CPython 3.8-3.13 built with a shared libpython (scripts/pythons.sh's cache, else pyenv) and the
scripts/pythons.sh builds with debug info.

An interpreter that is absent skips with the reason; one scripts/pythons.sh was asked for and
neither built nor called unobtainable fails (helpers.python_missing).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from helpers import (
    BUILT_NAMES,
    REPO,
    built_pythons,
    need_python,
    py_debug_info,
    py_free_threaded,
)

SCRIPT = REPO / "scripts" / "gen_offsets.py"
PYENV_VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
#: Fewer keys than this compared means the mapping (or the tables) lost keys: 3.8-3.10 compare 51,
#: 3.11-3.13 57-61, 3.14 (object rows and a few frame keys) 33, 3.13t (the keys _Py_DebugOffsets does
#: not give) 19.
MIN_KEYS = 40
MIN_KEYS_OBJECTS_ONLY = 25  # 3.14: tables.py holds only the object-layout rows
MIN_KEYS_FREE_THREADED = 12
#: Keys the walker cannot do without before 3.13 (no _Py_DebugOffsets there): always compared.
CORE_KEYS = ("rt.interpreters_head", "is.next", "is.threads_head", "ts.next", "ts.thread_id", "co.filename",
             "co.name", "co.firstlineno", "co.linetable", "tp.name", "dict.ma_keys", "str.length")
NOT_OFFSET_REASONS = ("not in DWARF", "not a byte offset", "free-threaded build:")

BUILT = built_pythons()


def _gen(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(REPO))


def _report(python) -> dict:
    r = _gen("--diff", "--json", str(python))
    assert r.returncode in (0, 1), (r.returncode, r.stderr)
    reports = json.loads(r.stdout)
    assert len(reports) == 1, reports.keys()
    report = next(iter(reports.values()))
    assert (r.returncode == 1) == bool(report["differ"] or report["errors"] or report["unmapped"]), r.returncode
    return report


def _assert_matches(report: dict, min_keys: int) -> None:
    label = report["label"]
    lines = ["%s %s: %s has %s, DWARF %s (%s)" % (label, k, d["source"], d["table"], d["dwarf"], d["spec"])
             for k, d in sorted(report["differ"].items())]
    lines += ["%s %s: gdb could not evaluate %s: %s" % (label, k, report["specs"][k], e)
              for k, e in sorted(report["errors"].items())]
    lines += ["%s %s: no DWARF expression in gen_offsets.EXPRESSIONS" % (label, k) for k in report["unmapped"]]
    assert not lines, "\n".join(lines)
    assert len(report["compared"]) >= min_keys, (label, report["compared"])
    for key, why in report["skipped"].items():
        assert any(r in why for r in NOT_OFFSET_REASONS), (label, key, why)


@pytest.mark.parametrize("version", PYENV_VERSIONS)
def test_pyenv_tables_match_dwarf(version):
    python = need_python(version)
    report = _report(python)
    assert report["version"] == version and not report["free_threaded"], report["label"]
    assert report["dwarf_file"].endswith(".so.1.0"), report["dwarf_file"]  # shared build: DWARF in libpython
    _assert_matches(report, MIN_KEYS)
    missing = [k for k in CORE_KEYS if k not in report["compared"]]
    assert not missing, (version, missing)


@pytest.mark.parametrize("name", BUILT_NAMES)
def test_built_tables_match_dwarf(name):
    python = need_python(name)
    assert py_debug_info(name)
    report = _report(python)
    assert report["label"] == name, (report["label"], name)
    assert report["free_threaded"] == py_free_threaded(name)
    if py_free_threaded(name):
        _assert_matches(report, MIN_KEYS_FREE_THREADED)
    else:
        _assert_matches(report, MIN_KEYS_OBJECTS_ONLY)


def test_json_output_is_the_dwarf_offsets():
    """Without --diff: {version: {key: offset}}, the same numbers the diff compared, exit 0."""
    python = need_python("3.12")
    r = _gen(str(python))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out) == ["3.12"]
    assert out["3.12"] == _report(python)["offsets"]
    assert out["3.12"]["ts.thread_id"] == 136 and "ob.managed_dict" not in out["3.12"]


def test_a_wrong_mapping_is_reported():
    """The diff is not vacuous: a wrong expression is a difference, a wrong member name an error,
    a table key without an expression is unmapped, and --diff then exits 1."""
    python = need_python("3.11")
    spec = importlib.util.spec_from_file_location("gen_offsets_under_test", str(SCRIPT))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.EXPRESSIONS["ts.thread_id"] = "PyThreadState->native_thread_id"
    gen.EXPRESSIONS["co.name"] = "PyCodeObject->co_no_such_member"
    del gen.EXPRESSIONS["dk.kind"]
    report = gen.check(gen.probe(python))
    assert report["differ"] == {"ts.thread_id": {"table": 152, "dwarf": 160, "source": "tables.py 3.11",
                                                 "spec": "PyThreadState->native_thread_id"}}
    assert list(report["errors"]) == ["co.name"] and "co_no_such_member" in report["errors"]["co.name"]
    assert report["unmapped"] == ["dk.kind"]
    assert gen.main(["--diff", str(python)]) == 1
