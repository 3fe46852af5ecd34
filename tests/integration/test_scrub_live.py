"""Default scrubbing (issue 36) on a real hung Python process and a core of it: the secrets a user
starts a job with (``--api-key=sk-live-...``, ``--hf-token hf_...``, a git URL with a password,
tokens in the environment and in a thread name) appear in no default report format, the
placeholders and the count do (node summaries too), ``--no-redact`` shows them and says so, and the bucket id is the
same either way.  One live process for every run (suite time)."""

from __future__ import annotations

import html
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import gcore, run_hanganalyze, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed (gcore)")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "py_secrets.py"
SK = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"
HF = "hf_FakeTokenForTests0123456789abcd"
PW = "Blu3Whale-99"
GH = "ghp_FAKE0123456789abcdefghijklmnopqrstuv"  # in the environment and in a thread's name
ENV_ONLY = "wandb-env-only-9f8e7d"
SECRETS = (SK, HF, PW, GH, ENV_ONLY)
PLACEHOLDERS = ("--api-key=<redacted:api-key>", "<redacted:huggingface-token>",
                "https://builder:<redacted:url-password>@git.example.com/x.git", "upload-<redacted:github-token>")
BUILD_ID = "3f2a9c0d1e4b5a6978f0e1d2c3b4a5968778695a"
FORMATS = ("json", "text", "md", "html")


def readable(out: str) -> str:
    """What a reader of the report sees: Markdown escapes, its zero-width spaces (that keep a URL
    from becoming a link) and HTML entities undone."""
    return html.unescape(re.sub(r"\\(.)", r"\1", out)).replace("\u200b", "")


def _run(target, *args) -> str:
    res = run_hanganalyze([*target, *args], timeout=300)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")
    return readable(res.stdout.decode("utf-8"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{name: report}: each default format of the live process, its --no-redact JSON, and the
    default and --no-redact JSON of a core of it."""
    argv = [sys.executable, FIXTURE, "--api-key=%s" % SK, "--hf-token", HF, "--repo",
            "https://builder:%s@git.example.com/x.git" % PW, "--max-tokens", "512", "--key-file",
            "/etc/keys/k.pem", "--build-id", BUILD_ID]
    h = start_hung(argv, env={"HF_TOKEN": HF, "GITHUB_TOKEN": GH, "WANDB_API_KEY": ENV_ONLY})
    try:
        live = ("--pid", str(h.pid))
        out = {fmt: _run(live, "--format", fmt) for fmt in FORMATS}
        out["json-kept"] = _run(live, "--format", "json", "--no-redact")
        out["node"] = _run(live, "--format", "node")  # what --job nodes writes per node
        core = gcore(h.pid, tmp_path_factory.mktemp("scrub"))
    finally:
        h.kill()
    out["core"] = _run((str(core),), "--format", "json")
    out["core-kept"] = _run((str(core),), "--format", "json", "--no-redact")
    core.unlink()
    return out


@pytest.mark.parametrize("name", FORMATS + ("core",))
def test_no_secret_in_a_default_report(reports, name):
    out = reports[name]
    for secret in SECRETS:
        assert secret not in out, (name, secret)
    for placeholder in PLACEHOLDERS:
        assert placeholder in out, (name, placeholder)
    assert "scrubbed 4 secret-shaped value(s) (1 api-key, 1 github-token, 1 huggingface-token, 1 url-password)" in out
    for kept in ("--max-tokens", "512", "/etc/keys/k.pem", BUILD_ID):  # near misses
        assert kept in out, (name, kept)


def test_node_summary_is_scrubbed(reports):
    out = reports["node"]  # it names threads, not argv: the thread's token is the one to find
    assert GH not in out and "upload-<redacted:github-token>" in out
    assert "scrubbed 4 secret-shaped value(s)" in out


@pytest.mark.parametrize("scrubbed,kept", [("json", "json-kept"), ("core", "core-kept")])
def test_no_redact_keeps_them_and_the_bucket_is_the_same(reports, scrubbed, kept):
    a, b = json.loads(reports[scrubbed]), json.loads(reports[kept])
    kinds = {"api-key": 1, "github-token": 1, "huggingface-token": 1, "url-password": 1}
    assert a["scrubbed"] == {"values": 4, "kinds": kinds}
    assert b["scrubbed"] == {"kept": 4, "kinds": kinds}
    text = reports[kept]
    for secret in (SK, HF, PW, GH):
        assert secret in text, secret
    assert "<redacted:" not in text
    assert any("not scrubbed (--no-redact)" in w for w in b["warnings"])
    assert a["bucket"] == b["bucket"] and a["bucket"]
    assert [f["signature"] for f in a["findings"]] == [f["signature"] for f in b["findings"]]
