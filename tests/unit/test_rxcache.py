"""rxcache: the cached opcodes give the pattern re.compile gives; bad patterns fail as they did."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from hanganalyze import rxcache

PATTERNS = [
    (r"^(abort|raise|pthread_kill\w*)$", 0),
    (r"(?P<rank>\d+)-(?P=rank)|(?:x)", re.IGNORECASE),
    (r"(?<!\s)\s*\[clone [^\]]*\]", 0),
    (rb"\x00+[a-z]{2,}", 0),
    (r"^(?:libc[.-])|(?:libpthread)", re.I | re.M),
]


def _fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rxcache, "_entries", None)
    monkeypatch.setattr(rxcache, "_dirty", False)


@pytest.mark.parametrize("pattern,flags", PATTERNS)
def test_same_pattern_from_the_cache(monkeypatch, tmp_path, pattern, flags):
    _fresh(monkeypatch, tmp_path)
    first = rxcache.compile(pattern, flags)
    assert first == re.compile(pattern, flags)
    rxcache._save()
    monkeypatch.setattr(rxcache, "_entries", None)
    again = rxcache.compile(pattern, flags)
    assert again == re.compile(pattern, flags) and again.groupindex == re.compile(pattern, flags).groupindex
    assert (again.pattern, again.flags, again.groups) == (first.pattern, first.flags, first.groups)


def test_bad_pattern_raises_re_error(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    with pytest.raises(re.error):
        rxcache.compile("(unclosed")


def test_off_and_corrupt_cache(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", "off")
    assert rxcache.compile("a+b") == re.compile("a+b")
    _fresh(monkeypatch, tmp_path)
    path = rxcache._file()
    if path is None:
        pytest.skip("no cache on this Python")
    (tmp_path / "rx").mkdir(mode=0o700)
    with open(path, "wb") as f:
        f.write(b"not marshal")
    assert rxcache.compile("a+b") == re.compile("a+b")


def test_written_at_exit(tmp_path):
    code = "from hanganalyze import rxcache; rxcache.compile('x(y)+z')"
    env = {"HANGANALYZE_CACHE_DIR": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    if sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)):
        assert list((tmp_path / "rx").glob("rx-*.marshal"))
