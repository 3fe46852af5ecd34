"""Node summaries on real jobs (issue 25): a real 4-rank torchrun job (gloo, CPU), each rank captured
once (``hanganalyze --pid W --format json``, as ``scripts/capture-node.sh`` does on every node),
then merged three ways from the same rank files:

* flat: ``hanganalyze RANKFILES`` (the per-rank merge; ``--job`` names the same ranks too);
* one level: ``--format node`` of each "node" (ranks 0-1 and 2-3), then ``hanganalyze`` of the two
  summaries;
* two levels: those two summaries summarized into one (``--format node`` of summaries), then merged.

The verdict (findings, their ranks and text), the rank classes and the merged call tree must be those
of the flat merge.  One job per scenario per module; every hanganalyze run here reads files, so the
module costs the job start-up and four captures per job.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List

import pytest
from helpers import run_hanganalyze
from jobs import torch_job_fixture

straggler_job = torch_job_fixture("straggler", name="straggler_job", bad_rank=1)
mismatch_job = torch_job_fixture("mismatch", name="mismatch_job", bad_rank=3)

TIMEOUT = 600
NODES = ((0, 1), (2, 3))  # two "nodes" of two ranks each


def _run(args: List, rcs=(0, 3, 5, 6)) -> None:
    t0 = time.monotonic()
    res = run_hanganalyze([str(a) for a in args], timeout=TIMEOUT)
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode in rcs, "exit %d: %s" % (res.returncode, err[-2000:])
    print("%s: %.1f s" % (" ".join(map(str, args))[:100], time.monotonic() - t0))


def _report(inputs: List, out: Path) -> Dict:
    _run(list(inputs) + ["--format", "json", "-o", out])
    return json.loads(out.read_text())


def _summary(inputs: List, out: Path) -> Dict:
    _run(["--format", "node", "-o", out] + list(inputs))
    doc = json.loads(out.read_text())
    assert doc["schema"] == "hanganalyze-node/1"
    return doc


def _capture(job, folder: Path) -> Dict[int, Path]:
    folder.mkdir()
    files = {r: folder / ("host.rank%d.json" % r) for r in job.rank_pids}

    def one(r):
        _run(["--pid", job.rank_pids[r], "--format", "json", "-o", files[r]])

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, sorted(files)))
    return files


def _verdict(snap: Dict) -> Dict:
    job = snap["job"]
    return {
        "findings": [(f["signature"], f["severity"], f.get("ranks"), f.get("processes"),
                      f.get("summary") if f["signature"] != "triage" else None) for f in snap["findings"]],
        "classes": [(c["ranks"], c["size"], c["state"], c.get("where")) for c in job["classes"]],
        "tree": job["tree"], "world": job["world_size"], "missing": job["missing"], "ranks": job["ranks"],
        "states": [(s["rank"], s["state"], s.get("op"), s.get("call_site"), s.get("where"), s.get("evidence"))
                   for s in job["states"]],
    }


def _merges(job, tmp: Path) -> Dict[str, Dict]:
    """Every way of merging the same captured rank files: their reports by name."""
    files = _capture(job, tmp / "ranks")
    out = {"flat": _report([files[r] for r in sorted(files)], tmp / "flat.json")}
    sums = tmp / "sums"
    sums.mkdir()
    nodes = []
    for i, ranks in enumerate(NODES):
        p = sums / ("node%d.node.json" % i)
        doc = _summary([files[r] for r in ranks], p)
        assert doc["level"] == 1 and len(doc["processes"]) == len(ranks)
        nodes.append(p)
    out["one level"] = _report(nodes, tmp / "nodes.json")
    out["folder"] = _report([sums], tmp / "folder.json")  # hanganalyze DIR of summaries
    top = tmp / "top.node.json"
    doc = _summary(nodes, top)
    assert doc["level"] == 2 and len(doc["processes"]) == 4
    out["two levels"] = _report([top], tmp / "top.json")
    single = tmp / "all.node.json"
    _summary([files[r] for r in sorted(files)], single)
    out["one node"] = _report([single], tmp / "single.json")
    return out


@pytest.fixture(scope="module")
def straggler_merges(straggler_job, tmp_path_factory):
    return _merges(straggler_job, tmp_path_factory.mktemp("straggler_nodes"))


@pytest.fixture(scope="module")
def mismatch_merges(mismatch_job, tmp_path_factory):
    return _merges(mismatch_job, tmp_path_factory.mktemp("mismatch_nodes"))


def _same_as_flat(merges: Dict[str, Dict]) -> None:
    flat = _verdict(merges["flat"])
    assert flat["tree"] and flat["classes"] and len(flat["states"]) == 4
    for name, snap in merges.items():
        got = _verdict(snap)
        for k in flat:
            assert got[k] == flat[k], "%s: %s differs from the flat merge's:\n%s\n!=\n%s" % (name, k, got[k], flat[k])


def _finding(snap: Dict, sig: str) -> Dict:
    found = [f for f in snap["findings"] if f["signature"] == sig]
    assert found, [(f["signature"], f.get("summary")) for f in snap["findings"]]
    return found[0]


def test_straggler_node_summaries_merge_as_the_flat_merge(straggler_job, straggler_merges, tmp_path):
    _same_as_flat(straggler_merges)
    for name, snap in straggler_merges.items():  # the two-level merge names the straggler
        assert snap["findings"][0]["signature"] == "collective-straggler", name
        f = _finding(snap, "collective-straggler")
        assert f["ranks"] == [straggler_job.bad_rank] and "load_next_batch" in f["summary"], (name, f)
        assert sorted((c["ranks"], c["size"]) for c in snap["job"]["classes"]) == [("0,2-3", 3), ("1", 1)], name
    # and --job on the live launcher says the same
    live = _report(["--job", straggler_job.launcher_pid], tmp_path / "live.json")
    want = _verdict(straggler_merges["two levels"])
    assert _verdict(live)["findings"][0][:3] == want["findings"][0][:3]
    assert _verdict(live)["classes"] == want["classes"]


def test_mismatch_node_summaries_merge_as_the_flat_merge(mismatch_job, mismatch_merges):
    _same_as_flat(mismatch_merges)
    for name, snap in mismatch_merges.items():
        f = _finding(snap, "collective-mismatch")
        assert mismatch_job.bad_rank in f["ranks"], (name, f)
