"""The job view on real distributed PyTorch jobs (torchrun, gloo on CPU, 4 ranks) and a real
multiprocessing job: live (``--job`` on the launcher, several ``--pid``, per-rank snapshot JSONs
merged from a folder, as each node of a cluster would write them) and from cores of every rank.

Each job is started once per module (tests/jobs.py) and analyzed several ways; every way must
name the same ranks and the same function, which is what the user needs from the report.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from helpers import REPO, run_hanganalyze
from jobs import gcore_ranks, mp_job_fixture, torch_job_fixture

straggler_job = torch_job_fixture("straggler", name="straggler_job", bad_rank=1)
mismatch_job = torch_job_fixture("mismatch", name="mismatch_job", bad_rank=3)
exit_job = torch_job_fixture("exit", name="exit_job", bad_rank=2)
lone_survivor_job = torch_job_fixture("exit", name="lone_survivor_job", nproc=2, bad_rank=1)
mp_job = mp_job_fixture()

TIMEOUT = 600


def _analyze(args: List, tmp_path: Path, name: str = "job.json", rc: Optional[int] = 3) -> Dict:
    out = tmp_path / name
    t0 = time.monotonic()
    res = run_hanganalyze(list(args) + ["--format", "json", "-o", out], timeout=TIMEOUT)
    took = time.monotonic() - t0
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode in ((0, 3, 5, 6) if rc is None else (rc,)), "exit %d: %s" % (res.returncode, err[-2000:])
    err = err.replace("hanganalyze: wrote %s (json)\n" % out, "", 1)  # -o's one line (issue 30)
    assert err == "", err
    snap = json.loads(out.read_text())
    print("%s: %.1f s" % (" ".join(map(str, args))[:80], took))
    return snap


def _finding(snap: Dict, sig: str) -> Dict:
    found = [f for f in snap["findings"] if f["signature"] == sig]
    assert found, "no %s finding; got %s" % (sig, [(f["signature"], f.get("summary")) for f in snap["findings"]])
    return found[0]


def _ranks(snap: Dict) -> List:
    return sorted(p.get("rank") for p in snap["processes"])


def _check_straggler(snap: Dict, job) -> None:
    assert _ranks(snap) == [0, 1, 2, 3]
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [job.bad_rank], f
    assert f["severity"] == "hang"
    # the stuck function with file:line, and the collective the others wait in with their call site
    assert re.search(r"rank 1 never reached it: it is in load_next_batch \(torch_job\.py:\d+\)", f["summary"]), f
    assert re.search(r"ranks 0,2-3 wait in all_reduce called from train_step \(torch_job\.py:\d+\)", f["summary"]), f
    assert snap["findings"][0]["signature"] == "collective-straggler"
    for sig in ("collective-mismatch", "rank-missing", "collective-hang"):
        assert not [x for x in snap["findings"] if x["signature"] == sig], sig
    job_view = snap["job"]
    assert job_view["world_size"] == 4 and job_view["ranks"] == "0-3" and job_view["missing"] == ""
    classes = sorted((c["ranks"], c["size"]) for c in job_view["classes"])
    assert classes == [("0,2-3", 3), ("1", 1)], classes
    # the merged call tree splits at the straggler's step: train_step for 3 ranks, load_next_batch for 1
    labels = _tree_paths(job_view["tree"])
    assert any("load_next_batch" in lab and ranks == "1" for lab, ranks in labels), labels
    assert any("train_step" in lab and ranks == "0,2-3" for lab, ranks in labels), labels


def _tree_paths(node: Dict, out=None):
    out = [] if out is None else out
    out.append((node["label"], node["ranks"]))
    for c in node.get("children", []):
        _tree_paths(c, out)
    return out


def test_straggler_live_job(straggler_job, straggler_json):
    snap = straggler_json
    _check_straggler(snap, straggler_job)
    for p in snap["processes"]:
        assert p["source"] == "live" and p["pid"] == straggler_job.rank_pids[p["rank"]]
        assert p["dist"]["world_size"] == 4 and p["dist"]["from"] == "environ" and p["dist"]["local_rank"] == p["rank"]
    # the job's processes are left running, undisturbed (detached)
    for pid in straggler_job.rank_pids.values():
        status = Path("/proc/%d/status" % pid).read_text()
        assert "TracerPid:\t0" in status


def test_straggler_several_pids(straggler_job, tmp_path):
    args: List = []
    for r in (3, 0, 2, 1):  # any order: processes are keyed by rank, never by position
        args += ["--pid", straggler_job.rank_pids[r]]
    snap = _analyze(args, tmp_path)
    _check_straggler(snap, straggler_job)


@pytest.fixture(scope="module")
def straggler_cores(straggler_job, tmp_path_factory):
    folder = tmp_path_factory.mktemp("straggler_cores")
    try:
        yield gcore_ranks(straggler_job, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # 700 MB a rank: never left for the next run


@pytest.fixture(scope="module")
def straggler_json(straggler_job, tmp_path_factory):
    """The JSON report of ``--job`` on the straggler, taken once for the tests that read it."""
    return _analyze(["--job", straggler_job.launcher_pid], tmp_path_factory.mktemp("straggler_json"))


def test_straggler_from_cores(straggler_job, straggler_cores, tmp_path):
    cores = straggler_cores
    snap = _analyze([cores[r] for r in sorted(cores)], tmp_path)
    _check_straggler(snap, straggler_job)
    for p in snap["processes"]:
        assert p["source"] == "core" and p["dist"]["from"] == "core environment"


def _check_mismatch(snap: Dict, job) -> None:
    assert _ranks(snap) == [0, 1, 2, 3]
    f = _finding(snap, "collective-mismatch")
    assert f["ranks"] == [job.bad_rank], f
    assert re.search(r"ranks 0-2 wait in all_reduce called from train_step \(torch_job\.py:\d+\)", f["summary"]), f
    assert re.search(r"rank 3 waits in broadcast called from sync_params \(torch_job\.py:\d+\)", f["summary"]), f
    assert not [x for x in snap["findings"] if x["signature"] in ("collective-straggler", "rank-missing")]


def test_mismatch_live_job(mismatch_job, tmp_path):
    _check_mismatch(_analyze(["--job", mismatch_job.launcher_pid], tmp_path), mismatch_job)


def test_mismatch_per_rank_snapshots_merged_from_a_folder(mismatch_job, tmp_path):
    """What each node of a cluster does (docs/job.md): scripts/capture-node.sh writes one snapshot
    JSON per rank of the node's torchrun agent; then one `hanganalyze FOLDER` merges them."""
    import subprocess

    folder = tmp_path / "snaps"
    res = subprocess.run(["bash", str(REPO / "scripts" / "capture-node.sh"), str(folder),
                          str(mismatch_job.launcher_pid)], capture_output=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    files = sorted(p.name for p in folder.iterdir() if not p.name.endswith(".node.json"))
    assert len(files) == 4 and all(re.match(r".+\.rank[0-3]\.json$", f) for f in files), files
    assert len(list(folder.glob("*.node.json"))) == 1  # and the node's summary (issue 25)
    for f in folder.iterdir():
        if f.name.endswith(".node.json"):
            continue
        one = json.loads(f.read_text())
        assert len(one["processes"]) == 1 and "job" not in one  # one process each: no job view yet
        assert f.name.endswith(".rank%d.json" % one["processes"][0]["rank"])
    _check_mismatch(_analyze([folder], tmp_path), mismatch_job)


def test_mismatch_from_cores(mismatch_job, tmp_path):
    try:
        cores = gcore_ranks(mismatch_job, tmp_path / "cores")
        _check_mismatch(_analyze([cores[r] for r in sorted(cores)], tmp_path), mismatch_job)
    finally:
        shutil.rmtree(tmp_path / "cores", ignore_errors=True)


def _check_exit(snap: Dict, job, live: bool = False) -> None:
    assert _ranks(snap) == [0, 1, 3]
    f = _finding(snap, "rank-missing")
    assert f["ranks"] == [job.bad_rank], f
    if live:  # --job read every process of the launcher: the rank is gone, not merely not given
        assert "rank 2 of 4 is not among the processes of launcher %d" % job.launcher_pid in f["summary"], f
    else:
        assert "rank 2 of 4 is not in the input" in f["summary"], f
    assert re.search(r"ranks 0-1,3 wait in init_process_group", f["summary"]), f
    assert snap["job"]["missing"] == "2"


def test_exited_rank_live_job(exit_job, tmp_path):
    _check_exit(_analyze(["--job", exit_job.launcher_pid], tmp_path), exit_job, live=True)


def test_one_survivor_still_names_the_rank_that_left(lone_survivor_job, tmp_path):
    """A 2-rank job whose rank 1 exited: --job finds one process, and that is still a job (its
    launcher's only rank of WORLD_SIZE 2), so the missing rank is named; a lone --pid of the same
    process is not (the user may simply not have given the other rank)."""
    job = lone_survivor_job
    snap = _analyze(["--job", job.launcher_pid], tmp_path)
    f = _finding(snap, "rank-missing")
    assert f["ranks"] == [1], f
    assert "rank 1 of 2 is not among the processes of launcher %d" % job.launcher_pid in f["summary"], f
    assert snap["job"]["missing"] == "1"
    alone = _analyze(["--pid", job.rank_pids[0]], tmp_path, name="alone.json", rc=None)
    assert not [x for x in alone["findings"] if x["signature"] == "rank-missing"], alone["findings"]


def test_exited_rank_from_a_folder_of_cores(exit_job, tmp_path):
    try:
        cores = gcore_ranks(exit_job, tmp_path / "cores")
        folder = tmp_path / "all"
        folder.mkdir()
        for r, core in cores.items():
            (folder / ("core.rank%d" % r)).symlink_to(core)
        _check_exit(_analyze([folder], tmp_path), exit_job)
    finally:
        shutil.rmtree(tmp_path / "cores", ignore_errors=True)


def test_multiprocessing_worker_never_answers(mp_job, tmp_path):
    snap = _analyze(["--job", mp_job.launcher_pid], tmp_path)
    pids = sorted(p["pid"] for p in snap["processes"])
    assert pids == sorted([mp_job.launcher_pid] + list(mp_job.rank_pids.values())), pids
    f = _finding(snap, "worker-straggler")
    stuck = mp_job.rank_pids[mp_job.bad_rank]
    assert [snap["processes"][i]["pid"] for i in f["processes"]] == [stuck], f
    assert re.search(r"it is in slow_shard \(mp_job\.py:\d+\)", f["summary"]), f
    assert re.search(r"pids [\d, ]*\b%d\b[\d, ]* wait for other processes" % mp_job.launcher_pid, f["summary"]), f
    assert "pid %d never answers: it is in slow_shard" % stuck in f["summary"], f


def test_a_failing_rank_is_reported_not_fatal(straggler_cores, tmp_path):
    """One input that cannot be read (an incomplete core) next to good ones: the others are analyzed,
    the broken one is named with its error, and the finding still names the straggler."""
    cores = straggler_cores
    bad = tmp_path / "core.rank2"
    with open(cores[2], "rb") as src, open(bad, "wb") as dst:
        dst.write(src.read(3000))
    args = [cores[0], cores[1], bad, cores[3]]
    snap = _analyze(args, tmp_path)
    failed = [p for p in snap["processes"] if p.get("error")]
    assert len(failed) == 1 and failed[0]["rank"] == 2 and "incomplete" in failed[0]["error"], failed
    assert snap["job"]["failed"][0]["rank"] == 2
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [1]


@pytest.mark.parametrize("fmt", ["md", "text", "html"])
def test_job_reports_show_the_diagnosis(straggler_json, tmp_path, fmt):
    snap_path = tmp_path / "job.json"
    snap_path.write_text(json.dumps(straggler_json))
    out = tmp_path / ("r." + fmt)
    res = run_hanganalyze([snap_path, "--format", fmt, "-o", out], timeout=60)  # re-analyzed from the JSON
    assert res.returncode == 3, res.stderr
    text = out.read_text()
    assert "collective-straggler" in text and "load_next_batch" in text
    assert "0,2-3" in text  # the rank class and the tree's branch


def test_ctrl_c_during_a_job_leaves_every_rank_running_untraced(straggler_job):
    """Interrupted while gdb is attached to some ranks: one line, exit 4, no further rank is attached,
    and every rank is detached and running (not stopped, not traced) afterwards."""
    import signal
    import subprocess
    import sys

    from helpers import assert_one_line_error, sigint_default

    # gdb (the slow engine: the direct reader is done with all four ranks before the signal)
    p = subprocess.Popen([sys.executable, "-m", "hanganalyze", "--job", str(straggler_job.launcher_pid),
                          "--parallel", "1", "--engine", "gdb", "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_default)
    time.sleep(4)  # the first rank is being read
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    res = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    assert_one_line_error(res, 4, "interrupted")
    for pid in straggler_job.rank_pids.values():
        status = Path("/proc/%d/status" % pid).read_text()
        assert "TracerPid:\t0" in status, status
        state = re.search(r"State:\s+(\w)", status).group(1)
        assert state in ("S", "R"), (pid, state)
