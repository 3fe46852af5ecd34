"""regex_guard refuses the catastrophic-backtracking shapes and accepts every built-in regex."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from hanganalyze.analyze.regex_guard import MAX_PATTERN, risky_regex

SIGNATURES = Path(__file__).resolve().parents[2] / "signatures"

EVIL = [r"^(a+)+$", r"(\w+\s?)*$", r"(.*,)*x", r"(a|ab)*c", r"(a*)*b", r"((ab)*)+$", r"(x+x+)+y",
        r"(a+){1,1000}b", r"(?:(?:a|b)+)+", r"(?=(a+)+)b", r"foo|(bar+)*baz"]
SAFE = [r"(a|b)*c", r"(\w|\d)+$", r"foo.*bar", r"^(__GI_)?_*(abort|raise)$", r"(?:foo)+", r"\d+ seconds",
        r"(ab|cd)+", r"[^']*'", r"(a+){2}", r"Timed out waiting \d+ms for (recv|send)"]


@pytest.mark.parametrize("pattern", EVIL)
def test_catastrophic_shapes_are_refused(pattern):
    assert risky_regex(pattern)


@pytest.mark.parametrize("pattern", SAFE)
def test_linear_shapes_are_accepted(pattern):
    assert risky_regex(pattern) is None


def test_refused_shape_really_is_slow_and_accepted_one_is_not():
    """The reason for the check, measured: 24 characters already cost ~1 s for (a+)+."""
    line = "a" * 22 + "!"
    t0 = time.monotonic()
    re.search(r"^(a+)+$", line)
    slow = time.monotonic() - t0
    t0 = time.monotonic()
    re.search(r"^(a|b)*$", line * 1000)
    fast = time.monotonic() - t0
    assert slow > 20 * fast


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive repeats and atomic groups need Python 3.11")
@pytest.mark.parametrize("pattern", [r"(a++)+b", r"(?>a+)+b", r"(?:foo\d+)*+"])
def test_possessive_and_atomic_are_accepted(pattern):
    assert risky_regex(pattern) is None


def test_huge_pattern_is_refused():
    assert "at most" in risky_regex("a" * (MAX_PATTERN + 1))


def _builtin_regexes():
    out = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "regex" and isinstance(v, str):
                    out.append(v)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, str) and o.startswith("re:"):
            out.append(o[3:])

    for f in sorted(SIGNATURES.glob("*.yaml")):
        walk(yaml.safe_load(f.read_text()))
    return out


def test_every_builtin_regex_is_accepted():
    regexes = _builtin_regexes()
    assert len(regexes) > 20
    assert [r for r in regexes if risky_regex(r)] == []
