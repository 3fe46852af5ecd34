"""``--redact`` on the core of a real process whose argv, file paths and thread names carry
personal data and secrets: none of it survives in any format, while the unredacted report shows
that the values really were there (so the test can fail).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import gcore, pyenv_pythons, run_hanganalyze, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

SCRIPT = '''
import ctypes, sys, threading
libc = ctypes.CDLL(None)
stop = threading.Event()

def loader_for_alice():
    libc.prctl(15, b"alice-abc123sec", 0, 0, 0)   # OS thread name too
    stop.wait()

t = threading.Thread(target=loader_for_alice, name="alice-loader-abc123secret-10.20.30.40", daemon=True)
t.start()
print("READY", flush=True)
stop.wait()
'''

PLANTED = ["alice", "abc123secret", "abc123sec", "hunter2pw", "10.20.30.40", "gpu07.cluster.example.com",
           "wandbkey999", "fd00::1234:5678"]


def readable(out: str) -> str:
    """What a reader of the report sees: Markdown escapes and HTML entities undone."""
    return html.unescape(re.sub(r"\\(.)", r"\1", out))


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    py = pyenv_pythons().get("3.12") or next(iter(pyenv_pythons().values()), None)
    if py is None:
        pytest.skip("no pyenv Python")
    root = tmp_path_factory.mktemp("redact")
    proj = root / "home" / "alice" / "proj"
    proj.mkdir(parents=True)
    script = proj / "train_alice.py"
    script.write_text(SCRIPT)
    argv = [py, script, "--token=abc123secret", "--password", "hunter2pw", "--master-addr", "10.20.30.40",
            "--host", "gpu07.cluster.example.com", "WANDB_API_KEY=wandbkey999", "--peer", "fd00::1234:5678"]
    h = start_hung(argv, ready="READY", settle=0.3)
    try:
        path = gcore(h.pid, root / "cores")
    finally:
        h.kill()
    yield path
    path.unlink()


def _run(core: Path, *args) -> str:
    res = run_hanganalyze([core, *args], timeout=300)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")
    return res.stdout.decode("utf-8")


def test_values_are_in_the_unredacted_report(core):
    data = json.loads(_run(core, "--no-redact", "--format", "json"))  # secrets are scrubbed by default
    text = json.dumps(data)
    for value in ("alice", "abc123secret", "hunter2pw", "10.20.30.40", "gpu07.cluster.example.com", "wandbkey999"):
        assert value in text, value
    names = [t.get("name") for t in data["processes"][0]["threads"]]
    assert any(n and "alice" in n for n in names), names  # the thread name reached the report too


@pytest.mark.parametrize("fmt", ["json", "text", "md", "html"])
def test_nothing_survives_redaction(core, fmt):
    out = readable(_run(core, "--redact", "--format", fmt))
    for value in PLANTED:
        assert value not in out, (fmt, value)
    for placeholder in ("<user1>", "<redacted:token>", "<redacted:password>", "<ip1>", "<host1>"):
        assert placeholder in out, (fmt, placeholder)
    assert "python3" in out  # the rest of the report is still there


def test_placeholders_are_stable_across_fields(core):
    data = json.loads(_run(core, "--redact", "--format", "json"))
    p = data["processes"][0]
    script = p["argv"][1]
    assert re.search(r"/home/<user\d+>/proj/train_<user\d+>\.py$", script), script
    user = re.search(r"<user\d+>", script).group(0)
    token = p["argv"][2].split("=", 1)[1]
    assert token == "<redacted:token>"  # the default scrubbing's placeholder, kept by --redact
    pyframes = [f for t in p["threads"] for f in t["frames"] if f["kind"] == "python"]
    assert any(("/home/%s/proj/" % user) in (f.get("file") or "") for f in pyframes)
    names = [t.get("name") or "" for t in p["threads"]]
    assert any(n.startswith(user + "-loader-" + token) for n in names), names
