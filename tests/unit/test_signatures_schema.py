"""Loading signature files: schema errors with file:line, YAML errors, bad regexes, duplicate ids,
user folders merged with the built-ins, and the `hanganalyze signatures` sub-commands."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import GOOD_SIGNATURE_YAML, run_hanganalyze  # noqa: E402

from hanganalyze.analyze.signatures import builtin_dir, load_file, load_signatures  # noqa: E402
from hanganalyze.errors import SignatureError  # noqa: E402

GOOD = GOOD_SIGNATURE_YAML


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def err(path: Path) -> str:
    with pytest.raises(SignatureError) as e:
        load_file(path)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_builtin_database_is_valid_and_large():
    db = load_signatures()
    assert len(db.signatures) >= 30
    ids = [s.id for s in db.signatures]
    assert len(ids) == len(set(ids))
    for required in ("nccl-destroy-with-live-cuda-graph", "tf-resourcemgr-clear-cleanup-deadlock",
                     "std-thread-joinable-terminate", "tf-nccl-reduce-feed-fetch-devices"):
        assert required in ids
    for s in db.signatures:
        assert s.fix and s.references and all(r.startswith("https://") for r in s.references)
        for f in s.fix:  # an unquoted '#' in YAML starts a comment and silently cuts the text
            for v in (f.get("version") or "", f["text"]):
                assert not v.rstrip().endswith(("PR", "PRs", "with")), (s.id, v)
    assert (builtin_dir() / "schema.json").is_file()


def test_bad_severity_names_file_and_line(tmp_path):
    p = write(tmp_path, "foo.yaml", GOOD.replace("severity: hang", "severity: bad"))
    msg = err(p)
    assert msg.startswith("%s:4: severity: 'bad' is not one of" % p), msg


def test_missing_key_points_at_the_signature(tmp_path):
    p = write(tmp_path, "foo.yaml", GOOD.replace("    cause: The worker waits for a reply that never comes.\n", ""))
    msg = err(p)
    assert ":2:" in msg and "'cause' is a required property" in msg


def test_unknown_step_key(tmp_path):
    p = write(tmp_path, "foo.yaml", GOOD.replace("{function: my_wait}", "{function: my_wait, funtcion: x}"))
    msg = err(p)
    assert ":13:" in msg and "funtcion" in msg


def test_bad_regex_is_reported_with_line(tmp_path):
    p = write(tmp_path, "foo.yaml", GOOD.replace("{function: my_wait}", "{function: 're:my_(wait'}"))
    msg = err(p)
    assert ":13:" in msg and "bad regex" in msg


def test_yaml_syntax_error(tmp_path):
    p = write(tmp_path, "foo.yaml", GOOD.replace("title: My own hang", "title: [unclosed"))
    msg = err(p)
    assert "invalid YAML" in msg and p.name in msg


def test_yaml_tags_that_build_objects_are_refused(tmp_path):
    p = write(tmp_path, "foo.yaml", GOOD.replace("title: My own hang", "title: !!python/object/apply:os.system [x]"))
    msg = err(p)
    assert "invalid YAML" in msg


def test_within_only_on_first_step(tmp_path):
    two_steps = "- {function: a}\n            - {function: b, within: 2}"
    p = write(tmp_path, "foo.yaml", GOOD.replace("- {function: my_wait}", two_steps))
    msg = err(p)
    assert "within" in msg and ":14:" in msg


def test_duplicate_ids_across_folders(tmp_path):
    d = tmp_path / "user"
    d.mkdir()
    write(d, "a.yaml", GOOD.replace("my-hang", "std-thread-joinable-terminate"))
    with pytest.raises(SignatureError) as e:
        load_signatures([d])
    assert "duplicate signature id 'std-thread-joinable-terminate'" in str(e.value)
    assert "first defined at" in str(e.value)


def test_user_folder_merges_with_builtins(tmp_path):
    d = tmp_path / "user"
    d.mkdir()
    write(d, "mine.yaml", GOOD)
    db = load_signatures([d])
    assert db.by_id("my-hang") is not None
    assert db.by_id("nccl-destroy-with-live-cuda-graph") is not None


def test_missing_folder(tmp_path):
    with pytest.raises(SignatureError) as e:
        load_signatures([tmp_path / "nope"])
    assert "no such signature folder" in str(e.value)


def test_cli_validate_and_list(tmp_path):
    d = tmp_path / "user"
    d.mkdir()
    write(d, "mine.yaml", GOOD)
    res = run_hanganalyze(["signatures", "list", "--signatures", d])
    assert res.returncode == 0
    out = res.stdout.decode()
    assert "my-hang" in out and "nccl-destroy-with-live-cuda-graph" in out
    res = run_hanganalyze(["signatures", "validate", "--signatures", d])
    assert res.returncode == 0 and "signatures valid" in res.stdout.decode()

    write(d, "broken.yaml", GOOD.replace("my-hang", "other").replace("severity: hang", "severity: bad"))
    res = run_hanganalyze(["signatures", "validate", "--signatures", d])
    assert res.returncode == 2
    err_lines = res.stderr.decode().strip().splitlines()
    assert len(err_lines) == 1 and "broken.yaml:4: severity: 'bad' is not one of" in err_lines[0]
    assert "Traceback" not in res.stderr.decode()


def test_analysis_refuses_to_run_with_invalid_signatures(tmp_path):
    d = tmp_path / "user"
    d.mkdir()
    write(d, "broken.yaml", GOOD.replace("severity: hang", "severity: bad"))
    text = tmp_path / "t.txt"
    text.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nValueError: x\n")
    res = run_hanganalyze([text, "--signatures", d])
    assert res.returncode == 2 and "severity: 'bad'" in res.stderr.decode()
