"""A real Slurm job (issue 24), on a private single-node cluster of Debian's slurmctld, slurmd and
munge (tests/slurm_world.py): `srun -n 4` of the gloo job fixture (tests/fixtures/torch_job.py
takes its rank from SLURM_PROCID), rank 1 a straggler.

* `hanganalyze --job <step pid>` (the slurmstepd the ranks run under) names rank 1, every rank's
  identity from Slurm's variables;
* `srun --overlap --jobid J` runs scripts/capture-node.sh on the job's node, then one
  `hanganalyze DIR` over the per-rank files names rank 1 too.

Skips with the reason where the cluster cannot start (packages missing, daemons refusing).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import REPO, run_hanganalyze  # noqa: E402
from jobs import TORCH_JOB, _launch, ppid_of, wait_rank_pids  # noqa: E402
from slurm_world import ClusterUnavailable, SlurmCluster  # noqa: E402

pytest.importorskip("torch", reason="PyTorch is not installed (make install-test)")
pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

NPROC = 4
BAD_RANK = 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
    except ClusterUnavailable as e:
        pytest.skip("no private Slurm cluster here: %s" % e)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def slurm_job(cluster, tmp_path_factory):
    folder = tmp_path_factory.mktemp("slurm_job")
    from slurm_world import _free_ports

    env = cluster.env()
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_ports(1)[0]))
    argv = ["srun", "-n", str(NPROC), "--job-name=hang-straggler", sys.executable, str(TORCH_JOB), "straggler",
            str(BAD_RANK)]
    job = _launch("slurm", argv, folder / "ready", folder / "srun.log",
                  {k: v for k, v in env.items() if k.startswith(("SLURM_", "MASTER_"))})
    job.scenario, job.world_size, job.bad_rank = "straggler", NPROC, BAD_RANK
    try:
        job.rank_pids = wait_rank_pids(job, NPROC, 240, "srun")
        time.sleep(2.0)  # the waiting ranks enter all_reduce just after their marker
        yield job
    finally:
        job.stop()


def _straggler(snap: dict) -> None:
    found = [f for f in snap["findings"] if f["signature"] == "collective-straggler"]
    assert found, [(f["signature"], f.get("summary")) for f in snap["findings"]]
    f = found[0]
    assert f["ranks"] == [BAD_RANK], f
    assert re.search(r"rank 1 never reached it: it is in load_next_batch \(torch_job\.py:\d+\)", f["summary"]), f
    assert snap["job"]["world_size"] == NPROC and snap["job"]["ranks"] == "0-%d" % (NPROC - 1), snap["job"]


def test_job_on_the_slurm_step_names_the_straggler(slurm_job, tmp_path):
    steps = {ppid_of(pid) for pid in slurm_job.rank_pids.values()}
    assert len(steps) == 1, steps  # one slurmstepd holds the four ranks
    step = steps.pop()
    assert Path("/proc/%d/comm" % step).read_text().strip() == "slurmstepd"
    out = tmp_path / "slurm.json"
    res = run_hanganalyze(["--job", step, "--format", "json", "-o", out], timeout=300)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")[-3000:]
    snap = json.loads(out.read_text())
    for p in snap["processes"]:
        assert p["pid"] == slurm_job.rank_pids[p["rank"]], (p["rank"], p["pid"])
        # RANK is set inside the process only: the identity is Slurm's own.
        assert p["dist"]["launcher"] == "slurm" and p["dist"]["world_size"] == NPROC, p["dist"]
    _straggler(snap)


def test_capture_node_under_srun_overlap_then_one_folder(cluster, slurm_job, tmp_path):
    jobid = subprocess.run(["squeue", "-h", "-n", "hang-straggler", "-o", "%i"], env=cluster.env(),
                           capture_output=True, text=True, timeout=30).stdout.split()
    assert len(jobid) == 1, jobid
    step = ppid_of(slurm_job.rank_pids[0])
    out = tmp_path / "captured"
    env = cluster.env()
    env["HANGANALYZE"] = shutil.which("hanganalyze") or "hanganalyze"
    res = subprocess.run(["srun", "--overlap", "--jobid", jobid[0], "-n", "1", "bash",
                          str(REPO / "scripts" / "capture-node.sh"), str(out), str(step)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])
    files = sorted(p.name for p in out.glob("*.json") if not p.name.endswith(".node.json"))
    assert len(files) == NPROC and all(re.search(r"\.rank[0-3]\.json$", n) for n in files), files
    assert len(list(out.glob("*.node.json"))) == 1  # and the node's summary (issue 25)
    merged = tmp_path / "merged.json"
    res = run_hanganalyze([out, "--format", "json", "-o", merged], timeout=300)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")[-3000:]
    _straggler(json.loads(merged.read_text()))


def test_watch_per_node_under_srun_overlap(cluster, slurm_job, tmp_path):
    """``hanganalyze watch --job <slurmstepd>`` run on the job's node by ``srun --overlap`` (issue 33:
    per node inside an allocation): the hang is captured (exit 3), the report names rank 1, and the
    node summary it writes merges into the same verdict."""
    jobid = subprocess.run(["squeue", "-h", "-n", "hang-straggler", "-o", "%i"], env=cluster.env(),
                           capture_output=True, text=True, timeout=30).stdout.split()
    assert len(jobid) == 1, jobid
    step = ppid_of(slurm_job.rank_pids[0])
    exe = shutil.which("hanganalyze")
    cmd = [exe] if exe else [sys.executable, "-m", "hanganalyze"]
    out = tmp_path / "watch"
    out.mkdir()
    res = subprocess.run(["srun", "--overlap", "--jobid", jobid[0], "-n", "1"] + cmd +
                         ["watch", "--job", str(step), "--stall", "4", "--poll", "0.5", "-o", str(out / "report.json"),
                          "--node-summary", str(out / "node.json")],
                         env=cluster.env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, (res.stdout[-2000:], res.stderr[-2000:])
    assert "hang captured" in res.stderr, res.stderr[-2000:]
    _straggler(json.loads((out / "report.json").read_text()))
    merged = tmp_path / "merged.json"
    res = run_hanganalyze([out / "node.json", "--format", "json", "-o", merged], timeout=300)
    assert res.returncode == 3, res.stderr.decode("utf-8", "replace")[-3000:]
    found = [f for f in json.loads(merged.read_text())["findings"] if f["signature"] == "collective-straggler"]
    assert found and found[0]["ranks"] == [BAD_RANK], found
