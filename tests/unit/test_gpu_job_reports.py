"""The job view on a real NCCL job on a GPU, re-checked without a GPU.

tests/data/gpu_job/ holds what `scripts/gpu_job_capture.sh` brought back from an NVIDIA H200
(README.md there says how): the live snapshots of a 2-rank torchrun job (tests/fixtures/gpu/
nccl_job.py) taken by ``hanganalyze --job`` / ``--pid`` through cuda-gdb, and the flight-recorder
dumps its NCCL watchdog wrote when the process group timed out.  Each test re-analyzes them with
the current code, through the CLI as a user would (a snapshot JSON is re-analyzed, not re-read):

* straggler: rank 1 sleeps in ``load_next_batch``; rank 0 enqueued ``all_reduce`` (NCCL returns
  at once) and blocks in the device sync of ``.item()`` right after it;
* mismatch: rank 1 calls ``broadcast``, rank 0 ``all_reduce``, both collective #3; each blocks in
  its own ``.item()``.

With NCCL no stack shows the collective itself: the host waits in ``cuStreamSynchronize``, under
``train_step`` / ``sync_params``.  Which collective it waits for (and its sequence number) comes
only from the flight recorder.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from helpers import REPO, run_hanganalyze

DATA = REPO / "tests" / "data" / "gpu_job"
#: The fixture as it was when the data was captured (tests/fixtures/gpu/nccl_job.py has grown
#: scenarios since): its line numbers are the data's.
FIXTURE = DATA / "nccl_job.captured.py"
#: sha256 of that copy (README.md).
FIXTURE_SHA256 = "f3eff3f3cfdc823f983f6457f7f3dfa35d25f6fd6cfad24b9c885eb95210bfb6"
MD_LIMIT = 65000

STRAGGLER = [DATA / "straggler.job.json"]
STRAGGLER_FR = STRAGGLER + [DATA / "straggler.fr.rank_0", DATA / "straggler.fr.rank_1"]
MISMATCH = [DATA / "mismatch.job.json"]
MISMATCH_FR = MISMATCH + [DATA / "mismatch.fr.rank_0", DATA / "mismatch.fr.rank_1"]

#: rank 0 of the straggler: in the device sync after the collective (or, were the stack to show it,
#: in all_reduce), called from train_step.
RANK0_WAITS = (r"rank 0 waits in (the device sync after (a collective|all_reduce( \(collective #3\))?)"
               r"|all_reduce( \(collective #3\))?) called from train_step \(nccl_job\.py:\d+\)")
RANK1_ELSEWHERE = r"rank 1 never reached it: it is in load_next_batch \(nccl_job\.py:\d+\)"


def _analyze(inputs: List[Path], tmp_path: Path, fmt: str = "json", expect_rc: Optional[int] = 3):
    """The report of ``hanganalyze INPUTS --format FMT`` (parsed for JSON); ``res.returncode`` is
    checked against ``expect_rc`` unless that is None (then it is the report's ``_rc``)."""
    out = tmp_path / ("report." + fmt)
    res = run_hanganalyze([*inputs, "--format", fmt, "-o", out], timeout=120)
    err = res.stderr.decode("utf-8", "replace")
    assert expect_rc is None or res.returncode == expect_rc, "exit %d: %s" % (res.returncode, err[-2000:])
    err = err.replace("hanganalyze: wrote %s (%s)\n" % (out, fmt), "", 1)  # -o's one line (issue 30)
    assert err == "", err
    text = out.read_text(encoding="utf-8")
    if fmt != "json":
        return text
    snap = json.loads(text)
    snap["_rc"] = res.returncode
    return snap


def _findings(snap: Dict, sig: str) -> List[Dict]:
    return [f for f in snap["findings"] if f["signature"] == sig]


def _finding(snap: Dict, sig: str) -> Dict:
    found = _findings(snap, sig)
    assert found, "no %s finding; got %s" % (sig, [(f["signature"], f.get("ranks"), f.get("summary"))
                                                   for f in snap["findings"]])
    return found[0]


def _state(snap: Dict, rank: int) -> Dict:
    return next(s for s in snap["job"]["states"] if s["rank"] == rank)


# ---------------------------------------------------------------------------------- the data


def test_the_data_is_real_gpu_stacks():
    """What came back is what the tests rely on: two live ranks, rank 0 in CUDA's stream sync under
    ``.item()`` (no collective frame on the stack: NCCL returned at once), rank 1 sleeping."""
    for name in ("straggler.job.json", "straggler.pids.json", "mismatch.job.json"):
        snap = json.loads((DATA / name).read_text())
        procs = {p["rank"]: p for p in snap["processes"]}
        assert sorted(procs) == [0, 1], name
        for p in procs.values():
            assert p["source"] == "live" and p["dist"]["world_size"] == 2 and p["dist"]["from"] == "environ"
            assert p["python"]["version"].startswith("3.12")
            assert any("libnccl" in (lib.get("path") or "") for lib in p["libraries"]), name
        main0 = next(t for t in procs[0]["threads"] if t["tid"] == procs[0]["pid"])
        names = [f.get("function") or "" for f in main0["frames"]]
        assert "cuStreamSynchronize" in names and "cudaStreamSynchronize" in names, names
        assert not any("all_reduce" in n or "broadcast" in n for n in names), names


def test_line_numbers_point_at_the_fixture():
    """The line numbers hanganalyze read through cuda-gdb name the right statements of the fixture
    (checked while the fixture is the one the data was captured with)."""
    src = FIXTURE.read_bytes()
    assert hashlib.sha256(src).hexdigest() == FIXTURE_SHA256, "the captured fixture's copy changed"
    lines = src.decode().splitlines()
    snap = json.loads((DATA / "mismatch.job.json").read_text())
    straggler = json.loads((DATA / "straggler.job.json").read_text())
    where = {}
    for s in (snap, straggler):
        for p in s["processes"]:
            main = next(t for t in p["threads"] if t["tid"] == p["pid"])
            py = [f for f in main["frames"] if f["kind"] == "python"]
            where.setdefault(py[0]["function"], py[0]["line"])
    assert "time.sleep" in lines[where["load_next_batch"] - 1]
    assert ".item()" in lines[where["train_step"] - 1]
    assert ".item()" in lines[where["sync_params"] - 1]


# ---------------------------------------------------------------------------------- straggler


def _check_straggler(snap: Dict) -> Dict:
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [1], f
    assert f["severity"] == "hang"
    assert re.search(RANK1_ELSEWHERE, f["summary"]), f["summary"]
    assert re.search(RANK0_WAITS, f["summary"]), f["summary"]
    assert snap["findings"][0]["signature"] == "collective-straggler"
    for sig in ("collective-mismatch", "rank-missing", "collective-hang"):
        assert not _findings(snap, sig), (sig, snap["findings"])
    peer = _finding(snap, "collective-peer-wait")
    assert peer["ranks"] == [0], peer
    assert "train_step (nccl_job.py:" in peer["summary"], peer["summary"]
    # the single-process busy-spin info finding is replaced by the peer wait on that rank
    assert not _findings(snap, "cuda-sync-busy-spin")
    job = snap["job"]
    assert job["world_size"] == 2 and job["ranks"] == "0-1" and job["missing"] == ""
    assert sorted((c["ranks"], c["state"]) for c in job["classes"]) == [("0", "device-sync"), ("1", "elsewhere")]
    assert _state(snap, 0)["where"].startswith("cuStreamSynchronize")
    return f


def test_straggler_live_job(tmp_path):
    """``hanganalyze --job TORCHRUN_PID`` on the GPU: rank 1 named, with its function and line."""
    _check_straggler(_analyze(STRAGGLER, tmp_path))


def test_straggler_several_pids(tmp_path):
    """``hanganalyze --pid R1 --pid R0`` on the GPU: the same diagnosis."""
    _check_straggler(_analyze([DATA / "straggler.pids.json"], tmp_path))


def test_straggler_with_flight_recorder(tmp_path):
    """Stacks and dumps joined by rank: the collective and its sequence numbers in the summary."""
    snap = _analyze(STRAGGLER_FR, tmp_path)
    f = _check_straggler(snap)
    assert "the device sync after all_reduce (collective #3) called from train_step" in f["summary"], f["summary"]
    assert "(flight recorder: rank 1 last enqueued #2, the others #3)" in f["summary"], f["summary"]
    assert _state(snap, 0)["seq"] == 3 and _state(snap, 0)["op"] == "all_reduce"
    assert len(snap["processes"]) == 2  # each dump joined to its rank's stacks, not a process of its own
    for p in snap["processes"]:
        assert any("flight-recorder dump" in n and "joined" in n for n in p.get("notes", [])), p.get("notes")


def test_straggler_from_the_dumps_alone(tmp_path):
    snap = _analyze(STRAGGLER_FR[1:], tmp_path)
    f = _finding(snap, "collective-straggler")
    assert f["ranks"] == [1], f
    assert "rank 0 waits in all_reduce (collective #3) called from train_step" in f["summary"], f["summary"]
    assert "rank 1 never reached it: no stack in the input" in f["summary"], f["summary"]
    assert "(flight recorder: rank 1 last enqueued #2, the others #3)" in f["summary"], f["summary"]


# ---------------------------------------------------------------------------------- mismatch


def _check_mismatch_call_sites(snap: Dict) -> Dict:
    f = _finding(snap, "collective-mismatch")
    assert f["ranks"] == [0, 1], f  # one rank each way: no majority, so neither is blamed alone
    assert "no majority" in f["summary"], f["summary"]
    assert re.search(r"rank 0 waits in .*called from train_step \(nccl_job\.py:\d+\)", f["summary"]), f["summary"]
    assert re.search(r"rank 1 waits in .*called from sync_params \(nccl_job\.py:\d+\)", f["summary"]), f["summary"]
    assert not _findings(snap, "collective-hang"), snap["findings"]
    assert not _findings(snap, "collective-straggler"), snap["findings"]
    return f


def test_mismatch_live_job(tmp_path):
    """Stacks only: rank 0 waits in the device sync under train_step, rank 1 under sync_params.

    The stacks cannot name the collectives (NCCL returned from both at once), but they show the
    two ranks blocked at different call sites, so "every rank waits in the same collective"
    (``collective-hang``, naming train_step for both) is false.  Expected: a mismatch naming both
    call sites; with one rank on each side there is no majority, so both are named (no tie-break
    blames a rank without evidence).
    """
    snap = _analyze(MISMATCH, tmp_path)
    assert _state(snap, 0)["call_site"].startswith("train_step (nccl_job.py:")
    assert _state(snap, 1)["call_site"].startswith("sync_params (nccl_job.py:")
    _check_mismatch_call_sites(snap)


def test_mismatch_with_flight_recorder(tmp_path):
    """With the dumps each rank's pending collective is known: all_reduce #3 against broadcast #3."""
    snap = _analyze(MISMATCH_FR, tmp_path)
    f = _check_mismatch_call_sites(snap)
    assert "rank 0 waits in the device sync after all_reduce (collective #3) called from train_step" in f["summary"]
    assert "rank 1 waits in the device sync after broadcast (collective #3) called from sync_params" in f["summary"]
    peer = _finding(snap, "collective-peer-wait")
    assert peer["ranks"] == [0, 1], peer


def test_mismatch_peer_wait_names_each_ranks_collective(tmp_path):
    """One ``collective-peer-wait`` for both ranks must not say that rank 1 waits after all_reduce
    called from train_step: rank 1 waits after broadcast, in sync_params."""
    for inputs in (MISMATCH, MISMATCH_FR):
        peer = _finding(_analyze(inputs, tmp_path), "collective-peer-wait")
        assert peer["ranks"] == [0, 1], peer
        assert "sync_params" in peer["summary"], peer["summary"]


def test_mismatch_from_the_dumps_alone(tmp_path):
    """The dumps alone show it too: both ranks time out in collective #3, rank 0's is all_reduce and
    rank 1's broadcast (each ``scheduled``, never completed).  A report with no finding and exit
    status 0 ("no hang") is wrong."""
    snap = _analyze(MISMATCH_FR[1:], tmp_path, expect_rc=None)
    f = _finding(snap, "collective-mismatch")
    assert f["ranks"] == [0, 1], f
    assert "all_reduce" in f["summary"] and "broadcast" in f["summary"], f["summary"]
    assert snap["_rc"] == 3  # a hang finding


# ---------------------------------------------------------------------------------- reports


@pytest.mark.parametrize("inputs,sig,what", [
    (STRAGGLER, "collective-straggler", "load_next_batch"),
    (STRAGGLER_FR, "collective-straggler", "last enqueued #2"),
    (MISMATCH_FR, "collective-mismatch", "sync_params"),
], ids=["straggler", "straggler+fr", "mismatch+fr"])
def test_markdown_report(tmp_path, inputs, sig, what):
    md = _analyze(inputs, tmp_path, fmt="md")
    assert len(md) < MD_LIMIT, len(md)
    assert sig in md and what in md
    assert "Merged call tree" in md


@pytest.mark.parametrize("name", ["straggler.job.md", "straggler.job+fr.md", "mismatch.job+fr.md"])
def test_markdown_written_on_the_device(name):
    md = (DATA / name).read_text(encoding="utf-8")
    assert len(md) < MD_LIMIT, len(md)
    assert ("collective-straggler" if name.startswith("straggler") else "collective-mismatch") in md
