"""NCCL RAS answers read from real captures (tests/data/nccl_ras: 2x H200, NCCL 2.28.9), in both
forms, concatenated or one per file, hostile ones refused in one line; and the live client against
a real TCP server speaking RAS's protocol and replaying the captured bytes."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rasserver import RasServer

from hanganalyze.acquire.ncclras import looks_like_ras, parse_ras, query_ras, ras_address, read_ras, sample_ras
from hanganalyze.analyze import rasprogress
from hanganalyze.analyze.rasprogress import BEHIND, STUCK, ras_progress
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.ncclras import JSON, TEXT, RasSeries

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_ras"


def files(job: str, form: str) -> List[Path]:
    return sorted(DATA.glob("%s.query*.%s" % (job, form)))


def test_every_capture_is_recognised_and_other_inputs_are_not():
    for path in DATA.glob("*.query*"):
        assert looks_like_ras(path.read_text()[:4096]), path
    assert not looks_like_ras((DATA / "README.md").read_text())
    assert not looks_like_ras("host:12:12 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\nCUDA runtime version 1\n")
    assert not looks_like_ras('{"schema": "hanganalyze/1", "processes": []}')
    assert not looks_like_ras("Thread 1 (Thread 0x7f (LWP 12)):\n#0  0x0 in poll ()\n")


def test_json_query_carries_every_field():
    q = read_ras(files("stuck", "json")[:1]).queries[0]
    assert (q.format, q.nccl_version, q.cuda_runtime_version, q.timestamp) == (JSON, "2.28.9", 13000,
                                                                              "2026-11-28 02:42:34")
    assert q.communicators_count == 1 and q.timeouts_count == 0 and q.collection_time_s == 0.0
    (c,) = q.communicators
    assert (c.hash, c.size, c.ranks_count, c.missing_ranks_count, c.missing_ranks) == ("0x5e413f75dea32c06", 2, 2, 0,
                                                                                       [])
    assert c.secondary_hash == "0x439a40a2c2aa4762:0x47c34b617f236ce7"
    r0, r1 = c.ranks
    assert (r0.rank, r0.pid, r0.host, r0.cuda_dev, r0.nvml_dev) == (0, 673, "192.0.2.2", 0, 0)
    assert (r1.rank, r1.pid, r1.cuda_dev, r1.init_state, r1.async_error) == (1, 674, 1, 0, 0)
    assert not (r1.abort_flag or r1.destroy_flag or r1.finalize_called)
    assert r0.counts == {"Broadcast": 0, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": 4}
    assert r1.counts["AllReduce"] == 3


def test_text_query_has_counts_only_where_ranks_differ():
    stuck = read_ras(files("stuck", "txt")).queries
    assert [q.format for q in stuck] == [TEXT] * 3 and all(q.time_s is None for q in stuck)
    (c,) = stuck[0].communicators
    assert (c.hash, c.size, c.problems) == ("0x5e413f75dea32c06", 2, ["MISMATCH"])  # the JSON's hash spelling
    assert [(r.rank, r.pid, r.host, r.cuda_dev, r.counts) for r in c.ranks] == [
        (0, 673, "192.0.2.2", 0, {"AllReduce": 4}), (1, 674, "192.0.2.2", 1, {"AllReduce": 3})]
    (g,) = stuck[0].groups
    assert (g.status, g.errors, g.ranks_per_comm, g.comms) == ("RUNNING", "MISMATCH", 2, 1)
    healthy = read_ras(files("healthy", "txt")).queries[0]
    assert healthy.communicators == [] and healthy.groups[0].errors == "OK"
    slow = [q.communicators[0].ranks[1].counts["AllReduce"] for q in read_ras(files("slow", "txt")).queries]
    assert slow == [16, 21, 26]


def test_text_and_json_of_one_query_agree():
    for job in ("stuck", "slow"):
        for j, t in zip(read_ras(files(job, "json")).queries, read_ras(files(job, "txt")).queries):
            cj, ct = j.communicators[0], t.communicators[0]
            assert cj.hash == ct.hash
            assert [(r.rank, r.pid, r.counts["AllReduce"]) for r in cj.ranks] == [
                (r.rank, r.pid, r.counts["AllReduce"]) for r in ct.ranks]


@pytest.mark.parametrize("form", ["json", "txt"])
def test_concatenated_queries_in_one_file(tmp_path, form):
    joined = tmp_path / ("all." + form)
    joined.write_text("".join(p.read_text() for p in files("slow", form)))
    s = read_ras([joined])
    assert [q.source for q in s.queries] == [str(joined), "%s#2" % joined, "%s#3" % joined]
    assert [q.communicators[0].ranks[0].counts["AllReduce"] for q in s.queries] == [17, 22, 27]


def test_a_protocol_transcript_reads_too(tmp_path):
    t = tmp_path / "nc.txt"
    t.write_text("SERVER PROTOCOL 2\nOK\n" + files("stuck", "json")[0].read_text())
    assert looks_like_ras(t.read_text())
    assert read_ras([t]).queries[0].communicators[0].ranks[1].counts["AllReduce"] == 3


def test_both_forms_keep_json_and_time_orders_the_queries():
    s = read_ras(files("stuck", "txt") + list(reversed(files("stuck", "json"))))
    assert [q.format for q in s.queries] == [JSON] * 3
    assert [q.timestamp for q in s.queries] == ["2026-11-28 02:42:34", "2026-11-28 02:42:36", "2026-11-28 02:42:38"]
    assert any("text quer" in n for n in s.notes) and any("timestamps" in n for n in s.notes)


def test_model_round_trip_and_old_snapshots_unchanged():
    s = read_ras(files("slow", "json"))
    back = RasSeries.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    assert "nccl_ras" not in Snapshot().to_dict()  # additive: absent when empty
    assert Snapshot.from_dict(Snapshot(nccl_ras=s).to_dict()).nccl_ras == s


STUCK_JSON = (DATA / "stuck.query1.json").read_text()


@pytest.mark.parametrize("text,says", [
    ("hello world\n", "not NCCL RAS output"),
    (STUCK_JSON[: len(STUCK_JSON) // 2], "truncated JSON"),
    (STUCK_JSON.replace('"pid": 674', '"pid": "674"'), "ranks[1].pid: expected an integer, got a string"),
    (STUCK_JSON.replace('"AllReduce": 3', '"AllReduce": -3'), "out of range"),
    (STUCK_JSON.replace('"AllReduce": 3', '"AllReduce": 18446744073709551616'), "out of range"),
    (STUCK_JSON.replace('"AllReduce": 3', '"AllReduce": 1' + "0" * 4000), "not NCCL RAS output"),
    (STUCK_JSON.replace('"AllReduce": 3', '"AllReduce": NaN'), "not NCCL RAS output"),
    (STUCK_JSON.replace('"pid": 674', '"pid": 1e400'), "expected an integer"),
    (STUCK_JSON.replace('"hash": "0x5e413f75dea32c06"', '"hash": "zz"'), "not a communicator hash"),
    (STUCK_JSON.replace('"ranks": [', '"ranks": [[],', 1), "ranks[0]: expected an object, got a list"),
    (STUCK_JSON.replace('"abort_flag": false', '"abort_flag": 1', 1), "abort_flag: expected true or false"),
    ('{"nccl_version": "2.28.9", "communicators": ' + "[" * 50000 + "]" * 50000 + "}", "recursion"),
    ("[1, 2]", "not NCCL RAS output"),
    ('{"nccl_version": "2.28.9", "communicators": []}\n[1, 2]', "#2: expected a JSON object, got a list"),
    ('{"a": 1}', "no nccl_version"),
    ((DATA / "slow.query1.txt").read_text().replace("operation 16", "operation 99999999999999999999999"),
     "out of range"),
])
def test_hostile_input_is_one_line(tmp_path, text, says):
    p = tmp_path / "ras.json"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        read_ras([p])
    msg = str(e.value)
    assert says in msg and "\n" not in msg and str(p) in msg


def test_binary_and_missing_files_are_one_line(tmp_path):
    b = tmp_path / "b"
    b.write_bytes(b"{\0\0\0")
    for paths in ([b], [tmp_path / "nope"], []):
        with pytest.raises(InputError):
            read_ras(paths)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_answers_parse_or_fail_in_one_line(data):
    text = data.draw(st.sampled_from([STUCK_JSON, (DATA / "slow.query2.txt").read_text()]))
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(max_size=12))
    at = data.draw(st.integers(0, cut))
    mutated = text[:at] + junk + text[at:cut]
    try:
        parse_ras(mutated, "m")
    except InputError as e:
        assert "\n" not in str(e)


def test_ras_address():
    assert ras_address({}) == ("localhost", 28028)
    assert ras_address({"NCCL_RAS_ADDR": "10.0.0.1:5000"}) == ("10.0.0.1", 5000)
    assert ras_address({"NCCL_RAS_ADDR": "[::1]:28029"}) == ("::1", 28029)
    with pytest.raises(InputError):
        ras_address({"NCCL_RAS_ADDR": "nohost"})


# --- live: a real server speaking the protocol -----------------------------------------------------


def test_live_query_json_matches_the_saved_answer():
    srv = RasServer([p.read_bytes() for p in files("stuck", "json")])
    try:
        a = query_ras(srv.addr)
    finally:
        srv.close()
    assert a.note is None and a.addr == srv.addr
    saved = read_ras(files("stuck", "json")[:1]).queries[0]
    assert a.query.format == JSON and a.query.communicators == saved.communicators
    assert srv.commands == ["CLIENT PROTOCOL 2", "TIMEOUT 1", "SET FORMAT json", "VERBOSE STATUS"]
    assert abs(a.query.time_s - time.time()) < 5


def test_live_query_of_an_old_nccl_falls_back_to_text():
    srv = RasServer([files("slow", "txt")[0].read_bytes()], json_ok=False)
    try:
        a = query_ras(srv.addr)
    finally:
        srv.close()
    assert a.query.format == TEXT and a.query.communicators[0].ranks[1].counts == {"AllReduce": 16}


def test_live_series_of_a_stuck_job_names_the_rank(monkeypatch):
    srv = RasServer([p.read_bytes() for p in files("stuck", "json")])
    monkeypatch.setenv("NCCL_RAS_ADDR", srv.addr)
    try:
        s, notes = sample_ras(count=3, interval_s=0.05)
    finally:
        srv.close()
    assert notes == [] and len(s.queries) == 3
    (c,) = ras_progress(s).communicators  # over 0.1 s: behind, but too short a window to call it stuck
    assert c.state == BEHIND and c.stuck == () and [lag.rank for lag in c.held] == [1]
    monkeypatch.setattr(rasprogress, "STUCK_MIN_SPAN_S", 0.05)  # what a window long enough says
    (c,) = ras_progress(s).communicators
    assert c.state == STUCK and [lag.rank for lag in c.stuck] == [1]


def test_live_failures_are_notes():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    a = query_ras("127.0.0.1:%d" % port)
    assert a.query is None and "nothing listens" in a.note
    silent = RasServer([], handler=lambda c: time.sleep(3))
    t0 = time.monotonic()
    a = query_ras(silent.addr, timeout=0.5)
    assert time.monotonic() - t0 < 2 and "did not answer within 0.5 s" in a.note
    silent.close()
    web = RasServer([], handler=lambda c: (c.recv(100), c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")))
    a = query_ras(web.addr)
    web.close()
    assert "is not NCCL RAS" in a.note
    huge = RasServer([b"{" + b" " * 5000])
    a = query_ras(huge.addr, max_bytes=1000)
    huge.close()
    assert a.query is None and "larger than" in a.note
    bad = RasServer([b"garbage\n"])
    a = query_ras(bad.addr)
    bad.close()
    assert a.query is None and "not NCCL RAS output" in a.note
    assert "expected host:port" in query_ras("nohost").note
