"""Default scrubbing (issue 36, ``analyze/scrub.py`` and ``signatures/redact/secrets.yaml``): every
secret kind found with its kind, the near misses kept, a pasted traceback's URL password gone from
every format, ``--no-redact`` keeping it, and bucket ids alike with and without scrubbing."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from hanganalyze import cli
from hanganalyze.analyze import scrub as scrubmod
from hanganalyze.analyze.scrub import Rules, Scrubber, scrub
from hanganalyze.errors import SignatureError
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0t\n-----END RSA PRIVATE KEY-----"
#: (text holding a secret, the secret, its kind)
FOUND = [
    ("--aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws-access-key"),
    ("g=AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "google-api-key"),
    ("push ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github-token"),
    ("gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345 x", "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "github-token"),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghij", "github_pat_11ABCDEFG0123456789_abcdefghij", "github-token"),
    ("model hf_FakeTokenForTests0123456789abcd", "hf_FakeTokenForTests0123456789abcd", "huggingface-token"),
    ("openai sk-proj-abcdefghijklmnop1234", "sk-proj-abcdefghijklmnop1234", "api-key"),
    ("x sk-live-4eC39HqLyjWDarjtT1zdp7dc", "sk-live-4eC39HqLyjWDarjtT1zdp7dc", "api-key"),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij", "slack-token"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "jwt"),
    ("key:\n" + PEM + "\nrest", PEM, "private-key"),
    ("Authorization: Bearer abcdefghijklmnop1234", "abcdefghijklmnop1234", "bearer-token"),
    ("git clone https://builder:Blu3Whale-99@git.example.com/x.git", "Blu3Whale-99", "url-password"),
    ("train.py --api-key=plainvalue42", "plainvalue42", "key"),
    ("train.py --hf-token   tok3nvalue", "tok3nvalue", "token"),
    ("PASSWORD=hunter2x and", "hunter2x", "password"),
    ("DB_PASSWD=qwerty99", "qwerty99", "password"),
    ("cfg {'secret': 'opensesame'}", "opensesame", "secret"),
    ('{"token": "abcd1234zz", "max_tokens": 100}', "abcd1234zz", "token"),
    ("apiKey=camelCase99", "camelCase99", "key"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI/K7MDENG", "key"),
    ("--auth u1:p4ssw0rd", "u1:p4ssw0rd", "auth"),
    ("GOOGLE_APPLICATION_CREDENTIALS_JSON=blobblob", "blobblob", "credential"),
]
#: Text that only looks like a secret.
NEAR_MISSES = [
    "build-id 3f2a9c0d1e4b5a6978f0e1d2c3b4a5968778695a",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "commit 4754b2d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70",
    "/data/runs/550e8400-e29b-41d4-a716-446655440000/ckpt.pt",
    "--max-tokens 512", "--max-tokens=4096", "max_new_tokens=128", "--key-file /etc/keys/k.pem",
    "--token-dir ./toks", "--ssl-key ~/certs/k.pem", "--tokenizer gpt2", "--monkey banana",
    "TOKENIZERS_PARALLELISM=false", "--auth-type basic", '{"key": "rank", "keys": [0, 2]}', "key=rank0",
    "HF_TOKEN=$HF_TOKEN", "--password", "the token is invalid", "pass=abc", "task-sk-short",
    "desk-abcdefghijklmnopqrstuvwxyz", "https://github.com/pytorch/pytorch/issues/1",
    "see -----BEGIN CERTIFICATE----- MIIB", "--push-to-hub true", "--use-auth-token",
    '--pad-token "[PAD]"', "--eos-token </s>", "--sort-key length", "--key-column text", "cache key=abc123",
    "--num-key-value-heads 8", "MY_KEY=whatever",
]


@pytest.mark.parametrize("text,secret,kind", FOUND, ids=[f[2] + str(i) for i, f in enumerate(FOUND)])
def test_every_kind_is_found_and_replaced(text, secret, kind):
    s = Scrubber()
    s.discover(text)
    assert s.found == {secret: kind}
    out = s.replace(text)
    assert secret not in out and "<redacted:%s>" % kind in out


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_kept(text):
    s = Scrubber()
    s.discover(text)
    assert s.found == {}


def test_argv_flag_then_value_and_token_shape_kind():
    s = Scrubber()
    s.discover_list(["python", "--hf-token", "hf_zzzzzzzzzzzzzzzzzzzzzz", "--password", "abcdef", "--max-tokens",
                     "512", "--key-file", "/etc/k.pem", "--token", "--verbose"])
    assert s.found == {"hf_zzzzzzzzzzzzzzzzzzzzzz": "huggingface-token", "abcdef": "password"}


def _snapshot(argv, name="worker"):
    t = Thread(tid=7, name=name, frames=[Frame(kind="python", function="run", file="/app/train.py", line=3)])
    return Snapshot(processes=[Process(source="core", pid=7, argv=argv, threads=[t], messages=["started"])])


def test_found_value_goes_everywhere_and_count_is_said():
    snap = _snapshot(["python", "--api-key=sk-live-4eC39HqLyjWDarjtT1zdp7dc"],
                     name="upload-sk-live-4eC39HqLyjWDarjtT1zdp7dc")
    assert scrub(snap) == (1, {"api-key": 1})
    p = snap.processes[0]
    assert p.argv[1] == "--api-key=<redacted:api-key>"
    assert p.threads[0].name == "upload-<redacted:api-key>"
    d = snap.to_dict()
    assert d["scrubbed"] == {"values": 1, "kinds": {"api-key": 1}}
    assert any(w.startswith("scrubbed 1 secret-shaped value(s) (1 api-key)") for w in d["warnings"])


def test_nothing_found_leaves_the_report_unchanged():
    snap = _snapshot(["python", "train.py", "--max-tokens", "512"])
    before = json.dumps(snap.to_dict())
    assert scrub(snap) == (0, {})
    assert json.dumps(snap.to_dict()) == before and "scrubbed" not in before


def test_keep_counts_and_says_so():
    snap = _snapshot(["python", "--password", "hunter2x"])
    scrub(snap, keep=True)
    assert snap.processes[0].argv[2] == "hunter2x"
    assert snap.scrubbed == {"kept": 1, "kinds": {"password": 1}}
    assert any("--no-redact" in w and "kept" in w for w in snap.warnings)


@pytest.mark.parametrize("data,match", [
    ({"tokens": {"x": "(?:a+)+"}}, r"tokens: x: unsafe regex"),
    ({"tokens": {"x": "(ab)"}}, r"tokens: x: 1 capturing group"),
    ({"tokens": {"x": "["}}, r"tokens: x: invalid regex"),
    ({"names": {"token": "token"}}, r"tokens: missing"),
])
def test_broken_data_is_a_one_line_error(data, match):
    base = {"names": {"token": "token"}, "keep_names": "file", "key_qualifiers": "api", "keep_before": "max",
            "keep_values": r"\d+",
            "url_password": "://[^:]+:([^@]+)@"}
    if "tokens" not in data:
        base.pop("tokens", None)
    with pytest.raises(SignatureError, match=match) as e:
        Rules({**base, **data}, "secrets.yaml")
    assert "\n" not in str(e.value)


def test_the_data_file_is_read_through_the_signature_folder():
    scrubmod.rules.cache_clear()
    r = scrubmod.rules()
    assert "github-token" in r.kinds and "private-key" in r.kinds


PASTE = """\
Traceback (most recent call last):
  File "/app/sync.py", line 12, in <module>
    repo.fetch()
  File "/app/sync.py", line 8, in fetch
    raise RuntimeError("fetch failed")
RuntimeError: fetch failed for https://deploy:Sup3rS3cretPw@git.example.com/team/repo.git token=tok3nvalue99
"""
PASTE_SECRETS = ("Sup3rS3cretPw", "tok3nvalue99")


def _cli(tmp_path: Path, fmt: str, *extra: str) -> str:
    src = tmp_path / "paste.txt"
    src.write_text(PASTE)
    out = tmp_path / ("report-%s-%d.%s" % (fmt, len(extra), {"text": "txt"}.get(fmt, fmt)))
    assert cli.run([str(src), "--format", fmt, "-o", str(out), *extra]) in (0, 3, 5, 6)
    return html.unescape(re.sub(r"\\(.)", r"\1", out.read_text()))


@pytest.mark.parametrize("fmt", ["json", "text", "md", "html"])
def test_pasted_url_credentials_are_gone_from_every_format(tmp_path, fmt):
    out = _cli(tmp_path, fmt)
    for secret in PASTE_SECRETS:
        assert secret not in out, (fmt, secret)
    assert "scrubbed 2 secret-shaped value(s) (1 token, 1 url-password)" in out
    if fmt == "json":  # the exception's message is kept in the JSON (the other formats do not show it)
        assert "https://deploy:<redacted:url-password>@git.example.com" in out and "token=<redacted:token>" in out


def test_pasted_no_redact_keeps_them_and_buckets_agree(tmp_path):
    scrubbed = json.loads(_cli(tmp_path, "json"))
    kept = json.loads(_cli(tmp_path, "json", "--no-redact"))
    assert scrubbed["scrubbed"] == {"values": 2, "kinds": {"token": 1, "url-password": 1}}
    assert kept["scrubbed"] == {"kept": 2, "kinds": {"token": 1, "url-password": 1}}
    text = json.dumps(kept)
    assert all(secret in text for secret in PASTE_SECRETS)
    assert scrubbed["bucket"] == kept["bucket"] and scrubbed["bucket"]
    assert [f["signature"] for f in scrubbed["findings"]] == [f["signature"] for f in kept["findings"]]


def test_redact_and_no_redact_together_is_a_usage_error(tmp_path, capsys):
    src = tmp_path / "paste.txt"
    src.write_text(PASTE)
    assert cli.run([str(src), "--redact", "--no-redact"]) != 0
    assert "contradict" in capsys.readouterr().err


HOSTILE = {
    "pem": "-----BEGIN PRIVATE KEY----- " * 3500 + "!",
    "dashes": "-a-a-a-" * 15000 + "=x",
    "flag-words": "--token-token-" * 8000,
    "quotes": "'a" * 50000,
    "settings": "A_TOKEN_" * 12000 + "=",
    "flags": "-a " * 30000,
    "sk": "sk-" + "a-" * 50000 + "!",
    "url": "https://" + "a:" * 40000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_strings_scan_in_linear_time(name):
    """Core strings are untrusted (a 100 KB thread name): each rule must read them once.  A
    quadratic rule takes seconds on these (measured: each is under 0.15 s on a loaded machine)."""
    import time

    s = Scrubber()
    t0 = time.perf_counter()
    s.discover(HOSTILE[name])
    assert time.perf_counter() - t0 < 2.0


def test_raw_lines_beside_a_report_are_scrubbed_too():
    """watch's log tail: the job's own output, which may echo its command line."""
    from hanganalyze.analyze.scrub import scrub_lines

    lines = ["launching train.py --hf-token=hf_abcdefghijklmnopqrstuvwxyz0123 --max-tokens 512",
             "step 3 loss 0.1", "again hf_abcdefghijklmnopqrstuvwxyz0123"]
    out = scrub_lines(lines)
    assert not any("hf_abcdefghijklmnopqrstuvwxyz0123" in x for x in out) and "--max-tokens 512" in out[0]
    assert out[1] == lines[1] and "<redacted:" in out[2]
    assert scrub_lines(["nothing secret here"]) == ["nothing secret here"]
