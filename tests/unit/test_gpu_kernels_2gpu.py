"""`--job --gpu-kernels` end to end on two real GPUs, re-checked from the captured JSON
(tests/data/gpu_kernels_2gpu/, README there): the rank whose GPU runs a kernel that never ends is named, on its own
device, beside a peer whose GPU runs the NCCL all-reduce; the healthy job lists no kernel and gets no finding; and
what the NVML GPU columns add to `--job` (bench_unambiguous.py --nvml 10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest
from helpers import REPO, reanalyzed_json

DATA = REPO / "tests" / "data" / "gpu_kernels_2gpu"
HANG = ("hang", "deadlock")


def _again(path: Path, tmp_path: Path) -> Dict:
    return reanalyzed_json(path, tmp_path)


@pytest.mark.parametrize("run", range(1, 6))
def test_never_ending_kernel_names_its_rank_on_two_gpus(run, tmp_path):
    for snap in (json.loads((DATA / ("spin.run%d.json" % run)).read_text()), _again(DATA / ("spin.run%d.json" % run),
                                                                                    tmp_path)):
        (f,) = [f for f in snap["findings"] if f["signature"] == "gpu-kernel-never-ends"]
        assert f["ranks"] == [1] and "spin_kernel (device 1" in f["summary"]
        assert "the GPU of rank 0 runs an NCCL kernel" in f["summary"]
        ranks = {p["rank"]: p for p in snap["processes"]}
        names = {r: {k["name"] for s in p["cuda_kernels"]["samples"] for k in s["kernels"]} for r, p in ranks.items()}
        assert names[1] == {"at::cuda::(anonymous namespace)::spin_kernel"}
        assert names[0] == {"ncclDevKernel_AllReduce_Sum_f32_RING_LL"}
        # each rank's GPU is its own device, both busy (NVML now and most of its last 2 s: one sample of 11 or
        # 30 % in runs 3 and 5, the previous run's cuda-gdb attach having stopped the device a moment)
        assert {k["device"] for s in ranks[1]["cuda_kernels"]["samples"] for k in s["kernels"]} == {1}
        for g in snap["gpu"]["gpus"]:
            assert g["util_gpu"] == 100 and sorted(g["util_samples"])[len(g["util_samples"]) // 2] >= 90


@pytest.mark.parametrize("run", (1, 2))
def test_healthy_job_lists_no_kernel_and_gets_no_finding(run, tmp_path):
    snap = _again(DATA / ("healthy.run%d.json" % run), tmp_path)
    assert not [f["signature"] for f in snap["findings"] if f["severity"] in HANG or f["signature"].startswith("gpu-")]
    for p in snap["processes"]:
        samples = p["cuda_kernels"]["samples"]
        assert len(samples) == 2 and all(s.get("error") is None and not s["kernels"] for s in samples)
    assert all(g["util_gpu"] > 0 for g in snap["gpu"]["gpus"])


def test_gpu_columns_cost_on_two_gpus():
    """NVML costs 0.13 s a read in a fresh interpreter; read beside the samples it adds < 0.1 s to --job."""
    b = json.loads((DATA / "bench_nvml.json").read_text())
    assert b["nvml"]["gpus"] == 2 and 0.05 < b["nvml"]["median_s"] < 0.5
    assert len(b["nvml_ab"]["walls_s"]["with"]) == len(b["nvml_ab"]["walls_s"]["without"]) == 10
    assert b["nvml_ab"]["added_s"] <= 0.1
    found = b["verdict"]["findings"]
    assert found[0] == "collective-straggler[1]" and "gpu-idle-peers-busy[1]" in found  # stopped rank's GPU idle
