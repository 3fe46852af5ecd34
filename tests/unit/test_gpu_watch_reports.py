"""``hanganalyze watch`` around real jobs, re-checked from what ``scripts/gpu_watch.sh`` brought back
(issue 33), with no job and no GPU here.

Each folder holds, per run, ``<scenario>.run<N>.result.json`` (what ``scripts/gpu_watch_runs.py``
saw: the watcher's exit code, whether a report was written and how long after the hang started,
what was left of the job, a digest of the report), the watcher's stderr (``.err``) and some reports
(``<scenario>.run<N>.json``).  ``gpu_watch_cpu/`` is the script's dry run on CPU (gloo,
``HANG_BACKEND=gloo``); ``gpu_watch/`` (when present) the NCCL run on the GPU machine.  The verdicts
are derived here again from the raw fields, not taken from the run's own ``problems``:

- straggler: captured (exit 3) within ``stall`` + 10 s of the hang's start, a hang finding naming the
  bad rank alone, that rank's main thread in ``load_next_batch``; ``--then kill`` left nothing,
  ``--then keep`` left the job running; both modes (wrapper, ``--job``) among the runs;
- healthy and slow: watched for the whole time, never captured, no report, no exit 3;
- a report kept beside its result gives the same digest, and analyzed again today the same finding.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest
from helpers import REPO, run_hanganalyze

DATA = REPO / "tests" / "data"
#: the CPU dry run is always here; the GPU run once the coordinator brought it back
DATASETS = ["gpu_watch_cpu", "gpu_watch_h200_before"] + [d for d in ("gpu_watch", "gpu_watch_b") if (DATA / d).is_dir()]
#: Runs captured late, and why.  gpu_watch_h200_before is the first NCCL run (one H200, 2 runs each, the
#: watcher before watch.progressing left out runtime helper threads): in run 2 the NCCL watchdog's frames
#: differed between samples and the candidate was dismissed again and again (84 s; fixed, unit-tested in
#: test_watch_progressing.py; not re-run on a GPU: the session's device time was spent).
KNOWN_LATE = {("gpu_watch_h200_before", 2): 84.41}
HANG = ("hang", "deadlock")


def _results(ds: str) -> List[Dict]:
    return [json.loads(p.read_text()) for p in sorted((DATA / ds).glob("*.result.json"))]


def _digest(snap: Dict) -> Dict:
    """The digest as gpu_watch_runs.py writes it, computed here from the report itself."""
    ranks = {}
    for p in snap.get("processes", []):
        main = next((t for t in p.get("threads", []) if t.get("name") == "MainThread"), None)
        ranks[str(p.get("rank"))] = [f.get("function") for f in (main or {}).get("frames", [])
                                     if f.get("kind") == "python"][:12]
    return {"findings": [{"signature": f.get("signature"), "ranks": f.get("ranks"), "severity": f.get("severity")}
                         for f in snap.get("findings", []) if f.get("severity") in HANG],
            "note": (snap.get("warnings") or [""])[0][:300], "main_python_frames": ranks,
            "sources": sorted({p.get("source") for p in snap.get("processes", [])})}


@pytest.mark.parametrize("ds", DATASETS)
def test_every_scenario_and_mode_ran(ds: str) -> None:
    runs = _results(ds)
    by = {sc: [r for r in runs if r["scenario"] == sc] for sc in ("straggler", "healthy", "slow")}
    assert all(len(v) >= 2 for v in by.values()), {k: len(v) for k, v in by.items()}
    assert {r["mode"] for r in by["straggler"]} == {"wrapper", "job"}
    assert not [r for r in runs if r.get("error")], [r.get("error") for r in runs]


@pytest.mark.parametrize("ds", DATASETS)
def test_straggler_captured_in_time_named_and_job_handled(ds: str) -> None:
    for r in [r for r in _results(ds) if r["scenario"] == "straggler"]:
        name = "run %d (%s)" % (r["run"], r["mode"])
        assert r["rc"] == 3 and r["captured"], name
        if (ds, r["run"]) in KNOWN_LATE:
            assert r["latency_s"] == KNOWN_LATE[(ds, r["run"])], (name, r["latency_s"])
        else:
            assert 0 < r["latency_s"] <= r["stall"] + 10, (name, r["latency_s"])
        d, bad = r["digest"], r["bad_rank"]
        assert d["note"].startswith("hanganalyze watch: hang detected"), (name, d["note"])
        assert d["sources"] == ["live"], name  # read from the running ranks, before any kill
        assert any(f["ranks"] == [bad] for f in d["findings"]), (name, d["findings"])
        assert "load_next_batch" in d["main_python_frames"][str(bad)], (name, d["main_python_frames"])
        assert sorted(d["main_python_frames"]) == [str(k) for k in range(r["nproc"])], name
        if r["then"] == "kill":
            assert r["left_after_kill"] == 0, name
        else:
            assert r["job_running_after_keep"] and r["alive_after_keep"] > r["nproc"], name
        err = (DATA / ds / ("straggler.run%d.err" % r["run"])).read_text()
        assert "hanganalyze: watch: hang captured" in err, name


@pytest.mark.parametrize("ds", DATASETS)
def test_healthy_and_slow_never_captured(ds: str) -> None:
    for r in [r for r in _results(ds) if r["scenario"] in ("healthy", "slow")]:
        name = "%s run %d (%s)" % (r["scenario"], r["run"], r["mode"])
        assert not r["captured"] and r["rc"] != 3, name
        assert r["watcher_still_watching"] and r["watched_s"] >= r["watch_s"] - 1, (name, r["watched_s"])
        assert r["watch_s"] >= 3 * r["stall"], name  # several whole windows, each one a chance to be wrong
        # counted, not judged: a capture the samples dismissed paused the ranks but wrote nothing
        assert isinstance(r["dismissed_captures"], int) and r["dismissed_captures"] >= 0, name
        assert not (DATA / ds / ("%s.run%d.json" % (r["scenario"], r["run"]))).exists(), name
        err = (DATA / ds / ("%s.run%d.err" % (r["scenario"], r["run"]))).read_text()
        assert "hang captured" not in err, name


@pytest.mark.parametrize("ds", DATASETS)
def test_kept_reports_match_their_digest_and_still_name_the_rank(ds: str, tmp_path: Path) -> None:
    reports = sorted(p for p in (DATA / ds).glob("straggler.run*.json") if not p.name.endswith(".result.json"))
    assert reports, "no straggler report kept in %s" % ds
    results = {r["run"]: r for r in _results(ds) if r["scenario"] == "straggler"}
    for path in reports:
        run = int(path.name.split(".run")[1].split(".")[0])
        assert _digest(json.loads(path.read_text())) == results[run]["digest"], path.name
    # the first one analyzed again from the file: today's analysis names the same rank
    out = tmp_path / "re.json"
    res = run_hanganalyze([str(reports[0]), "--format", "json", "-o", str(out)], timeout=120)
    assert res.returncode == 3, res.stderr.decode("utf-8", "replace")[-2000:]
    bad = results[int(reports[0].name.split(".run")[1].split(".")[0])]["bad_rank"]
    again = json.loads(out.read_text())
    assert any(f["severity"] in HANG and f.get("ranks") == [bad] for f in again["findings"]), \
        [(f["signature"], f.get("ranks")) for f in again["findings"]]


def test_what_the_watcher_cost_a_real_nccl_loop() -> None:
    """bench_watch.py on 2x H200 (gpu_watch_b/: bench.json, then bench_fr.json with the flight recorder alone):
    no healthy run captured, ~2,000 steps/s in every mode, the watcher's polling under 0.5 % of a core and
    26 MiB.  The steps/s ratios are what was measured, not a pass mark: bare's own runs spread 1,956-2,007
    (2.6 %), wider than the 1 % goal; wrapper 0.973 in the first bench and 1.007 in the second."""
    first = json.loads((DATA / "gpu_watch_b" / "bench.json").read_text())
    second = json.loads((DATA / "gpu_watch_b" / "bench_fr.json").read_text())
    for b in (first, second):
        assert b["runs"] and not any(r["captured"] for r in b["runs"]) and all(r["rc"] == 0 for r in b["runs"])
        assert all(1800 < r["steps_per_s"] < 2200 for r in b["runs"])
        for mode in ("wrapper", "job"):
            if mode in b["summary"]:
                s = b["summary"][mode]
                assert s["watch_steady_cpu_share"] < 0.005 and s["watch_peak_rss_mib"] < 32
    assert first["summary"]["job"]["median_paired_ratio"] == 0.9939
    assert (first["summary"]["wrapper"]["ratio_to_bare"], second["summary"]["wrapper"]["ratio_to_bare"]) == (0.9728,
                                                                                                            1.0071)
    assert second["summary"]["fr"]["ratio_to_bare"] == 0.9956
