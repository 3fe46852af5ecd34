"""Signature fragments (``fragments.yaml``, ``use: NAME``) and the frame lists (``signatures/lists/``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import GOOD_SIGNATURE_YAML  # noqa: E402

from hanganalyze.analyze import framelists  # noqa: E402
from hanganalyze.analyze.signatures import builtin_dir, load_signatures, signature_files  # noqa: E402
from hanganalyze.errors import SignatureError  # noqa: E402
from hanganalyze.names import library_base, library_version, split_library  # noqa: E402


def folder(tmp_path: Path, step: str, fragments: str = "") -> Path:
    d = tmp_path / "user"
    d.mkdir()
    (d / "mine.yaml").write_text(GOOD_SIGNATURE_YAML.replace("{function: my_wait}", step))
    if fragments:
        (d / "fragments.yaml").write_text(fragments)
    return d


def only_step(d: Path):
    return load_signatures([d], builtin=False).signatures[0].clauses[0].threads[0].stack[0]


def test_builtin_fragment_expands_with_own_keys_winning(tmp_path):
    step = only_step(folder(tmp_path, "{use: blocked, within: 3}"))
    assert step.within == 3 and step.text == "blocked in a wait"
    assert step.function.matches("__GI___pthread_cond_wait") and not step.function.matches("my_wait")
    assert step.stripped is not None


def test_folder_fragments_can_build_on_builtin_ones(tmp_path):
    d = folder(tmp_path, "{use: mine}", "fragments:\n  mine: {use: aborted, function: my_wait}\n")
    step = only_step(d)
    assert step.text == "abort" and step.within == 6 and step.function.matches("my_wait")
    assert [p.name for p in signature_files(d)] == ["mine.yaml"]  # fragments.yaml is no signature file


@pytest.mark.parametrize("step, fragments, expect", [
    ("{use: blockd}", "", r"mine.yaml:13: use: unknown fragment 'blockd' \(known: aborted, blocked"),
    ("{use: a}", "fragments:\n  a: {use: b}\n  b: {use: a}\n", r"fragments.yaml:2: a: fragment cycle: a -> b -> a"),
    ("{use: a}", "fragments:\n  a: {funtcion: x}\n", r"fragments.yaml:2: a: .*'funtcion' was unexpected"),
    ("{use: a}", "fragments:\n  blocked: {function: x}\n", r"'blocked' is already defined in"),
])
def test_broken_fragments_are_one_line_errors(tmp_path, step, fragments, expect):
    with pytest.raises(SignatureError, match=expect) as e:
        load_signatures([folder(tmp_path, step, fragments)], builtin=False)
    assert "\n" not in str(e.value)


def test_every_list_file_loads():
    files = sorted((builtin_dir() / "lists").glob("*.yaml"))
    assert files
    readers = {"names": framelists.names, "regex": framelists.pattern, "python_frames": framelists.python_frames}
    for f in files:
        kind = framelists._load(f.stem)[1]["kind"]
        assert readers[kind](f.stem), f


def test_broken_list_file_is_a_one_line_error(tmp_path, monkeypatch):
    (tmp_path / "bad.yaml").write_text("kind: regex\nentries: ['(a+)+']\n")
    monkeypatch.setattr(framelists, "lists_dir", lambda: tmp_path)
    framelists._load.cache_clear()
    framelists.pattern.cache_clear()
    try:
        with pytest.raises(SignatureError, match=r"bad.yaml: unsafe regex"):
            framelists.pattern("bad")
    finally:
        framelists._load.cache_clear()
        framelists.pattern.cache_clear()


@pytest.mark.parametrize("path, base, version", [
    ("/usr/lib/libnccl.so.2.21.5", "libnccl.so", "2.21.5"),
    ("libc.so.6", "libc.so", "6"),
    ("libfoo-1.2.3.so", "libfoo-1.2.3.so", "1.2.3"),
    ("libtorch_cuda.so", "libtorch_cuda.so", None),
    ("libx.so.1.", "libx.so", None),
    (None, "", None),
])
def test_one_library_name_parser(path, base, version):
    assert split_library(path) == (base, version)
    assert library_base(path) == base and library_version(path) == version


def test_a_steps_source_regex_is_compiled_and_guarded(tmp_path):
    """``source:`` (a frame's source line) compiles into the step; an exponential regex is refused."""
    step = only_step(folder(tmp_path, "{kind: python, source: ['^with\\s+\\w+:', '\\.acquire\\(']}"))
    assert step.source.search("with lock:") and step.source.search("self._cv.acquire()")
    assert not step.source.search("with open(path):")
    (tmp_path / "b").mkdir()
    with pytest.raises(SignatureError, match=r"unsafe regex") as e:
        load_signatures([folder(tmp_path / "b", "{kind: python, source: '(a+)+$'}")], builtin=False)
    assert "\n" not in str(e.value)
