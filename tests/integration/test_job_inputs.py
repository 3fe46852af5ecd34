"""The job view from real captured inputs that need no gdb: a real 2-rank NCCL straggler on H200s
(py-spy and pystack texts of each rank, PyTorch's flight-recorder dumps, the torchrun log; see
tests/data/flight_recorder/README.md and tests/data/job/README.md), mixed as a user would pass them.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path
from typing import Dict, List

from helpers import REPO, assert_one_line_error, run_hanganalyze

FR = REPO / "tests" / "data" / "flight_recorder"
JOB = REPO / "tests" / "data" / "job"
FR_DUMPS = [FR / "straggler.fr.rank_0", FR / "straggler.fr.rank_1"]


def _json(args: List, code: int = 3) -> Dict:
    res = run_hanganalyze(list(args) + ["--format", "json"], timeout=120)
    assert res.returncode == code, res.stderr.decode()[-2000:]
    return json.loads(res.stdout)


def _finding(snap: Dict, sig: str) -> Dict:
    found = [f for f in snap["findings"] if f["signature"] == sig]
    assert found, [(f["signature"], f["summary"]) for f in snap["findings"]]
    return found[0]


def test_flight_recorder_dumps_alone_name_the_rank_behind():
    snap = _json(FR_DUMPS)
    assert [(p["rank"], p["source"]) for p in snap["processes"]] == [(0, "flight-recorder"), (1, "flight-recorder")]
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [1]
    assert f["summary"] == ("rank 0 waits in all_reduce (collective #3) called from train_step (fr_strag.py:8); "
                            "rank 1 never reached it: no stack in the input "
                            "(flight recorder: rank 1 last enqueued #2, the others #3)")


def test_stacks_and_dumps_are_joined_by_rank(tmp_path):
    # file names carry the rank (fstrag.rank0.pyspy.txt): the texts get ranks 0 and 1 from them
    snap = _json([JOB / "fstrag.rank0.pyspy.txt", JOB / "fstrag.rank1.pyspy.txt"] + FR_DUMPS)
    assert [p["rank"] for p in snap["processes"]] == [0, 1]  # each dump joined to its rank's stacks
    assert all(p["collectives"]["source"] == "flight-recorder" for p in snap["processes"])
    f = snap["findings"][0]
    assert f["signature"] == "collective-straggler" and f["ranks"] == [1]
    assert f["summary"] == (
        # line 8 calls all_reduce (the dump says so); line 9's .item() is where the host waits
        "rank 0 waits in the device sync after all_reduce (collective #3) called from train_step (fr_strag.py:8); "
        "rank 1 never reached it: it is in load_next_batch (fr_strag.py:6) "
        "(flight recorder: rank 1 last enqueued #2, the others #3)")
    peer = _finding(snap, "collective-peer-wait")
    assert peer["ranks"] == [0]
    # the single-process info finding is replaced by what it means in a job
    assert not [x for x in snap["findings"] if x["signature"] == "cuda-sync-busy-spin"]
    classes = sorted((c["ranks"], c["state"]) for c in snap["job"]["classes"])
    assert classes == [("0", "device-sync"), ("1", "elsewhere")]


def test_the_same_stacks_without_the_job_context_stay_single_process():
    """One rank alone, no rank known (stdin): the old per-process answer, no job view."""
    text = (JOB / "fstrag.rank0.pyspy.txt").read_bytes()
    res = run_hanganalyze(["-", "--format", "json"], stdin=text, timeout=60)
    snap = json.loads(res.stdout)
    assert "job" not in snap and snap["processes"][0].get("rank") is None
    # the per-process answer: the host waits in the device sync (issue 22's class-level GPU wait,
    # with the busy-spin fact and the triage); nothing about other ranks
    assert [f["signature"] for f in snap["findings"]] == ["cuda-host-waits-for-device", "cuda-sync-busy-spin",
                                                          "triage"]


def test_torchrun_log_watchdog_lines_give_sequence_numbers():
    snap = _json([FR / "straggler.torchrun.log"], code=6)  # the watchdog aborted the ranks: a crash-severity finding
    by_rank = {p.get("rank"): p for p in snap["processes"]}
    assert by_rank[0]["collectives"]["groups"]["0"]["last_enqueued"] == 3
    assert by_rank[1]["collectives"]["groups"]["0"]["last_enqueued"] == 2
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [1] and "(PyTorch watchdog log: rank 1 last enqueued #2, the others #3)" in f["summary"], f


def test_a_folder_of_mixed_inputs(tmp_path):
    folder = tmp_path / "hang"
    folder.mkdir()
    shutil.copy(JOB / "fstrag.rank1.pyspy.txt", folder / "rank1.txt")
    shutil.copy(JOB / "fstrag.rank0.pyspy.txt", folder / "rank0.txt")
    for d in FR_DUMPS:
        shutil.copy(d, folder / d.name)
    snap = _json([folder])
    assert [p["rank"] for p in snap["processes"]] == [0, 1]
    assert snap["findings"][0]["signature"] == "collective-straggler" and snap["findings"][0]["ranks"] == [1]


def test_a_job_report_reanalyzed_from_its_json_gives_the_same_findings(tmp_path):
    first = _json([JOB / "fstrag.rank0.pyspy.txt", JOB / "fstrag.rank1.pyspy.txt"] + FR_DUMPS)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(first))
    again = _json([path])
    assert [(f["signature"], f["ranks"], f["summary"]) for f in again["findings"]] == \
        [(f["signature"], f["ranks"], f["summary"]) for f in first["findings"]]
    assert again["bucket"] == first["bucket"]


class _Evil:
    def __reduce__(self):
        return (print, ("owned",))


def test_a_hostile_dump_is_one_line_alone_and_a_failed_rank_among_others(tmp_path):
    evil = tmp_path / "evil.fr.rank_1"
    evil.write_bytes(pickle.dumps({"version": "2.10", "entries": [_Evil()], "pg_status": {}}, protocol=4))
    res = run_hanganalyze([evil], timeout=60)
    assert_one_line_error(res, 2, "refused")
    snap = _json([FR_DUMPS[0], evil], code=4)  # a rank not analyzed, and no serious finding in the rest
    failed = [p for p in snap["processes"] if p.get("error")]
    assert len(failed) == 1 and failed[0]["rank"] == 1 and "refused" in failed[0]["error"]
    assert snap["job"]["failed"][0]["rank"] == 1


def test_every_input_failing_is_one_line(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"\x00\x01binary")
    b.write_bytes(b"\x00\x02binary")
    assert_one_line_error(run_hanganalyze([a, b], timeout=60), 2, "every input failed")


def test_job_of_a_process_without_python_workers_is_one_line():
    import subprocess

    p = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    try:
        assert_one_line_error(run_hanganalyze(["--job", p.pid], timeout=60), 2, "found no Python worker process")
    finally:
        p.kill()
        p.wait()
    assert_one_line_error(run_hanganalyze(["--job", p.pid], timeout=60), 2, "no such process")


def test_paths_and_ranks_in_names(tmp_path):
    from hanganalyze.acquire.ranks import identity_from_environ, rank_from_name

    assert rank_from_name("straggler.fr.rank_0") == 0 and rank_from_name("/x/rank12.json") == 12
    assert rank_from_name("fr_rank-7.json") == 7 and rank_from_name("crankshaft3.txt") is None
    assert rank_from_name("rank99999999999.txt") is None
    rank, dist = identity_from_environ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SECRET": "x"}, "environ")
    assert rank == 3 and dist.to_dict() == {"launcher": "torch", "from": "environ", "world_size": 8, "local_rank": 1}
    rank, dist = identity_from_environ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "6"}, "environ")
    assert rank == 5 and dist.launcher == "openmpi" and dist.world_size == 6
    assert identity_from_environ({"RANK": "-1"}, "environ") == (None, None)
    assert Path(str(tmp_path)).is_dir()
