"""Redaction on parsed data: planted values vanish from every format, placeholders stay stable."""

from __future__ import annotations

import html
import json
import re

import pytest

from hanganalyze.analyze.redact import redact
from hanganalyze.render import render
from hanganalyze_gdbext.model import DistIdentity, Evidence, Finding, Frame, Process, Snapshot, Thread, Wait

SECRETS = ["abc123xyz", "hunter2", "hf_aaaaaaaaaaaaaaaaaaaaaa", "s3cr3tvalue", "pw1234", "AKIAABCDEFGHIJKLMNOP"]
PRIVATE = ["alice", "bob", "gpu07.cluster.example.com", "10.1.2.3", "fe80::1ff:fe23:4567:890a", "192.168.0.1",
           "myhost", "carol@corp.example.com"]


def planted() -> Snapshot:
    argv = [
        "/home/alice/venv/bin/python", "/tmp/x/home/alice/proj/train.py", "--token=abc123xyz", "--password", "hunter2",
        "HF_TOKEN=hf_aaaaaaaaaaaaaaaaaaaaaa", "--master-addr", "10.1.2.3", "--host", "gpu07.cluster.example.com",
        "--v6", "fe80::1ff:fe23:4567:890a", "https://bob:pw1234@github.com/org/repo", "AWS=AKIAABCDEFGHIJKLMNOP",
        "DB_SECRET_VALUE=s3cr3tvalue",
    ]
    t = Thread(
        tid=11,
        name="alice-loader abc123xyz",
        frames=[
            Frame(kind="python", function="load", file="/Users/alice/code/data.py", line=3),
            Frame(kind="native", function="c10d::ProcessGroupNCCL::runLoop(int)", library="/usr/lib/libtorch_cuda.so"),
            Frame(kind="native", function="main", library="/home/alice/venv/bin/python", address=0x401000),
        ],
        waits=Wait(kind="mutex", resource="0x1", detail="peer myhost 192.168.0.1"),
    )
    p = Process(source="core", pid=42, executable="/home/alice/venv/bin/python", argv=argv, threads=[t],
                notes=["rendezvous at myhost:29500 via 192.168.0.1; mail carol@corp.example.com",
                       "127.0.0.1 and ::1 and version 2.21.5 and torch.distributed.run stay"])
    f = Finding(signature="sig-a", title="t", severity="hang", process=0, threads=[11],
                summary="thread alice-loader blocked", references=["https://github.com/pytorch/pytorch/issues/1"],
                evidence=[Evidence(thread=11, frame=0, rule="python", text="/Users/alice/code/data.py")])
    return Snapshot(processes=[p], findings=[f], bucket="b1-0123456789ab")


def readable(out: str) -> str:
    """What a reader sees: Markdown backslash escapes and HTML entities undone."""
    return html.unescape(re.sub(r"\\(.)", r"\1", out))


@pytest.mark.parametrize("fmt", ["json", "text", "md", "html"])
def test_nothing_planted_survives_any_format(fmt):
    before = readable(render(planted(), fmt))
    assert all(v in before for v in ("alice", "abc123xyz", "10.1.2.3", "gpu07.cluster.example.com"))
    out = readable(render(redact(planted(), hostnames=["myhost"], users=[]), fmt))
    for value in SECRETS + PRIVATE:
        assert value not in out, (fmt, value)
    # markdown/html escape '<': look for the placeholder text itself
    for ph in ("user1", "secret1", "host1", "ip1"):
        assert ph in out


def test_unplanted_context_survives():
    r = redact(planted(), hostnames=["myhost"], users=[])
    text = json.dumps(r.to_dict())
    for keep in ("127.0.0.1", "::1", "2.21.5", "torch.distributed.run", "c10d::ProcessGroupNCCL::runLoop(int)",
                 "https://github.com/pytorch/pytorch/issues/1", "b1-0123456789ab", "libtorch_cuda.so", "main"):
        assert keep in text, keep
    assert r.processes[0].argv[4] == "<secret1>" or r.processes[0].argv[4].startswith("<secret")
    assert "https://<user" in r.processes[0].argv[12] and "@github.com/org/repo" in r.processes[0].argv[12]


def test_same_value_same_placeholder():
    r = redact(planted(), hostnames=["myhost"], users=[])
    p = r.processes[0]
    user = p.executable.split("/")[2]
    assert user.startswith("<user")
    assert p.argv[1] == "/tmp/x/home/%s/proj/train.py" % user
    assert p.threads[0].frames[0].file == "/Users/%s/code/data.py" % user
    assert p.threads[0].name.startswith(user + "-loader ")
    token = p.argv[2].split("=", 1)[1]
    assert p.threads[0].name.endswith(token)
    assert p.argv[7].startswith("<ip")
    ip = p.threads[0].waits.detail.rsplit(" ", 1)[1]  # 192.168.0.1, seen again in the notes
    assert ip.startswith("<ip") and ip != p.argv[7]
    assert ("at <host1>:29500 via %s;" % ip) in p.notes[0]


def test_root_and_model_shape_kept():
    s = planted()
    s.processes[0].executable = "/root/.pyenv/versions/3.11.7/bin/python3.11"
    r = redact(s, hostnames=[], users=["root"])
    assert r.processes[0].executable == "/root/.pyenv/versions/3.11.7/bin/python3.11"
    assert r.processes[0].threads[0].frames[2].address == 0x401000
    assert r.findings[0].signature == "sig-a"
    assert any(w.startswith("redacted:") for w in r.warnings)
    assert s.processes[0].argv[2] == "--token=abc123xyz"  # input not mutated


def test_job_view_hosts_and_addresses_are_redacted():
    """Rank identity carries node names that are no FQDN ("gpu-node07") and the rendezvous address."""
    import json

    from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

    procs = []
    for r in (0, 1):
        t = Thread(tid=100 + r, frames=[Frame(kind="python", function="step", file="/home/alice/train.py", line=3)])
        procs.append(Process(source="live", pid=100 + r, threads=[t], rank=r,
                             dist=DistIdentity(host="gpu-node07", master_addr="10.20.30.40", world_size=2)))
    out = json.dumps(redact(Snapshot(processes=procs), hostnames=[], users=[]).to_dict())
    for secret in ("gpu-node07", "10.20.30.40", "alice"):
        assert secret not in out, secret
    assert '"rank": 1' in out
