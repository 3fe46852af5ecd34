"""GPU state from NVML on a real 2x H200 job, re-checked from the captured JSON (tests/data/gpu_nvml/,
README there): a healthy job gets no hang and no GPU accusation -- including the run whose one NVML
reading caught a GPU idle between kernels -- and a stopped rank's idle GPU beside a busy peer names
that rank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest
from helpers import REPO, reanalyzed_json

DATA = REPO / "tests" / "data" / "gpu_nvml"
HANG = ("hang", "deadlock")


def _again(path: Path, tmp_path: Path) -> Dict:
    return reanalyzed_json(path, tmp_path)


@pytest.mark.parametrize("name", ["healthy.run%d" % i for i in range(1, 6)] + ["healthy-one-reading"])
def test_healthy_no_hang_no_gpu_accusation(name, tmp_path):
    snap = _again(DATA / (name + ".json"), tmp_path)
    bad = [(f["signature"], f.get("ranks")) for f in snap["findings"]
           if f["severity"] in HANG or f["signature"] in ("gpu-idle-peers-busy", "nccl-ras-slow-rank", "rank-slow")]
    assert not bad, bad


def test_captured_one_reading_was_the_false_accusation():
    snap = json.loads((DATA / "healthy-one-reading.json").read_text())
    assert [f["ranks"] for f in snap["findings"] if f["signature"] == "gpu-idle-peers-busy"] == [[0]]


@pytest.mark.parametrize("run", range(1, 6))
def test_stopped_rank_idle_gpu_named(run, tmp_path):
    snap = _again(DATA / ("checkpoint.run%d.json" % run), tmp_path)
    idle = [f for f in snap["findings"] if f["signature"] == "gpu-idle-peers-busy"]
    assert [f["ranks"] for f in idle] == [[1]] and idle[0]["confidence"] >= 0.8
    assert snap["findings"][0]["ranks"] == [1] and snap["findings"][0]["severity"] == "hang"


def test_spinning_kernel_rank_named_and_gpus_busy(tmp_path):
    snap = _again(DATA / "spin.run1.json", tmp_path)
    assert snap["findings"][0]["signature"] == "nccl-ras-stuck" and snap["findings"][0]["ranks"] == [1]
    assert any(f["signature"] == "gpu-busy-host-waits" for f in snap["findings"])
    assert not [f for f in snap["findings"] if f["signature"] == "gpu-idle-peers-busy"]
