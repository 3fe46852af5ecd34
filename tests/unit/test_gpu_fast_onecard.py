"""A stopped and a slow rank on one H200 after the RAS-window change (issue 31), re-checked from the
captured JSON (tests/data/gpu_fast_onecard/, README there): the stopped rank is named from the stack
samples without waiting for RAS's 2 s window, the slow rank is slow and never stuck, and the measured
end-to-end time of the unambiguous case is the one BENCHMARKS.md quotes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest
from helpers import REPO, run_hanganalyze

DATA = REPO / "tests" / "data" / "gpu_fast_onecard"
HANG = ("hang", "deadlock")


def _runs(case: str) -> List[Path]:
    runs = sorted(DATA.glob("%s.run*.json" % case))
    assert len(runs) == 5, runs
    return runs


def _hang(snap: Dict) -> List[Dict]:
    return [f for f in snap["findings"] if f["severity"] in HANG]


@pytest.mark.parametrize("case", ["straggler", "slow"])
def test_captured_and_reanalyzed_verdicts(case, tmp_path):
    for p in _runs(case):
        captured = json.loads(p.read_text())
        out = tmp_path / p.name
        res = run_hanganalyze([str(p), "--format", "json", "-o", str(out)], timeout=120)
        assert res.returncode in (0, 3), res.stderr.decode("utf-8", "replace")[-2000:]
        for snap in (captured, json.loads(out.read_text())):
            sigs = [(f["signature"], f.get("ranks")) for f in snap["findings"]]
            if case == "straggler":
                assert ("collective-straggler", [1]) in sigs, (p.name, sigs)
                assert not [s for s in sigs if s[0] in ("nccl-ras-stuck", "collective-hang", "collective-mismatch")]
            else:
                assert not _hang(snap), (p.name, sigs)
                assert ("nccl-ras-slow-rank", [1]) in sigs or ("rank-slow", [1]) in sigs, (p.name, sigs)


def test_stopped_rank_was_not_held_for_the_ras_window():
    for p in _runs("straggler"):
        ras = json.loads(p.read_text())["nccl_ras"]
        assert any("never woke in any sample" in n for n in ras.get("notes") or []), p.name
        span = ras["queries"][-1]["time_s"] - ras["queries"][0]["time_s"]
        assert span < 2.0, (p.name, span)


def test_unambiguous_hang_under_one_and_a_half_seconds():
    bench = json.loads((DATA / "bench_unambiguous.json").read_text())
    assert bench["backend"] == "nccl" and len(bench["walls_s"]) == 5
    assert bench["median_s"] <= 1.5, bench["walls_s"]
    assert bench["verdict"]["findings"][0] == "collective-straggler[1]"
    assert bench["phases"]["totals_s"]["ras window wait"] == 0.0
