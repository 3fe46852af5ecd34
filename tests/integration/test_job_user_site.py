"""A real torchrun job (gloo, CPU) whose script lives in a folder named torch/, as people run
examples inside a clone of pytorch, DeepSpeed or accelerate (issue 21).

* The mismatch finding names the user's functions (``sync_params``, ``train_step``), not
  ``broadcast (distributed_c10d.py:N)``: a folder named torch/ is not the framework.
* Each rank read twice (its per-rank snapshot JSON, named ``job.rN.json``, and live through
  ``--job``) is one process with one state, and the one finding names the one bad rank.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Dict, Iterator

import pytest
from helpers import run_hanganalyze
from jobs import TORCH_JOB, start_torch_job

TIMEOUT = 600
NPROC, BAD = 3, 2


@pytest.fixture(scope="module")
def torch_folder_job(tmp_path_factory) -> Iterator:
    base = tmp_path_factory.mktemp("user_site")
    script = base / "torch" / "examples" / "torch_job.py"
    script.parent.mkdir(parents=True)
    shutil.copy(str(TORCH_JOB), str(script))
    job = start_torch_job("mismatch", base, nproc=NPROC, bad_rank=BAD, script=script)
    try:
        yield job
    finally:
        job.stop()


def _report(args, out: Path) -> Dict:
    res = run_hanganalyze([*args, "--format", "json", "-o", out], timeout=TIMEOUT)
    assert res.returncode == 3, "exit %d: %s" % (res.returncode, res.stderr.decode("utf-8", "replace")[-2000:])
    return json.loads(out.read_text())


def test_script_in_a_folder_named_torch_is_the_users_call_site(torch_folder_job, tmp_path):
    job = torch_folder_job
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for rank, pid in sorted(job.live_rank_pids.items()):
        # named as a user would name them: job.r0.json; the rank also comes from the environment
        one = _report(["--pid", pid], snaps / ("job.r%d.json" % rank))
        assert one["processes"][0]["rank"] == rank
    snap = _report(["--job", job.launcher_pid, snaps], tmp_path / "job.json")
    ranks = [p.get("rank") for p in snap["processes"]]
    assert sorted(ranks) == list(range(NPROC)), ranks  # one process per rank, not two
    assert all(p["sources"] == ["stacks"] for p in snap["processes"]), [p.get("sources") for p in snap["processes"]]
    found = [f for f in snap["findings"] if f["signature"] == "collective-mismatch"]
    assert len(found) == 1 and found[0]["ranks"] == [BAD], snap["findings"]
    summary = found[0]["summary"]
    bad = r"rank %d waits in broadcast called from sync_params \(torch_job\.py:\d+\)" % BAD
    assert re.search(bad, summary), summary
    assert re.search(r"ranks 0-1 wait in all_reduce called from train_step \(torch_job\.py:\d+\)", summary), summary
    assert "distributed_c10d.py" not in summary
    assert not [f for f in snap["findings"] if f["signature"] in ("collective-straggler", "rank-missing")]
