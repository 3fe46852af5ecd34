"""The cache of compiled signature files: it saves the parsing of files validated before and
nothing else (an edited or invalid file is always validated), and a corrupt, foreign or shared
cache is ignored."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import GOOD_SIGNATURE_YAML, run_hanganalyze  # noqa: E402

from hanganalyze.analyze import signatures as sigmod  # noqa: E402
from hanganalyze.analyze.signatures import load_signatures  # noqa: E402
from hanganalyze.errors import SignatureError  # noqa: E402

GOOD = GOOD_SIGNATURE_YAML


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "hanganalyze" / "signatures.pickle"


@pytest.fixture
def user_dir(tmp_path):
    d = tmp_path / "user"
    d.mkdir()
    (d / "mine.yaml").write_text(GOOD)
    return d


def _ids(db):
    return [(s.id, s.source, s.title) for s in db.signatures]


def test_cached_load_equals_a_full_load_and_skips_parsing(cache_home, user_dir, monkeypatch):
    full = load_signatures([user_dir])
    first = load_signatures([user_dir], use_cache=True)
    assert cache_home.is_file()
    assert oct(cache_home.parent.stat().st_mode & 0o777) == "0o700"
    assert _ids(first) == _ids(full)

    def no_parse(path):
        raise AssertionError("%s parsed again" % path)

    monkeypatch.setattr(sigmod, "load_file", no_parse)
    second = load_signatures([user_dir], use_cache=True)
    assert _ids(second) == _ids(full)
    assert second.signatures == full.signatures  # patterns come back lazily compiled, and equal
    # compiled patterns survive the round trip
    rule = [s for s in second.signatures if s.id == "my-hang"][0].clauses[0].threads[0]
    assert rule.stack[0].function.matches("my_wait") and not rule.stack[0].function.matches("other")


def test_edited_file_is_validated_again(cache_home, user_dir):
    load_signatures([user_dir], use_cache=True)
    (user_dir / "mine.yaml").write_text(GOOD.replace("severity: hang", "severity: bad"))
    with pytest.raises(SignatureError, match="severity: 'bad' is not one of"):
        load_signatures([user_dir], use_cache=True)
    (user_dir / "mine.yaml").write_text(GOOD.replace("My own hang", "Renamed"))
    db = load_signatures([user_dir], use_cache=True)
    assert [s.title for s in db.signatures if s.id == "my-hang"] == ["Renamed"]


def test_duplicate_ids_are_refused_with_every_file_cached(cache_home, user_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "copy.yaml").write_text(GOOD)
    load_signatures([user_dir], use_cache=True)
    load_signatures([other], use_cache=True)
    with pytest.raises(SignatureError, match="duplicate signature id 'my-hang'"):
        load_signatures([user_dir, other], use_cache=True)


@pytest.mark.parametrize("garbage", [b"", b"not a pickle", pickle.dumps(["a list"]), pickle.dumps({"k": "v"}),
                                     pickle.dumps({"k": b"not a pickle"})])
def test_corrupt_cache_is_ignored_and_rewritten(cache_home, user_dir, garbage):
    cache_home.parent.mkdir(mode=0o700, parents=True)
    cache_home.write_bytes(garbage)
    os.chmod(cache_home, 0o600)
    db = load_signatures([user_dir], use_cache=True)
    assert "my-hang" in [s.id for s in db.signatures]
    assert isinstance(pickle.loads(cache_home.read_bytes()), dict)


def test_cache_writable_by_others_is_not_loaded(cache_home, user_dir):
    """A pickle runs code when loaded: one that another user could have written is never read."""
    load_signatures([user_dir], use_cache=True)
    entries = pickle.loads(cache_home.read_bytes())
    for key, blob in entries.items():  # each file's signatures are pickled on their own
        sigs = pickle.loads(blob)
        for s in sigs:
            s.title = "forged"
        entries[key] = pickle.dumps(sigs)
    cache_home.write_bytes(pickle.dumps(entries))
    os.chmod(cache_home.parent, 0o777)
    db = load_signatures([user_dir], use_cache=True)
    assert "forged" not in [s.title for s in db.signatures]


def test_cli_with_cache_rejects_invalid_user_file(tmp_path, user_dir):
    env_home = tmp_path / "cli-cache"
    text = tmp_path / "t.txt"
    text.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nValueError: x\n")
    os.environ["XDG_CACHE_HOME"] = str(env_home)
    try:
        res = run_hanganalyze([text, "--signatures", user_dir, "--format", "json"])
        assert res.returncode in (0, 3, 5, 6), res.stderr
        assert (env_home / "hanganalyze" / "signatures.pickle").is_file()
        (user_dir / "mine.yaml").write_text(GOOD.replace("severity: hang", "severity: bad"))
        res = run_hanganalyze([text, "--signatures", user_dir])
        assert res.returncode == 2 and "severity: 'bad'" in res.stderr.decode()
    finally:
        del os.environ["XDG_CACHE_HOME"]


def test_data_files_are_parsed_once(tmp_path, monkeypatch):
    """The triage table, the rule list and the frame lists are read from a JSON cache of their parse
    (no yaml import on a warm run, issue 21): the same data and lines, an edit or a corrupt entry
    parsed again, an error still one line."""
    from hanganalyze.analyze.rules import _rule_lines, load_rules, read_rules, rules_path

    monkeypatch.setenv("HANGANALYZE_CACHE_DIR", str(tmp_path / "c"))
    src = tmp_path / "waits.yaml"
    src.write_text("a: [1, 'x']\nb: {c: true}\n")
    calls = []
    real = sigmod.read_yaml
    monkeypatch.setattr(sigmod, "read_yaml", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert sigmod.read_data_file(src) == ({"a": [1, "x"], "b": {"c": True}}, None)
    assert sigmod.read_data_file(src) == ({"a": [1, "x"], "b": {"c": True}}, None) and len(calls) == 1
    src.write_text("a: 2\n")
    assert sigmod.read_data_file(src) == ({"a": 2}, None) and len(calls) == 2
    (entry,) = (tmp_path / "c" / "data").glob("waits-*.json")  # the older entry is gone
    entry.write_text("{not json")
    assert sigmod.read_data_file(src) == ({"a": 2}, None) and len(calls) == 3
    src.write_text("a: 2001-01-01\n")  # not JSON data: parsed every time, the same
    assert sigmod.read_data_file(src)[0] == sigmod.read_yaml(src, trusted=True)[0]
    src.write_text("a: [\n")
    with pytest.raises(SignatureError, match=r"waits.yaml:\d+: invalid YAML"):
        sigmod.read_data_file(src)
    assert read_rules(rules_path(), validate=False, cached=True) == read_rules(rules_path(), validate=False)
    assert read_rules(rules_path(), validate=False, cached=True) == load_rules()
    lines = [int(r.source.rsplit(":", 1)[1]) for r in load_rules().rules]
    assert lines == _rule_lines(*sigmod.read_yaml(rules_path(), trusted=True)) and lines[0] > 1
