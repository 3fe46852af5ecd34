"""Hostile user signature folders (--signatures): every one ends in a SignatureError line, quickly.

The loader refuses each: yaml_guard.check_node on the composed node, RecursionError caught in
``read_yaml``, regex_guard.risky_regex in ``_compile_signature``, schema messages shortened.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from hanganalyze.analyze.signatures import load_signatures
from hanganalyze.analyze.yaml_guard import check_node
from hanganalyze.errors import SignatureError

SIGNATURES = Path(__file__).resolve().parents[2] / "signatures"

BOMB = textwrap.dedent("""\
    common:
      a: &a ["x","x","x","x","x","x","x","x","x"]
      b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
      c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
      d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
      e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
      f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
      g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
      h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
      i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    signatures:
      - id: laughs
        title: billion laughs
        severity: hang
        cause: an alias bomb in the references list
        fix: [{kind: code, text: nothing to fix}]
        references: *i
        match:
          messages: [{rule: r, regex: "x"}]
    """)


def one_sig(match: str, sig_id: str = "user-sig") -> str:
    return textwrap.dedent("""\
        signatures:
          - id: %s
            title: a user signature
            severity: hang
            cause: written by a user, maybe hostile
            fix: [{kind: code, text: nothing to fix}]
            references: [https://example.org/x]
            match:
        """) % sig_id + textwrap.indent(match, "      ")


def folder(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "sigs.yaml").write_text(text)
    return d


# ----------------------------------------------------------------------------- yaml_guard


def _node(text: str):
    return yaml.SafeLoader(text).get_single_node()


def test_guard_refuses_alias_bomb():
    assert "alias bomb" in check_node(_node(BOMB))


def test_guard_refuses_recursive_alias():
    assert "recursive alias" in check_node(_node("common: &x [1, *x]\n"))


def test_guard_refuses_deep_nesting():
    assert "levels deep" in check_node(_node("a: " + "[" * 150 + "]" * 150))


def test_guard_accepts_every_builtin_file():
    files = sorted(SIGNATURES.glob("*.yaml"))
    assert files
    for f in files:
        assert check_node(_node(f.read_text())) is None, f


# ------------------------------------------------------------------ what already holds


def test_python_object_tags_are_refused_by_safe_loading(tmp_path):
    marker = tmp_path / "pwned"
    d = folder(tmp_path, "tags", "signatures: !!python/object/apply:os.system ['touch %s']\n" % marker)
    with pytest.raises(SignatureError, match="could not determine a constructor"):
        load_signatures([d])
    assert not marker.exists()


def test_duplicate_ids_across_files(tmp_path):
    d = tmp_path / "dup"
    d.mkdir()
    (d / "a.yaml").write_text(one_sig('messages: [{rule: r, regex: "x"}]\n'))
    (d / "b.yaml").write_text(one_sig('messages: [{rule: r, regex: "y"}]\n'))
    with pytest.raises(SignatureError, match="duplicate signature id 'user-sig'"):
        load_signatures([d])


def test_binary_file_and_bad_folders(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    (d / "x.yaml").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(SignatureError, match="cannot read"):
        load_signatures([d])
    with pytest.raises(SignatureError, match="no such signature folder"):
        load_signatures([tmp_path / "missing"])
    (tmp_path / "file.yaml").write_text("x")
    with pytest.raises(SignatureError, match="not a folder"):
        load_signatures([tmp_path / "file.yaml"])


# ---------------------------------------------------------- fixes pending in signatures.py


def test_alias_bomb_is_refused_quickly(tmp_path):
    d = folder(tmp_path, "bomb", BOMB)
    code = ("from hanganalyze.analyze.signatures import load_signatures\n"
            "from hanganalyze.errors import SignatureError\n"
            "try:\n    load_signatures([%r])\nexcept SignatureError as e:\n    print('REFUSED', e)\n" % str(d))
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("loading an alias bomb did not finish in 10 s")
    assert res.stdout.startswith(b"REFUSED"), res.stderr[-500:]


def test_schema_error_line_is_short(tmp_path):
    d = folder(tmp_path, "long", one_sig('messages: [{rule: r, regex: "x"}]\n').replace(
        "severity: hang", "severity: " + "h" * 50_000))
    with pytest.raises(SignatureError) as e:
        load_signatures([d])
    assert len(str(e.value)) < 1000


def test_deeply_nested_yaml_is_a_signature_error(tmp_path):
    d = folder(tmp_path, "deep", "signatures: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SignatureError):
        load_signatures([d])


@pytest.mark.parametrize("match", [
    'messages: [{rule: r, regex: "^(a+)+$"}]\n',
    'threads:\n  - rule: t\n    stack: [{function: "re:^(\\\\w+\\\\s?)*$"}]\n',
])
def test_catastrophic_regex_is_refused_at_load(tmp_path, match):
    d = folder(tmp_path, "redos", one_sig(match))
    with pytest.raises(SignatureError, match="regex"):
        load_signatures([d])


@pytest.mark.parametrize("name", ["f" + " " * 20_000 + "x", "x" + ".isra" * 4_000 + "!", "g" + "\t" * 20_000 + "y"],
                         ids=["spaces", "isra-chain", "tabs"])
def test_normalize_function_is_linear(name):
    import time

    from hanganalyze.names import normalize_function

    t0 = time.monotonic()
    normalize_function(name)
    assert time.monotonic() - t0 < 0.2


def test_signatures_list_escapes_terminal_controls(tmp_path):
    import shutil

    d = folder(tmp_path, "esc", one_sig('messages: [{rule: r, regex: "zzz-never"}]\n').replace(
        "title: a user signature", 'title: "evil \\e]0;pwned\\a\\e[2J title"'))
    exe = shutil.which("hanganalyze")
    cmd = [exe] if exe else [sys.executable, "-m", "hanganalyze"]
    res = subprocess.run(cmd + ["signatures", "list", "--signatures", str(d)], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    line = [ln for ln in res.stdout.decode().splitlines() if ln.startswith("user-sig")]
    assert line and "\x1b" not in line[0] and "\x07" not in line[0]
