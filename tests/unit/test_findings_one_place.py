"""Findings are built in one place: no analyzer module but analyze/findings.py calls ``Finding(``
(the model class is in gdbext/hanganalyze_gdbext/model; ``Finding.from_dict`` rebuilds a stored one)."""

from __future__ import annotations

import re
from pathlib import Path

ANALYZER = Path(__file__).resolve().parents[2] / "analyzer" / "hanganalyze"
CONSTRUCTOR = ANALYZER / "analyze" / "findings.py"
#: ``Finding(`` not preceded by a name character or a dot (``MyFinding(``, ``x.Finding(``).
CALL = re.compile(r"(?<![\w.])Finding\(")


def test_the_pattern_finds_a_construction():
    assert CALL.search("    return Finding(signature=s, title=t)")
    assert not CALL.search("f = Finding.from_dict(d)") and not CALL.search("def f() -> Finding:")


def test_only_the_constructor_module_builds_findings():
    sites = {}
    for path in sorted(ANALYZER.rglob("*.py")):
        n = len(CALL.findall(path.read_text(encoding="utf-8")))
        if n:
            sites[str(path.relative_to(ANALYZER))] = n
    assert str(CONSTRUCTOR.relative_to(ANALYZER)) in sites  # the check looks where the calls are
    others = {p: n for p, n in sites.items() if ANALYZER / p != CONSTRUCTOR}
    assert not others, "Finding( outside analyze/findings.py (use findings.from_rule / from_signature): %s" % others
