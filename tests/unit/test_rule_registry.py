"""The rule registry (analyze/registry.py): every rule an object, run in order, each isolated.

A rule that raises is noted in the report and skipped; the report survives with the findings of
the other rules (checked on the real 2-rank NCCL straggler of tests/data/gpu_job)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import List

import pytest

from hanganalyze import pipeline
from hanganalyze.analyze import registry
from hanganalyze_gdbext.model import SERIOUS, SEVERITIES, TRIAGE, Finding, Snapshot

STRAGGLER = Path(__file__).resolve().parents[1] / "data" / "gpu_job" / "straggler.job.json"


@pytest.fixture(scope="module")
def db():
    return pipeline.load_signature_db()


def _snapshot() -> Snapshot:
    snap = Snapshot.from_dict(json.loads(STRAGGLER.read_text(encoding="utf-8")))
    snap.findings = []
    return snap


def _raise(*_args) -> List[Finding]:
    raise ValueError("boom")


def _with_failing(monkeypatch, rule_id: str) -> None:
    rules = tuple(dataclasses.replace(r, decide=_raise) if rule_id in r.concludes else r for r in registry.RULES)
    assert rules != registry.RULES, rule_id
    monkeypatch.setattr(registry, "RULES", rules)


def test_the_straggler_without_failures(db):
    snap = pipeline.analyze(_snapshot(), db)
    assert [f.signature for f in snap.findings][:2] == ["collective-straggler", "collective-peer-wait"]
    assert not any("failed" in w for w in snap.warnings)


@pytest.mark.parametrize("rule_id", ["collective-straggler", "signatures", "deadlock-cycle"])
def test_a_rule_that_raises_is_noted_and_skipped(monkeypatch, db, rule_id):
    _with_failing(monkeypatch, rule_id)
    snap = pipeline.analyze(_snapshot(), db)
    sigs = [f.signature for f in snap.findings]
    assert rule_id not in sigs
    assert "collective-peer-wait" in sigs and "triage" in sigs  # the other rules ran
    if rule_id != "collective-straggler":
        assert "collective-straggler" in sigs
    assert "rule %s failed: ValueError: boom (skipped)" % rule_id in snap.warnings
    assert snap.job is not None and snap.bucket  # the rest of the report is made


def test_a_failing_triage_leaves_the_known_findings(monkeypatch, db):
    _with_failing(monkeypatch, "triage")
    snap = pipeline.analyze(_snapshot(), db)
    assert [f.signature for f in snap.findings] == ["collective-straggler", "collective-peer-wait"]
    assert "rule triage failed: ValueError: boom (skipped)" in snap.warnings


def test_a_failing_rule_of_several_ids_names_them_all(monkeypatch, db):
    _with_failing(monkeypatch, "asyncio-orphan-wait")
    snap = pipeline.analyze(_snapshot(), db)
    assert ("rule asyncio-await-cycle, asyncio-orphan-wait, asyncio-loop-blocked failed: ValueError: boom "
            "(skipped)") in snap.warnings
    assert snap.findings[0].signature == "collective-straggler"


def test_severities_are_one_ordered_set():
    assert SEVERITIES[-1] == TRIAGE and SERIOUS == SEVERITIES[:4]
    assert all(s in SEVERITIES for s in ("crash", "deadlock", "hang", "error", "info"))
