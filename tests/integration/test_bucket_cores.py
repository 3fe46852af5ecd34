"""Bucket ids on real cores: the same bug gets the same id across CPython versions and runs,
different bugs get different ids.

Fixture ``wf_python.py`` hangs on purpose: ``abba`` is an RLock lock-order deadlock (the wait-for
analysis proves the cycle, so there is a finding), ``join`` is a thread joining a thread that waits
for a lock the joiner holds (another deadlock, other code).  Each core is taken once (module scope)
and analyzed once with the real CLI, as a user would.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, all_pythons, gcore, need_python, run_hanganalyze, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

PYTHONS = all_pythons()
BUCKET = re.compile(r"^b2-[0-9a-f]{12}$")


def _report(python: Path, scenario: str, workdir: Path) -> dict:
    h = start_hung([python, FIXTURES / "wf_python.py", scenario], ready="READY", settle=0.5)
    try:
        core = gcore(h.pid, workdir)
    finally:
        h.kill()
    try:
        res = run_hanganalyze([core, "--format", "json"], timeout=300)
    finally:
        core.unlink()
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode in (0, 3, 5, 6), "exit %d: %s" % (res.returncode, err)
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{(python, scenario, run): report} for the combinations the tests compare."""
    wanted = [("3.10", "abba", 1), ("3.12", "abba", 1), ("3.12", "abba", 2), ("3.12", "join", 1),
              ("system-3.11", "abba", 1)]
    if "system-3.11" not in PYTHONS:
        pytest.skip("Debian's /usr/bin/python3.11 is not installed (apt-get install python3.11)")
    for v in ("3.10", "3.12"):
        need_python(v)
    out = {}
    for v, scenario, run in wanted:
        out[(v, scenario, run)] = _report(PYTHONS[v], scenario, tmp_path_factory.mktemp("b%s%s%d" % (v, scenario, run)))
    return out


def _bucket(report: dict) -> str:
    assert report["findings"], "expected a deadlock finding, got none"
    b = report["bucket"]
    assert b and BUCKET.match(b), b
    return b


def test_same_deadlock_same_bucket_across_python_versions(reports):
    a310 = reports[("3.10", "abba", 1)]
    a312 = reports[("3.12", "abba", 1)]
    assert a310["processes"][0]["python"]["version"].startswith("3.10")
    assert a312["processes"][0]["python"]["version"].startswith("3.12")
    assert _bucket(a310) == _bucket(a312)


def test_same_deadlock_same_bucket_on_stripped_static_debian_python(reports):
    """/usr/bin/python3.11 is stripped and links libpython statically: other native frames, same bug."""
    assert _bucket(reports[("system-3.11", "abba", 1)]) == _bucket(reports[("3.12", "abba", 1)])


def test_same_deadlock_same_bucket_across_runs(reports):
    r1, r2 = reports[("3.12", "abba", 1)], reports[("3.12", "abba", 2)]
    assert r1["processes"][0]["pid"] != r2["processes"][0]["pid"]
    assert _bucket(r1) == _bucket(r2)


def test_different_deadlock_different_bucket(reports):
    assert _bucket(reports[("3.12", "join", 1)]) != _bucket(reports[("3.12", "abba", 1)])


#: Issue 12: the same bug keeps its findings and bucket id on 3.12, 3.13, 3.14 and the
#: free-threaded builds (3.13t, 3.14t: no GIL, other object headers, PyMutex-based locks).
ACROSS = ("3.12", "3.13", "3.13t", "3.14", "3.14t")


@pytest.mark.parametrize("scenario", ["abba", "join"])
def test_same_bug_same_findings_and_bucket_on_312_to_314t(scenario, tmp_path):
    for v in ACROSS:
        need_python(v)
    out = {}
    for v in ACROSS:
        rep = _report(PYTHONS[v], scenario, tmp_path / v.replace(".", "_"))
        py = rep["processes"][0]["python"]
        assert py["version"].startswith(v.rstrip("t")) and py["free_threading"] is v.endswith("t"), py
        out[v] = (tuple(sorted(f["signature"] for f in rep["findings"])), _bucket(rep))
    assert len(set(out.values())) == 1, out
