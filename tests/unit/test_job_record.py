"""``Snapshot.job`` is a typed record (model/job.py) whose JSON is the dict it replaced, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.job import JobRankClass, JobSummary

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu_job"


@pytest.mark.parametrize("name", ["straggler.job.json", "straggler.job+fr.json", "mismatch.job+fr.json",
                                  "straggler.pids.json"])
def test_captured_job_round_trips_byte_identical(name):
    raw = json.loads((DATA / name).read_text())
    snap = Snapshot.from_dict(raw)
    assert isinstance(snap.job, JobSummary) and isinstance(snap.job.classes[0], JobRankClass)
    assert snap.job.world_size == 2 and snap.job.state_of(0) is not None
    assert json.dumps(snap.to_dict()["job"]) == json.dumps(raw["job"])


def test_empty_values_stay_in_the_json():
    """``missing: ""`` and ``world_size: null`` mean something to a reader: always written."""
    d = JobSummary(processes=2).to_dict()
    assert list(d) == ["processes", "key", "world_size", "ranks", "missing", "failed", "states", "classes", "tree"]
    assert d["world_size"] is None and d["missing"] == "" and d["classes"] == [] and d["tree"] is None
    assert JobSummary.from_dict(d) == JobSummary(processes=2)
