"""--redact on hostile strings: every pattern stays linear (a 50 KB thread name or argv element
used to take up to 125 s in one regex), and the linear rewrite finds the same secrets."""

from __future__ import annotations

import time

import pytest

from hanganalyze.analyze.redact import Redactor, redact
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

HOSTILE = [
    "a-" * 25_000 + "!", "a." * 25_000, "1." * 25_000, "a" * 50_000, "0x" + "f" * 50_000, "token=" + "A" * 50_000 + "!",
    "KEY" * 16_000, "--" + "token" * 10_000, "a_key" * 10_000, "-token" * 8_000 + "=x", "a://" * 12_000,
    "http://" + "a" * 50_000 + ":", "a.b.c.d." * 6_000 + "com", "a@b." * 12_000, "/home/" + "a/" * 25_000,
]


@pytest.mark.parametrize("s", HOSTILE, ids=lambda s: repr(s[:12]))
def test_each_pattern_is_linear_on_hostile_strings(s):
    r = Redactor(["buildhost"], ["alice"])
    t0 = time.monotonic()
    r.discover(s)
    r.replace(s)
    assert time.monotonic() - t0 < 1.0


def test_hostile_snapshot_redacts_fast():
    threads = [Thread(tid=i, name=s, frames=[Frame(kind="python", function=s, file="/home/alice/" + s[:100])])
               for i, s in enumerate(HOSTILE)]
    snap = Snapshot(processes=[Process(source="core", argv=HOSTILE, threads=threads)])
    t0 = time.monotonic()
    out = redact(snap, hostnames=[], users=[])
    assert time.monotonic() - t0 < 5.0
    assert "alice" not in out.processes[0].threads[0].frames[0].file


@pytest.mark.parametrize("text, secrets", [
    ("run --token=abc123 --out x", {"abc123"}),
    ("run --password hunter22", {"hunter22"}),
    ("--my.api-key=K3Y99 and -auth=zzz9", {"K3Y99", "zzz9"}),
    ("HF_TOKEN=hf_value9 aws_secret_access_key=s3cr3t", {"hf_value9", "s3cr3t"}),
    ("x-y.MY_KEY=afterdot A=B_KEY=chain9", {"afterdot", "chain9"}),
    ("--token --password hunter22", {"--password"}),  # the value of --token, then nothing more
    ("abc--token=glued9", {"glued9"}),  # a dash inside a word still starts a flag, as before
    ("my-flag=notsecret KEYLESS=nope9", {"nope9"}),
    ("https://bob:pa55w0rd@example.org/x", {"pa55w0rd"}),
])
def test_same_secrets_as_before(text, secrets):
    r = Redactor([], [])
    r.discover(text)
    assert set(r.tables["secret"]) == secrets
