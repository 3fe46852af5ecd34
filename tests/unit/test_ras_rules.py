"""Saved NCCL RAS output as an input, the four RAS job rules and the report's "NCCL RAS" section,
on the real captures (tests/data/nccl_ras: 2x H200, NCCL 2.28.9, a stopped, a slow and a healthy
job, three queries each) and on near misses made from them (one count or flag changed)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

from hanganalyze import cli
from hanganalyze.acquire.inputs import acquire
from hanganalyze.acquire.ncclras import read_ras
from hanganalyze.analyze.crossrank import JobContext
from hanganalyze.analyze.rasrules import ERROR_ID, PROGRESSING_ID, SLOW_ID, STUCK_ID, nccl_ras_findings
from hanganalyze.analyze.rules import load_rules
from hanganalyze.errors import EXIT_HANG, EXIT_INPUT, EXIT_OK, InputError
from hanganalyze.pipeline import analyze
from hanganalyze.render.rasview import ONE_QUERY
from hanganalyze_gdbext.model import Finding, Process, Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_ras"
RAS_IDS = {STUCK_ID, SLOW_ID, PROGRESSING_ID, ERROR_ID}
TIME_IDS = {STUCK_ID, SLOW_ID, PROGRESSING_ID}
HANGISH = {"hang", "deadlock", "crash"}


def files(job: str, form: str = "json") -> List[str]:
    return [str(DATA / ("%s.query%d.%s" % (job, i, form))) for i in (1, 2, 3)]


def analyzed(paths: Sequence[str]) -> Snapshot:
    return analyze(Snapshot(nccl_ras=read_ras(paths)), None)


def run(capsys, *argv: str):
    rc = cli.run(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def verdict(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("VERDICT: "))


# --- the real captures --------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["json", "txt"])
def test_stuck_names_the_rank_behind(capsys, form):
    rc, out, _ = run(capsys, *files("stuck", form))
    assert rc == EXIT_HANG
    line = verdict(out)
    assert "rank 1 (pid 674) is behind and not moving (stuck)" in line and line.endswith("[nccl-ras-stuck]")
    snap = analyzed(files("stuck", form))
    (f,) = [f for f in snap.findings if f.signature in RAS_IDS]
    assert f.signature == STUCK_ID and f.severity == "hang" and f.ranks == [1]


@pytest.mark.parametrize("job,want", [("slow", SLOW_ID), ("healthy", PROGRESSING_ID)])
def test_slow_and_healthy_give_no_hang(capsys, job, want):
    rc, out, _ = run(capsys, *files(job))
    assert rc == EXIT_OK and verdict(out).endswith("[%s]" % want)
    snap = analyzed(files(job))
    assert [f.signature for f in snap.findings if f.signature in RAS_IDS] == [want]
    assert not [f for f in snap.findings if f.severity in HANGISH]
    for form in ("txt",):  # the text form: slow is told; a healthy job's text carries no count at all
        snap = analyzed(files(job, form))
        assert not [f for f in snap.findings if f.severity in HANGISH]
    if job == "slow":
        (f,) = snap.findings
        assert f.signature == SLOW_ID and f.severity == "warning" and f.ranks == [1]


@pytest.mark.parametrize("path", sorted(str(p) for p in DATA.glob("*.query*.*")))
def test_one_query_gives_no_time_verdict(capsys, path):
    snap = analyzed([path])
    assert not [f for f in snap.findings if f.signature in TIME_IDS]
    rc, out, _ = run(capsys, path)
    assert rc == EXIT_OK and ONE_QUERY in out


def test_one_file_holding_three_queries(tmp_path, capsys):
    both = tmp_path / "stuck-all.json"
    both.write_text("".join(Path(p).read_text() for p in files("stuck")))
    rc, out, _ = run(capsys, str(both))
    assert rc == EXIT_HANG and "[nccl-ras-stuck]" in verdict(out)


@pytest.mark.parametrize("text,says", [
    ("NCCL version 2.28.9 compiled with CUDA 13.0\nCUDA runtime version 13000, driver version 13000\n\n"
     "#0-0 (5e413f75dea32c06) MISMATCH\n  Communicator ranks have different AllReduce operation counts\n"
     "  Rank 1 has launched up to operation 99999999999999999999 -- GPU 1 managed by process 674 on node x\n",
     "out of range"),
    (None, "truncated JSON"),
])
def test_garbage_ras_output_is_one_input_error(tmp_path, capsys, text, says):
    bad = tmp_path / "bad.ras"
    bad.write_text(text if text is not None else Path(files("stuck")[0]).read_text()[:700])
    rc, out, err = run(capsys, str(bad))
    assert rc == EXIT_INPUT and out == ""
    assert len(err.strip().splitlines()) == 1 and says in err and "bad.ras" in err
    with pytest.raises(InputError):
        acquire(str(bad), None, None)  # type: ignore[arg-type]  # a text input reads no engine


# --- near misses, one per rule --------------------------------------------------------------------


def variant(tmp_path: Path, counts: Sequence[Sequence[int]], **status) -> List[str]:
    """The stuck job's first query, one file per entry of ``counts`` (each rank's AllReduce count),
    2 s apart, with ``status`` set on rank 1 (``missing=True``: rank 1 missing instead)."""
    base = json.loads(Path(files("stuck")[0]).read_text())
    out = []
    for i, per_rank in enumerate(counts):
        d = copy.deepcopy(base)
        d["timestamp"] = "2026-11-28 02:42:%02d" % (30 + 2 * i)
        comm = d["communicators"][0]
        for r, n in zip(comm["ranks"], per_rank):
            r["collective_counts"]["AllReduce"] = n
        if status.get("missing"):
            gone = comm["ranks"].pop(1)
            comm["missing_ranks"] = [{"rank": 1, "host": gone["host"], "pid": gone["pid"], "cuda_dev": 1,
                                      "nvml_dev": 1, "status": {"unresponsive": True, "considered_dead": False}}]
        else:
            comm["ranks"][1]["status"].update({k: v for k, v in status.items()})
        p = tmp_path / ("q%d.json" % i)
        p.write_text(json.dumps(d))
        out.append(str(p))
    return out


def ras_ids(paths: Sequence[str]) -> Dict[str, Finding]:
    return {f.signature: f for f in analyzed(paths).findings if f.signature in RAS_IDS}


def test_near_miss_stuck(tmp_path):
    assert set(ras_ids(variant(tmp_path, [(4, 3), (4, 3), (4, 3)]))) == {STUCK_ID}
    # the rank behind moved once: slow, never stuck
    assert set(ras_ids(variant(tmp_path, [(4, 3), (5, 4), (6, 5)]))) == {SLOW_ID}
    # nothing moved but nobody is behind: idle, or all inside one collective -- RAS cannot tell
    assert set(ras_ids(variant(tmp_path, [(4, 4), (4, 4), (4, 4)]))) == set()


def test_near_miss_slow(tmp_path):
    assert set(ras_ids(variant(tmp_path, [(4, 3), (6, 5), (8, 7)]))) == {SLOW_ID}
    # level in one query: the job progresses, no rank is behind in every query
    assert set(ras_ids(variant(tmp_path, [(4, 3), (6, 6), (8, 7)]))) == {PROGRESSING_ID}


def test_near_miss_progressing(tmp_path):
    assert set(ras_ids(variant(tmp_path, [(4, 4), (6, 6), (9, 9)]))) == {PROGRESSING_ID}
    # rank 0 ran ahead, rank 1 stayed: stuck, not progressing
    assert set(ras_ids(variant(tmp_path, [(4, 4), (6, 4), (9, 4)]))) == {STUCK_ID}


def test_near_miss_error(tmp_path):
    moving = [(4, 4), (6, 6)]
    assert set(ras_ids(variant(tmp_path, moving, async_error=7))) == {PROGRESSING_ID}  # "in progress": no error
    got = ras_ids(variant(tmp_path, moving, async_error=6))
    assert got[ERROR_ID].severity == "error" and "rank 1 (pid 674) async error 6 (remote process error)" \
        in got[ERROR_ID].summary and got[ERROR_ID].ranks == [1]
    assert "aborted" in ras_ids(variant(tmp_path, moving, abort_flag=True))[ERROR_ID].summary
    missing = ras_ids(variant(tmp_path, [(4,), (4,)], missing=True))[ERROR_ID]
    assert "rank 1 (pid 674) is unresponsive" in missing.summary


def test_a_rank_behind_over_a_short_window_makes_no_ras_finding_and_clears_nothing():
    """A live run the stacks settled queries RAS over the stack window only (issue 31): the rank
    behind, not moving, over 1.0 s is named in the RAS section but makes no finding -- neither
    stuck, nor a progressing finding from another communicator of the same processes that moved
    (it would supersede the stack findings that say the job is stopped)."""
    stuck = read_ras(files("stuck"))
    for q, t in zip(stuck.queries, (100.0, 100.5, 101.0)):
        q.time_s = t
    assert nccl_ras_findings(JobContext(Snapshot(nccl_ras=copy.deepcopy(stuck)), [], None)) == []
    healthy = read_ras(files("healthy")).queries
    for q, h in zip(stuck.queries, healthy):
        comm = copy.deepcopy(h.communicators[0])
        for r, pid in zip(comm.ranks, (673, 674)):
            r.pid = pid
        q.communicators.append(comm)
    assert nccl_ras_findings(JobContext(Snapshot(nccl_ras=stuck), [], None)) == []
    for q, t in zip(stuck.queries, (100.0, 101.0, 102.0)):  # over 2 s: stuck
        q.time_s = t
    assert [f.signature for f in nccl_ras_findings(JobContext(Snapshot(nccl_ras=stuck), [], None))] == [STUCK_ID]


# --- joined to the job's processes by pid ---------------------------------------------------------


def _job(pids: Sequence[int], ranks: Sequence[int]) -> Snapshot:
    return Snapshot(processes=[Process(pid=p, rank=r) for p, r in zip(pids, ranks)],
                    nccl_ras=read_ras(files("slow")))


def test_a_verdict_names_the_process_by_pid_and_supersedes_stack_findings():
    snap = _job([820, 821], [10, 11])  # job ranks differ from the communicator's 0/1: the pid decides
    (f,) = nccl_ras_findings(JobContext(snap, [], None))
    assert f.signature == SLOW_ID and f.process == 1 and f.ranks == [11] and sorted(f.processes) == [0, 1]
    stack = [Finding("collective-peer-wait", "t", "hang", 0), Finding("collective-straggler", "t", "hang", 1),
             Finding("cuda-host-waits-for-device", "t", "hang", 0), Finding("collective-hang", "t", "hang", 0),
             Finding("rank-missing", "t", "hang", 0), Finding("cuda-sync-busy-spin", "t", "hang", 1)]
    kept = load_rules().superseded([f], stack)
    assert [k.signature for k in kept] == ["rank-missing", "cuda-sync-busy-spin"]  # only waits a moving job explains


def test_another_jobs_answer_is_not_used():
    snap = _job([4242, 4243], [0, 1])
    assert nccl_ras_findings(JobContext(snap, [], None)) == []
    assert any("none of this job's processes" in w for w in snap.warnings)


# --- the report -----------------------------------------------------------------------------------


def test_report_section_in_every_format(tmp_path, capsys):
    named = tmp_path / "<b>q"
    named.mkdir()
    paths = []
    for p in files("stuck"):
        dst = named / Path(p).name
        dst.write_bytes(Path(p).read_bytes())
        paths.append(str(dst))
    rc, out, _ = run(capsys, *paths)
    assert "NCCL RAS\n  source: saved RAS output: %s (2026-11-28 02:42:34)" % paths[0] in out
    rc, md, _ = run(capsys, "--format", "md", *paths)
    assert "### NCCL RAS" in md and "AllReduce counts 4/3 unchanged" in md
    rc, html, _ = run(capsys, "--format", "html", *paths)
    assert 'id="nccl-ras"' in html and "&lt;b&gt;q" in html and "<b>q" not in html
    rc, js, _ = run(capsys, "--format", "json", *paths)
    d = json.loads(js)
    assert len(d["nccl_ras"]["queries"]) == 3 and "live" not in d["nccl_ras"]
    assert d["findings"][0]["signature"] == STUCK_ID


# --- beside the stacks of a job: issue 31's shapes --------------------------------------------------

PYSPY = 'Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\nThread {pid} (idle): "MainThread"\n'
IN_ALL_REDUCE = ("    all_reduce (torch/distributed/distributed_c10d.py:2501)\n"
                 "    wrapper (torch/distributed/c10d_logger.py:83)\n"
                 "    train_step (train.py:30)\n    <module> (train.py:40)\n")
IN_AUGMENT = "    augment_batch (train.py:12)\n    train_step (train.py:28)\n    <module> (train.py:40)\n"


@pytest.mark.parametrize("job,pids,rank1,stack_only,want,rc", [
    # rank 1 in its data step, rank 0 in all_reduce: the stacks alone accuse rank 1 (collective-straggler)
    ("slow", (820, 821), IN_AUGMENT, "collective-straggler", SLOW_ID, EXIT_OK),
    ("stuck", (673, 674), IN_AUGMENT, "collective-straggler", STUCK_ID, EXIT_HANG),
    # both caught in all_reduce: the stacks alone say the collective hangs
    ("healthy", (962, 963), IN_ALL_REDUCE, "collective-hang", PROGRESSING_ID, EXIT_OK),
])
def test_saved_ras_beside_rank_stacks(tmp_path, capsys, job, pids, rank1, stack_only, want, rc):
    stacks = []
    for r, (pid, body) in enumerate(zip(pids, (IN_ALL_REDUCE, rank1))):
        p = tmp_path / ("rank%d.txt" % r)
        p.write_text(PYSPY.format(pid=pid) + body)
        stacks.append(str(p))
    got, out, _ = run(capsys, "--format", "json", *stacks)
    assert stack_only in {f["signature"] for f in json.loads(out)["findings"]}
    got, out, _ = run(capsys, "--format", "json", *stacks, *files(job))
    sigs = [f["signature"] for f in json.loads(out)["findings"]]
    # stuck agrees with the stacks (both stay); slow and progressing replace the stack-only accusation
    assert got == rc and want in sigs and (stack_only in sigs) == (want == STUCK_ID)
    got, out, _ = run(capsys, *stacks, *files(job))
    line = verdict(out)
    assert line.endswith("[%s]" % want) or want == STUCK_ID
    if want == PROGRESSING_ID:
        assert line.startswith("VERDICT: no hang: communicator 0xb59cad56915b07c0: AllReduce counts 8102/8102 -> ")
    if want != PROGRESSING_ID:
        assert line.startswith("VERDICT: rank 1 is in augment_batch (train.py:12) -- ")
        assert ("SLOW, not stuck" in line) == (want == SLOW_ID)


def test_piped_output_and_hostile_file_names(tmp_path, capsys):
    from hanganalyze.acquire.inputs import _from_text

    snap = _from_text(Path(files("slow")[0]).read_text(), None)  # ncclras -f json | hanganalyze -
    assert [q.source for q in snap.nccl_ras.queries] == ["stdin"] and snap.processes == []
    odd = tmp_path / "q\x1b[31mred.json"
    odd.write_bytes(Path(files("stuck")[0]).read_bytes())
    rc, out, _ = run(capsys, str(odd))
    assert rc == EXIT_OK and "\x1b" not in out and "NCCL RAS\n  source: saved RAS output: " in out


# --- real live runs on 2x H200 (tests/data/nccl_ras/live: hanganalyze --job with live RAS queries) --------

LIVE = DATA / "live"


@pytest.mark.parametrize("name,want,rc,lead", [
    ("stuck", STUCK_ID, EXIT_HANG, "VERDICT: rank 1 is in augment_batch (job.py:17) -- STUCK"),
    ("slow", SLOW_ID, EXIT_OK, "VERDICT: rank 1 is in augment_batch (job.py:19) -- SLOW, not stuck"),
    ("healthy", PROGRESSING_ID, EXIT_OK, "VERDICT: no hang: communicator 0xec8d33bf644317bd: AllReduce counts"),
])
def test_real_live_job_snapshots(capsys, name, want, rc, lead):
    got, out, _ = run(capsys, str(LIVE / ("%s.json" % name)))
    line = verdict(out)
    assert got == rc and line.startswith(lead) and "[%s]" % want in line
    assert "source: live queries of localhost:28028 at " in out
    got, out, _ = run(capsys, "--format", "json", str(LIVE / ("%s.json" % name)))
    found = json.loads(out)["findings"]
    assert want in {f["signature"] for f in found}
    if want != STUCK_ID:
        assert not [f for f in found if f["severity"] in HANGISH]


def test_real_shared_port_answers_of_other_jobs_are_not_used(capsys):
    got, out, _ = run(capsys, "--format", "json", str(LIVE / "shared-port.json"))
    d = json.loads(out)
    assert not [f for f in d["findings"] if f["signature"] in RAS_IDS]
    assert any("none of this job's processes: not used" in w for w in d["warnings"])


def test_a_report_of_ras_queries_reads_back(tmp_path, capsys):
    report = tmp_path / "r.json"
    rc, _, _ = run(capsys, "--format", "json", "-o", str(report), *files("stuck"))
    assert rc == EXIT_HANG
    rc, out, _ = run(capsys, str(report))  # a snapshot, not RAS output: read as it is, analyzed again
    assert rc == EXIT_HANG and verdict(out).endswith("[nccl-ras-stuck]")
