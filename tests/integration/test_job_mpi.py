"""A real Open MPI job (issue 24): `mpirun -np 4` of an mpi4py program over the machine's Open MPI
(Debian's openmpi-bin, python3-mpi4py), rank 1 stuck in its own code while ranks 0, 2, 3 wait in
MPI_Allreduce.  `hanganalyze --job <mpirun pid>` finds the ranks under mpirun, takes each one's
rank from OMPI_COMM_WORLD_RANK, sees the native MPI waits as a collective, and names rank 1.

Skips, with the reason, where mpirun or mpi4py for the system python3 is missing
(.ci/run installs them: apt-get install openmpi-bin python3-mpi4py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, run_hanganalyze  # noqa: E402
from jobs import _launch, wait_rank_pids  # noqa: E402

MPI_JOB = FIXTURES / "mpi_job.py"
#: mpi4py comes from the distribution (python3-mpi4py), built for its Open MPI and its python3.
SYSTEM_PY = "/usr/bin/python3"
NPROC = 4
BAD_RANK = 1


def _why_not() -> str:
    if shutil.which("gdb") is None:
        return "gdb is not installed"
    if shutil.which("mpirun") is None:
        return "mpirun is not installed (apt-get install openmpi-bin python3-mpi4py)"
    r = subprocess.run([SYSTEM_PY, "-c", "import mpi4py.MPI"], capture_output=True, text=True)
    if r.returncode != 0:
        return "mpi4py is not importable by %s (apt-get install python3-mpi4py): %s" % (
            SYSTEM_PY, (r.stderr.strip().splitlines() or ["?"])[-1])
    return ""


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "-")


@pytest.fixture(scope="module")
def mpi_job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mpi_job")
    # As root Open MPI wants --allow-run-as-root; --oversubscribe: 4 ranks on a machine of 2 cores.
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(NPROC), SYSTEM_PY, str(MPI_JOB),
            str(BAD_RANK)]
    job = _launch("mpi", argv, folder / "ready", folder / "mpirun.log", {})
    job.scenario, job.world_size, job.bad_rank = "straggler", NPROC, BAD_RANK
    try:
        job.rank_pids = wait_rank_pids(job, NPROC, 120, "mpirun")
        time.sleep(1.0)  # the waiting ranks enter MPI_Allreduce just after their marker
        yield job
    finally:
        job.stop()


def test_mpirun_job_names_the_rank_outside_allreduce(mpi_job, tmp_path):
    out = tmp_path / "mpi.json"
    res = run_hanganalyze(["--job", mpi_job.launcher_pid, "--format", "json", "-o", out], timeout=300)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")[-3000:]
    snap = json.loads(out.read_text())
    procs = {p["rank"]: p for p in snap["processes"]}
    assert sorted(procs) == list(range(NPROC)), sorted(procs)
    for rank, p in procs.items():
        assert p["pid"] == mpi_job.rank_pids[rank], (rank, p["pid"], mpi_job.rank_pids)
        assert p["dist"]["launcher"] == "openmpi" and p["dist"]["from"] == "environ", p["dist"]
        assert p["dist"]["world_size"] == NPROC, p["dist"]
    # The waiting ranks really are inside Open MPI's MPI_Allreduce (PMPI_ is its real symbol).
    for rank in (r for r in procs if r != BAD_RANK):
        names = [f.get("function") or "" for t in procs[rank]["threads"] for f in t["frames"]]
        assert any(re.fullmatch(r"P?MPI_Allreduce", n) for n in names), (rank, names[:20])
    found = [f for f in snap["findings"] if f["signature"] == "collective-straggler"]
    assert found, [(f["signature"], f.get("summary")) for f in snap["findings"]]
    f = found[0]
    assert f["ranks"] == [BAD_RANK], f
    assert re.search(r"rank 1 never reached it: it is in load_next_batch \(mpi_job\.py:\d+\)", f["summary"]), f
    assert re.search(r"ranks 0,2-3 wait in .* called from train_step \(mpi_job\.py:\d+\)", f["summary"]), f
    assert snap["job"]["world_size"] == NPROC and snap["job"]["ranks"] == "0-%d" % (NPROC - 1)
    assert os.path.basename(MPI_JOB) in f["summary"]
