"""Signatures against real dumps pasted into public bug trackers (tests/data/realworld/).

Each manifest entry (``manifest-*.yaml``) names a dump exactly as pasted, its source URL, the tool
that made it, the cause the thread established, and what hanganalyze must answer:

* ``expect: SIG``: the finding the thread's cause supports must be among the findings (right),
  else the answer is wrong (another hang-class finding) or "no finding";
* ``hang: false``: the cause was unrelated to a hang: no ``hang``/``deadlock`` finding may appear;
* ``input_format: log``: a text with neither a frame nor a known log line (a program's own printf
  log, a bare thread list), which auto-detection refuses, as it should, analyzed the way the refusal
  tells users to; every other dump, logs with no frame included, is read by auto-detection;
* ``refusal: "why"``: a text with neither a frame nor a known log line, for which the one-line
  refusal (exit 2, saying what to capture) is the answer the issue asks for; the test asserts it is
  still refused and says what to capture (a reader that learns to read it shows up as a failure);
* ``also: [SIG]`` (with ``also_why``): another finding the entry's own labels support (its category
  names it: a timeout whose ranks ran mismatched ops), not counted as naming another cause;
* ``known_miss: "why"``: a known wrong or missing answer, explained (a paste cut before the frames
  the signature needs, say); the test asserts it is still not right (so a fix shows up as a failure
  to update the manifest), and it counts as what it is (wrong / no finding) in the score.
* ``wait: CATEGORY``: the established cause's wait category (``signatures/triage/waits.yaml``, or
  ``crashed``); the triage's must be it on at least ``WAIT_FLOOR`` of such dumps (``test_triage_*``).

Every dump must get a verdict (a known bug or a triage), none may be refused, and no known-bug
finding at confidence >= 0.8 may name another cause than the established one.

The score (right / wrong / no finding) is printed at the end of the test run (conftest.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest
import yaml
from helpers import REPO

CORPUS = REPO / "tests" / "data" / "realworld"
HANG_CLASS = ("hang", "deadlock")
#: file -> "right" | "wrong" | "no finding" | "refused" | "no expectation", for conftest's summary
SCORE: Dict[str, str] = {}
#: file -> (expected wait category, the triage's), for test_triage_wait_category
WAITS: Dict[str, tuple] = {}


def expect_in(entry: dict, snap) -> bool:
    return bool(entry.get("expect")) and entry["expect"] in [f.signature for f in snap.findings]


def _entries() -> List[dict]:
    out = []
    for manifest in sorted(CORPUS.glob("manifest-*.yaml")):
        for e in yaml.safe_load(manifest.read_text()) or []:
            e["_manifest"] = manifest.name
            out.append(e)
    return out


ENTRIES = _entries()


@pytest.fixture(scope="module")
def db():
    from hanganalyze import pipeline

    return pipeline.load_signature_db()


def _analyze(path: Path, db, input_format=None):
    from hanganalyze import pipeline
    from hanganalyze.acquire.engine import EngineRequest
    from hanganalyze.acquire.inputs import acquire
    from hanganalyze.acquire.many import Input, fill_identity

    snap = acquire(str(path), None, EngineRequest(timeout=60.0), input_format=input_format)
    for p in snap.processes:
        fill_identity(p, Input(path=str(path)), len(snap.processes) == 1)
    return pipeline.analyze(snap, db)


def test_the_corpus_is_real_and_spread():
    assert len(ENTRIES) >= 50, len(ENTRIES)
    assert len({e["project"] for e in ENTRIES}) >= 6
    files = [e["file"] for e in ENTRIES]
    assert len(set(files)) == len(files), "a dump in two manifests: %s" % sorted(
        f for f in set(files) if files.count(f) > 1)
    for e in ENTRIES:
        assert (CORPUS / e["file"]).is_file(), e["file"]
        assert str(e.get("url", "")).startswith("https://"), e
        assert e.get("tool") and e.get("cause"), e


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_dump(entry, db):
    from hanganalyze.errors import InputError

    path = CORPUS / entry["file"]
    try:
        snap = _analyze(path, db, entry.get("input_format"))
    except InputError as e:
        if entry.get("wait"):  # a refusal names no wait: a miss in the aggregate
            WAITS[entry["file"]] = (entry["wait"], None)
        if entry.get("refusal"):  # no frame and no known line: the one-line refusal is the answer
            SCORE[entry["file"]] = "refused: as it should"
            assert "capture" in str(e), "a refusal must say what to capture: %s" % e
            return
        SCORE[entry["file"]] = "refused: refused"
        pytest.fail("refused: %s" % e)
    assert not entry.get("refusal"), "%s is now read: remove its refusal note" % entry["file"]
    triage = [f for f in snap.findings if f.signature == "triage"]
    assert triage or expect_in(entry, snap), "no verdict: neither a known bug nor a triage"
    if entry.get("wait"):
        WAITS[entry["file"]] = (entry["wait"], triage[0].triage.wait if triage else None)
    if entry.get("expect") or entry.get("hang") is False:
        wrong = [f.signature for f in snap.findings if f.signature not in ("triage", entry.get("expect"))
                 and f.signature not in (entry.get("also") or ())
                 and f.severity in ("crash", "deadlock", "hang", "error") and (f.confidence or 1.0) >= 0.8
                 and entry.get("category") not in f.signature]
        if entry.get("expect"):
            assert not wrong, "confident findings of another cause: %s" % wrong
    found = [f.signature for f in snap.findings]
    hangs = [f.signature for f in snap.findings if f.severity in HANG_CLASS]
    expect = entry.get("expect")
    if expect:
        verdict = "right" if expect in found else ("wrong" if hangs else "no finding")
    elif entry.get("hang") is False:
        verdict = "wrong" if hangs else "right"
    else:  # the cause is unknown, or no signature fits it yet: only "parsed, nothing crashed"
        verdict = "no expectation"
    kind = "expected a signature" if expect else ("unrelated to a hang" if entry.get("hang") is False
                                                   else "cause unknown or no signature yet")
    SCORE[entry["file"]] = "%s: %s" % (kind, verdict)
    if entry.get("known_miss"):
        assert verdict != "right", "%s is now answered right: remove its known_miss note (%s)" % (entry["file"], found)
        return
    if expect:
        assert expect in found, "expected %s, got %s (%s)" % (expect, found, entry.get("cause"))
    if entry.get("hang") is False:
        assert not hangs, "unrelated cause (%s), but hang-class findings %s" % (entry.get("cause"), hangs)


#: the corpus's floor for the wait answer (87 % when it was set): a change that loses waits fails here
WAIT_FLOOR = 0.85


def test_triage_wait_category_holds_its_floor():
    """After every dump ran (pytest runs this file's tests in order, on one worker under
    ``--dist loadfile``): the triage names the established wait on at least ``WAIT_FLOOR`` of the
    dumps with one; a refused dump counts as a miss.  Run alone (``-k``), it has nothing to count."""
    expected = [e for e in ENTRIES if e.get("wait")]
    if len(WAITS) < len(expected):
        pytest.skip("needs every test_dump of this file first (%d of %d ran)" % (len(WAITS), len(expected)))
    right = [f for f, (want, got) in WAITS.items() if want == got]
    wrong = {f: v for f, v in WAITS.items() if v[0] != v[1]}
    assert len(right) >= WAIT_FLOOR * len(WAITS), "triage wait right on %d of %d; wrong: %s" % (
        len(right), len(WAITS), wrong)
