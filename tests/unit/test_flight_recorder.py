"""PyTorch flight-recorder dumps and watchdog lines -> per-rank collective facts.

The facts come from real dumps of a real 2-rank NCCL straggler (tests/data/flight_recorder).
The dumps are pickles, i.e. untrusted programs: every hostile variant must end in exactly one
one-line InputError, run nothing (a GLOBAL that would create a marker file never does), never
crash the interpreter and never take long.
"""

from __future__ import annotations

import copyreg
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hanganalyze.acquire import flight_recorder as fr
from hanganalyze.acquire import safe_pickle
from hanganalyze.acquire.flight_recorder import looks_like_flight_recorder, read_flight_recorder
from hanganalyze.acquire.text.watchdog import collectives_from_messages as watchdog_facts
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import DistIdentity, Process

DATA = Path(__file__).resolve().parents[1] / "data" / "flight_recorder"
RANK0 = DATA / "straggler.fr.rank_0"
RANK1 = DATA / "straggler.fr.rank_1"
LOG = DATA / "straggler.torchrun.log"
RANK0_BYTES = RANK0.read_bytes()


def plain_load(data: bytes):
    """The dump as plain data, through the module's own restricted unpickler (never pickle.loads)."""
    safe_pickle.scan_pickle(data)
    return safe_pickle.PlainUnpickler(io.BytesIO(data)).load()


RANK0_DOC = plain_load(RANK0_BYTES)


def torch_json(doc: dict) -> str:
    """The dump as FlightRecorder::dump_json writes it: keys sorted (nlohmann's std::map), no
    frames, pg_config/pg_status values as strings, unset times as 0 instead of null."""
    entries = []
    for e in doc["entries"]:
        j = {k: v for k, v in e.items() if k != "frames"}
        j["process_group"] = list(j["process_group"])
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            j[k] = j[k] or 0
        entries.append(j)
    out = {
        "version": doc["version"],
        "comm_lib_version": doc["comm_lib_version"],
        "pg_config": {k: {kk: str(vv) for kk, vv in v.items()} for k, v in doc["pg_config"].items()},
        "pg_status": {k: {kk: str(vv) for kk, vv in v.items()} for k, v in doc["pg_status"].items()},
        "entries": entries,
    }
    return json.dumps(out, sort_keys=True)


def collectives_from_messages(messages, rank=None):
    """The watchdog facts as a snapshot's JSON holds them (None when no line is a watchdog line)."""
    c = watchdog_facts(messages, rank)
    return None if c is None else c.to_dict()


def refused(path: Path) -> str:
    """The InputError of reading ``path``: exactly one line, naming the file."""
    with pytest.raises(InputError) as info:
        read_flight_recorder(path)
    msg = str(info.value)
    assert msg and "\n" not in msg and "\r" not in msg, msg
    assert "Traceback" not in msg
    return msg


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# --------------------------------------------------------------------------------------------
# The real dumps
# --------------------------------------------------------------------------------------------


def test_rank0_dump_facts():
    p = read_flight_recorder(RANK0)
    assert isinstance(p, Process)
    assert p.source == "flight-recorder" and p.threads == []
    assert p.rank == 0 and p.label == "rank 0"
    assert p.dist == DistIdentity(from_="flight-recorder file name")
    c = p.collectives.to_dict()
    assert c["source"] == "flight-recorder" and c["file"] == str(RANK0)
    assert c["version"] == "2.10" and c["comm_lib_version"] == "2.28.9"
    assert c["groups"] == {"0": {"name": "0", "desc": "default_pg", "ranks": [0, 1], "last_enqueued": 3,
                                 "last_started": -1, "last_completed": 2}}
    assert [e["seq"] for e in c["entries"]] == [1, 2, 3]
    last = c["entries"][-1]
    assert last["seq"] == 3 and last["op"] == "all_reduce" and last["state"] == "scheduled"
    assert last["profiling_name"] == "nccl:all_reduce" and last["pg"] == "0" and last["p2p"] is False
    assert last["sizes"] == [[1024]] and last["dtypes"] == ["Float"] and last["timeout_ms"] == 25000
    assert isinstance(last["time_created_ns"], int)
    assert last["user_frame"] == "train_step (fr_strag.py:8)"
    kinds = [f["kind"] for f in last["call_site"]]
    assert set(kinds) == {"native", "python"} and len(kinds) == 31
    assert last["call_site"][0]["function"] == "torch::unwind::unwind()"
    train = [f for f in last["call_site"] if f["function"] == "train_step"]
    assert train and train[0]["kind"] == "python" and train[0]["line"] == 8
    assert all(f["line"] is None for f in last["call_site"] if f["kind"] == "native")  # FR writes 0
    json.dumps(p.to_dict())  # serialisable as a snapshot


def test_rank1_dump_facts():
    p = read_flight_recorder(RANK1)
    c = p.collectives.to_dict()
    assert p.rank == 1
    assert c["groups"]["0"]["last_enqueued"] == 2 and c["groups"]["0"]["last_completed"] == 2
    assert [e["seq"] for e in c["entries"]] == [1, 2]
    assert all(e["state"] == "completed" for e in c["entries"])


def test_sniff_claims_dumps_only():
    assert looks_like_flight_recorder(RANK0_BYTES[:4096])
    assert looks_like_flight_recorder(RANK1.read_bytes())
    text = torch_json(RANK0_DOC).encode()
    assert looks_like_flight_recorder(text)
    assert looks_like_flight_recorder(text[:60])  # truncated head: comm_lib_version, entries ...
    assert looks_like_flight_recorder(json.dumps(RANK0_DOC, indent=2, default=list).encode()[:4096])
    for proto in (2, 3, 4, 5):
        assert looks_like_flight_recorder(pickle.dumps(RANK0_DOC, protocol=proto)[:4096]), proto
    snapshot = json.dumps({"schema": "hanganalyze/1", "processes": [{"collectives": {"entries": [],
                                                                                      "pg_status": {}}}]})
    assert not looks_like_flight_recorder(snapshot.encode())
    assert not looks_like_flight_recorder(b'{"entries": [1, 2], "version": "3"}')
    assert not looks_like_flight_recorder(b'{"entries": [], "name": "x", "items": {"pg_status": 1}}')
    assert not looks_like_flight_recorder(b'{"a": "\\"pg_status\\": 1, \\"version\\": 2"}')
    assert not looks_like_flight_recorder(b'[{"pg_status": 1, "version": 2}]')
    assert not looks_like_flight_recorder(pickle.dumps({"a": 1}, protocol=2))
    assert not looks_like_flight_recorder(pickle.dumps(["pg_status", "version"], protocol=2))
    assert not looks_like_flight_recorder(b"")
    assert not looks_like_flight_recorder(b"Thread 0x7f (most recent call first):\n")
    assert not looks_like_flight_recorder(os.urandom(64) + b"\x80\x02")


def test_sniff_hostile_json_heads():
    """The head's top-level keys come from the json module, member by member: a value cut by the
    head's end, nested past the recursion limit or broken ends the keys read so far, quickly."""
    deep = b"[" * 70_000
    assert looks_like_flight_recorder(b'{"version": "2.10", "pg_status": ' + deep)
    assert looks_like_flight_recorder(b'{"pg_config": {"0": 1}, "pg_status": {"0": ' + b"{" * 70_000)
    assert not looks_like_flight_recorder(b'{"pg_status": ' + deep + b', "version": "2"}')
    assert not looks_like_flight_recorder(b'{"version": "2", "x": [1,, 2], "pg_status": {}}')
    heads = [b'{"' + b"a" * 100_000, b'{"entries": "' + b"\\" * 50_000, b'{"version": 1, ' * 10_000,
             b'{"a": ' + b"[1, " * 30_000, b"{" + b'"k": 1, ' * 20_000, b'{"\xff\xfe": ' + os.urandom(60_000)]
    t = time.perf_counter()
    for head in heads * 5:
        assert not looks_like_flight_recorder(head)
    assert time.perf_counter() - t < 6.0  # an amplification guard (orders of magnitude), loaded machines too


def test_json_form(tmp_path):
    p = read_flight_recorder(write(tmp_path, "fr_rank-12.json", torch_json(RANK0_DOC).encode()))
    assert p.rank == 12 and p.label == "rank 12"
    c = p.collectives.to_dict()
    assert c["groups"]["0"]["last_enqueued"] == 3 and c["groups"]["0"]["last_completed"] == 2
    assert c["groups"]["0"]["ranks"] == [0, 1] and c["groups"]["0"]["desc"] == "default_pg"
    last = c["entries"][-1]
    assert (last["seq"], last["op"], last["state"]) == (3, "all_reduce", "scheduled")
    assert last["call_site"] == [] and last["user_frame"] is None  # JSON dumps carry no stacks


@pytest.mark.parametrize("proto", [0, 1, 2, 3, 4, 5])
def test_every_pickle_protocol(tmp_path, proto):
    p = read_flight_recorder(write(tmp_path, "rank3", pickle.dumps(RANK0_DOC, protocol=proto)))
    assert p.rank == 3
    assert p.collectives.to_dict()["groups"]["0"]["last_enqueued"] == 3
    assert p.collectives.to_dict()["entries"][-1]["user_frame"] == "train_step (fr_strag.py:8)"


def test_rank_sources(tmp_path):
    assert read_flight_recorder(write(tmp_path, "rank3", RANK0_BYTES)).rank == 3
    p = read_flight_recorder(write(tmp_path, "dump.fr", RANK0_BYTES))
    assert p.rank is None and p.dist is None and p.label == "dump.fr"
    doc = dict(RANK0_DOC, rank=5)
    p = read_flight_recorder(write(tmp_path, "x_rank_7", pickle.dumps(doc, protocol=2)))
    assert p.rank == 5 and p.dist == DistIdentity(from_="flight-recorder dump")


def test_older_versions(tmp_path):
    """Older versions (2.7) say nccl_version for comm_lib_version; a dump without pg_status gets
    each group's progress from its entries."""
    doc = {k: v for k, v in RANK0_DOC.items() if k not in ("comm_lib_version", "pg_status")}
    doc["nccl_version"] = "2.21.5"
    doc["version"] = "2.2"
    c = read_flight_recorder(write(tmp_path, "rank0", pickle.dumps(doc, protocol=2))).collectives.to_dict()
    assert c["comm_lib_version"] == "2.21.5"
    g = c["groups"]["0"]
    assert (g["last_enqueued"], g["last_completed"], g["derived"]) == (3, 2, "entries")


def test_non_utf8_name(tmp_path):
    name = os.fsdecode(b"rank_2.\xff\xfe")
    p = read_flight_recorder(write(tmp_path, name, RANK0_BYTES))
    assert p.rank == 2 and "\\xff\\xfe" in p.collectives.to_dict()["file"]
    json.dumps(p.to_dict(), ensure_ascii=False).encode("utf-8")  # writable as a UTF-8 report
    msg = refused(write(tmp_path, os.fsdecode(b"bad\xff\nname"), b"\x80\x02cos\nsystem\n."))
    assert "\\xff" in msg and "global os.system" in msg


# --------------------------------------------------------------------------------------------
# Watchdog lines
# --------------------------------------------------------------------------------------------


def test_torchrun_log_rank0():
    lines = LOG.read_text().splitlines()
    c = collectives_from_messages(lines)
    assert c is not None and c["source"] == "watchdog-log" and c["rank"] == 0
    assert c["groups"]["0"]["last_enqueued"] == 3 and c["groups"]["0"]["last_completed"] == 2
    assert c["groups"]["0"]["desc"] == "default_pg"
    assert [(e["seq"], e["op"], e["pg"], e["state"]) for e in c["entries"]] == [(3, "all_reduce", "0", "timed_out")]
    assert c["entries"][0]["timeout_ms"] == 25000 and c["entries"][0]["ran_ms"] == 25044
    assert c["other_ranks"] == [1]
    # Only rank 0's lines, their ``[rank0]:`` prefix cut as the text parsers do.
    mine = [line[len("[rank0]:"):] for line in lines if line.startswith("[rank0]:")]
    c0 = collectives_from_messages(mine)
    assert c0["rank"] == 0 and c0["groups"]["0"]["last_enqueued"] == 3 and c0["entries"][0]["seq"] == 3


def test_torchrun_log_rank1():
    c = collectives_from_messages(LOG.read_text().splitlines(), rank=1)
    assert c["rank"] == 1 and c["entries"] == []
    assert c["groups"]["0"]["last_enqueued"] == 2 and c["groups"]["0"]["last_completed"] == 2


def test_older_and_gloo_wording():
    lines = [
        "[rank1]:[E ProcessGroupNCCL.cpp:574] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=_ALLGATHER_BASE, NumelIn=1024, NumelOut=16384, Timeout(ms)=600000) "
        "ran for 600029 milliseconds before timing out.",
        "[rank1]:[E ProcessGroupNCCL.cpp:1540] [PG 1 Rank 1] Timeout at NCCL work: 7, last enqueued NCCL work: 8, "
        "last completed NCCL work: 6.",
    ]
    c = collectives_from_messages(lines)
    assert c["rank"] == 1 and c["groups"]["1"]["last_enqueued"] == 8 and c["groups"]["1"]["last_completed"] == 6
    assert [(e["seq"], e["op"], e["pg"]) for e in c["entries"]] == [(7, "_all_gather_base", "1")]
    c = collectives_from_messages(["[rank0]:[E1003 18:37:01.833 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) "
                                   "Rank 0] Exception (either an error or timeout) detected by watchdog at work: "
                                   "6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462."])
    assert c["groups"]["0"] == {"name": None, "desc": "default_pg", "ranks": None, "last_enqueued": 6463,
                                "last_started": None, "last_completed": 6462}
    c = collectives_from_messages(["[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
                                   "waiting 1800000ms for recv operation to complete"])
    assert c["rank"] is None and c["entries"] == [{"seq": None, "pg": None, "op": "recv", "state": "timed_out",
                                                   "timeout_ms": 1800000}]
    assert collectives_from_messages(["nothing to see", "NCCL work: x"]) is None
    assert collectives_from_messages([]) is None


def test_watchdog_lines_hostile_input_is_linear():
    lines = [
        "[PG ID 1 PG GUID " * 60000 + "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" + "9" * 100000,
        "[Rank " * 100000 + " failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: "
        + "1" * 50000,
        "Last enqueued NCCL work: " * 40000,
        "Timed out waiting " * 50000,
        "x" * 5_000_000,
    ]
    t = time.perf_counter()
    collectives_from_messages(lines * 3)
    assert time.perf_counter() - t < 6.0  # an amplification guard (orders of magnitude), loaded machines too


# --------------------------------------------------------------------------------------------
# Hostile pickles
# --------------------------------------------------------------------------------------------


@pytest.fixture
def marker(tmp_path):
    m = tmp_path / "pwned"
    yield m
    assert not m.exists(), "a hostile pickle ran code"


def hostile_pickles(marker: Path):
    cmd = ("touch %s" % marker).encode()
    s = b"X" + struct.pack("<I", len(cmd)) + cmd
    return {
        "global_proto0": b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.",
        "global_proto2": b"\x80\x02}cos\nsystem\n" + s + b"\x85R.",
        "global_in_entries": b"\x80\x02}X\x07\x00\x00\x00entries]cos\nsystem\n" + s + b"\x85Ras.",
        "stack_global": b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93"
                        + s + b"\x85R.",
        "inst": b"(S'touch " + str(marker).encode() + b"'\nios\nsystem\n.",
        "obj": b"\x80\x02(cos\nsystem\n" + s + b"o.",
        "reduce_copyreg": b"\x80\x02ccopyreg\n_reconstructor\n(cos\nsystem\ncbuiltins\nobject\nNtR.",
        "reduce_no_global": b"\x80\x02N)R.",
        "newobj": b"\x80\x02cbuiltins\nobject\n)\x81.",
        "build": b"\x80\x02}}b.",
        "persid_text": b"Pfoo\n.",
        "persid_bin": b"\x80\x02X\x03\x00\x00\x00fooQ.",
        "ext1": b"\x80\x02\x82\xf0" + s + b"\x85R.",
        "ext2": b"\x80\x02\x83\xf0\x00.",
        "ext4": b"\x80\x02\x84\xf0\x00\x00\x00.",
        "next_buffer": b"\x80\x05\x97.",
        "set": b"\x80\x04\x8f.",
        "frozenset": b"\x80\x04(\x91.",
        "bytearray": b"\x80\x05\x96\x01\x00\x00\x00\x00\x00\x00\x00x.",
        "top_level_list": pickle.dumps([RANK0_DOC], protocol=2),
        "top_level_str": pickle.dumps("pg_status", protocol=2),
        "recursive_list": b"\x80\x02}q\x00X\x07\x00\x00\x00entries]q\x01h\x01as.",
        "recursive_dict": b"\x80\x02}q\x00X\x07\x00\x00\x00entriesh\x00s.",
        "memo_bomb": b"\x80\x02Nr\xff\xff\xff\x7f.",
        "memo_bomb_text": b"N(p99999999999\n.",
        "get_unset": b"\x80\x02h\x05.",
        "huge_long4": b"\x80\x02\x8b\x00\x00\x00\x01" + b"\x01" * 64 + b".",
        "huge_binbytes8": b"\x80\x04\x8e" + struct.pack("<Q", 1 << 62) + b"x.",
        "huge_int_text": b"I" + b"9" * 100000 + b"\n.",
        "bad_proto": b"\x80\x09}.",
        "no_stop": b"\x80\x02}",
        "stack_underflow": b"\x80\x02s.",
        "open_mark": b"\x80\x02(}.",
        "unknown_opcode": b"\x80\x02\xff.",
        "random": bytes(range(256)) * 4,
        "text": b"hello world\n",
    }


def test_hostile_pickles(tmp_path, marker):
    for name, data in hostile_pickles(marker).items():
        msg = refused(write(tmp_path, name, data))
        assert msg.startswith(str(tmp_path / name) + ": "), msg
        assert "refused" in msg or "empty" in msg, (name, msg)
    msgs = {n: refused(write(tmp_path, n, d)) for n, d in hostile_pickles(marker).items()}
    assert "global os.system (only plain data is loaded)" in msgs["global_proto2"]
    assert "flight-recorder pickle refused: it asks for global os.system" in msgs["global_proto0"]
    assert "global os.system" in msgs["stack_global"] and "global os.system" in msgs["inst"]
    assert "global copyreg._reconstructor" in msgs["reduce_copyreg"]
    assert "REDUCE" in msgs["reduce_no_global"]
    assert "persistent id" in msgs["persid_text"] and "persistent id" in msgs["persid_bin"]
    assert "extension code 240" in msgs["ext1"]
    assert "recursive" in msgs["recursive_list"] and "recursive" in msgs["recursive_dict"]
    assert "top level is a list" in msgs["top_level_list"]
    assert "memo entry" in msgs["memo_bomb"] and "memo entry" in msgs["memo_bomb_text"]


def test_the_payloads_are_live(tmp_path):
    """The hostile pickles above do run code under a plain pickle.loads (in a child process, on a
    marker of its own): so the marker's absence above means the reader refused them."""
    names = ["global_proto0", "global_proto2", "global_in_entries", "stack_global", "inst", "obj"]
    for name in names:
        write(tmp_path, name, hostile_pickles(tmp_path / ("live_" + name))[name])
    code = "import pickle, sys\nfor p in sys.argv[1:]:\n    try:\n        pickle.loads(open(p, 'rb').read())\n" \
           "    except Exception:\n        pass\n"
    subprocess.run([sys.executable, "-c", code] + [str(tmp_path / n) for n in names], timeout=60, check=True)
    assert all((tmp_path / ("live_" + name)).exists() for name in names)


def test_registered_extension_code_is_refused(tmp_path, marker):
    """Even an extension code that copyreg knows (it would name os.system) is refused."""
    copyreg.add_extension("os", "system", 0xF0)
    try:
        msg = refused(write(tmp_path, "ext", hostile_pickles(marker)["ext1"]))
    finally:
        copyreg.remove_extension("os", "system", 0xF0)
    assert "extension code 240" in msg


def test_restricted_unpickler_alone_refuses_globals(marker):
    """The second line of defence, without the opcode scan."""
    for data in (hostile_pickles(marker)["global_proto2"], hostile_pickles(marker)["persid_bin"]):
        with pytest.raises(safe_pickle.Refused):
            safe_pickle.PlainUnpickler(io.BytesIO(data)).load()


def test_truncated_at_every_97th_byte(tmp_path):
    for data in (RANK0_BYTES, pickle.dumps(RANK0_DOC, protocol=4), torch_json(RANK0_DOC).encode()):
        for cut in range(0, len(data) - 1, 97):
            if cut == 0:
                continue
            msg = refused(write(tmp_path, "cut", data[:cut]))
            assert "refused" in msg


def test_deep_nesting(tmp_path):
    deep_list = b"\x80\x02" + b"]" * 1_000_000 + b"a" * 999_999 + b"."
    assert "deep" in refused(write(tmp_path, "deep_list", deep_list))
    deep_dict = b"\x80\x02}X\x07\x00\x00\x00entries" + b"]" * 1_000_000 + b"a" * 999_999 + b"s."
    assert "deep" in refused(write(tmp_path, "deep_dict", deep_dict))
    deep_json = b'{"entries": ' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}"
    assert "deep" in refused(write(tmp_path, "deep.json", deep_json))
    shared = b"\x80\x02]q\x00" + b"]h\x00aq\x00" * 100 + b"."  # 100 levels, each built once
    assert "deep" in refused(write(tmp_path, "shared", shared))


def test_crash_and_memory_bombs_in_a_subprocess(tmp_path):
    """A tuple nested a million deep used as a dict key makes hash() overflow the C stack (SIGSEGV,
    even through a restricted unpickler); a huge memo index makes the C unpickler allocate tens
    of GiB.  Run where a regression cannot take the test session down, under a memory limit."""
    bombs = {
        "deep_tuple_key": b"\x80\x02}" + b")" + b"\x85" * 1_000_000 + b"Ns.",
        "deep_tuple_in_frozenset": b"\x80\x04(" + b")" + b"\x85" * 1_000_000 + b"\x91.",
        "deep_tuple_mark": b"\x80\x02}" + b"(" * 100_000 + b")" + b"t" * 100_000 + b"Ns.",
        "memo_bomb": b"\x80\x02Nr\xff\xff\xff\x7f.",
    }
    for name, data in bombs.items():
        write(tmp_path, name, data)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from pathlib import Path\n"
        "from hanganalyze.acquire.flight_recorder import read_flight_recorder\n"
        "from hanganalyze.errors import InputError\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        read_flight_recorder(Path(p))\n"
        "        print('LOADED', p)\n"
        "    except InputError as e:\n"
        "        print('REFUSED', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code] + [str(tmp_path / n) for n in bombs],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    lines = out.stdout.splitlines()
    assert len(lines) == len(bombs) and all(line.startswith("REFUSED ") for line in lines), out.stdout


def test_wrong_field_types(tmp_path):
    def with_entry(**kw):
        e = dict(RANK0_DOC["entries"][-1], **kw)
        return dict(RANK0_DOC, entries=[e])

    cases = {
        "seq_str": (with_entry(collective_seq_id="3"), "entries[0].collective_seq_id is a str"),
        "seq_float": (with_entry(collective_seq_id=3.0), "expected an integer"),
        "seq_bool": (with_entry(collective_seq_id=True), "expected an integer"),
        "seq_huge": (with_entry(collective_seq_id=1 << 70), "64-bit"),
        "state_int": (with_entry(state=3), "entries[0].state is a int, expected a string"),
        "sizes_str": (with_entry(input_sizes=[["a"]]), "input_sizes[0][0]"),
        "frames_dict": (with_entry(frames={"a": 1}), "frames is a dict, expected a list"),
        "frame_line": (with_entry(frames=[{"name": "f", "filename": "x.py", "line": "8"}]), "frames[0].line"),
        "frame_name": (with_entry(frames=[{"name": b"f", "filename": "x.py", "line": 8}]), "frames[0].name"),
        "pg_tuple": (with_entry(process_group=5), "process_group is a int"),
        "is_p2p": (with_entry(is_p2p="no"), "is_p2p"),
        "entries_dict": (dict(RANK0_DOC, entries={"0": 1}), "entries is a dict, expected a list"),
        "entry_list": (dict(RANK0_DOC, entries=[[1, 2]]), "entries[0] is a list, expected a dict"),
        "status_list": (dict(RANK0_DOC, pg_status={"0": {"last_enqueued_collective": [3]}}),
                        "pg_status[0].last_enqueued_collective is a list"),
        "status_bad_str": (dict(RANK0_DOC, pg_status={"0": {"last_enqueued_collective": "3; rm"}}),
                           "last_enqueued_collective is a str"),
        "ranks_code": (dict(RANK0_DOC, pg_config={"0": {"name": "0", "desc": "d", "ranks": "__import__('os')"}}),
                       "not a list of ranks"),
        "ranks_negative": (dict(RANK0_DOC, pg_config={"0": {"name": "0", "desc": "d", "ranks": "[-1]"}}),
                           "rank out of range"),
        "version_int": (dict(RANK0_DOC, version=2), "version is a int"),
        "rank_key": (dict(RANK0_DOC, rank=1 << 40), "rank is out of range"),
        "no_keys": ({"version": "2.10"}, "none of the keys"),
        "bytes_value": (dict(RANK0_DOC, comm_lib_version=b"2.28"), "comm_lib_version is a bytes"),
    }
    for name, (doc, want) in cases.items():
        # Protocol 3: protocol 2 has no bytes opcode, Python pickles bytes there via _codecs.encode.
        msg = refused(write(tmp_path, name, pickle.dumps(doc, protocol=3)))
        assert want in msg, (name, msg)
    msg = refused(write(tmp_path, "json_types.json", json.dumps(
        {"version": "2.10", "pg_status": {"0": {"last_enqueued_collective": {"x": 1}}}}).encode()))
    assert "pg_status[0].last_enqueued_collective is a dict" in msg


def test_long_strings_are_capped(tmp_path):
    e = dict(RANK0_DOC["entries"][-1], profiling_name="nccl:" + "a" * 100_000,
             frames=[{"name": "f\nx" * 10_000, "filename": "/u/x.py", "line": 1}])
    c = read_flight_recorder(write(tmp_path, "long", pickle.dumps(dict(RANK0_DOC, entries=[e]), protocol=2)))
    entry = c.collectives.to_dict()["entries"][0]
    assert len(entry["profiling_name"]) == fr.MAX_STRING
    assert "\n" not in entry["call_site"][0]["function"]


def test_size_and_count_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(fr, "MAX_FILE_BYTES", 1000)
    assert "larger than" in refused(write(tmp_path, "big", RANK0_BYTES))
    monkeypatch.setattr(fr, "MAX_FILE_BYTES", 64 << 20)
    monkeypatch.setattr(safe_pickle, "MAX_OBJECTS", 100)
    assert "more than 100 objects" in refused(write(tmp_path, "many", RANK0_BYTES))
    assert "more than 100 values" in refused(write(tmp_path, "many.json", b'{"entries": [' + b"[]," * 100 + b"[]]}"))
    monkeypatch.setattr(safe_pickle, "MAX_OBJECTS", 4_000_000)
    monkeypatch.setattr(fr, "MAX_ENTRIES", 2)
    p = read_flight_recorder(RANK0)
    assert [e["seq"] for e in p.collectives.to_dict()["entries"]] == [2, 3] and "oldest 1 of 3" in p.notes[0]
    monkeypatch.setattr(fr, "MAX_CALL_SITE_FRAMES", 40)
    p = read_flight_recorder(RANK0)
    assert [len(e["call_site"]) for e in p.collectives.to_dict()["entries"]] == [0, 31]
    assert p.collectives.to_dict()["entries"][0]["user_frame"] == "train_step (fr_strag.py:8)"


def test_shared_references_do_not_amplify(tmp_path):
    """The memo lets a small file reference one big list from every entry and every group."""
    sizes = [[7] * 16 for _ in range(1024)]
    entry = dict(RANK0_DOC["entries"][-1], input_sizes=sizes, input_dtypes=["Float"] * 1024)
    doc = dict(RANK0_DOC, entries=[entry] * 200_000)
    data = pickle.dumps(doc, protocol=2)
    assert len(data) < 2_000_000
    t = time.perf_counter()
    p = read_flight_recorder(write(tmp_path, "shared_entries", data))
    assert time.perf_counter() - t < 15.0  # an amplification guard, loaded machines too
    entries = p.collectives.to_dict()["entries"]
    assert len(entries) == fr.MAX_ENTRIES
    assert sum(len(e["dtypes"]) + sum(len(x) + 1 for x in e["sizes"]) for e in entries) <= fr.MAX_SIZE_VALUES
    assert sum(len(e["call_site"]) for e in entries) <= fr.MAX_CALL_SITE_FRAMES
    assert any("sizes" in n for n in p.notes) and any("call sites" in n for n in p.notes)
    ranks = "[" + ", ".join(str(i) for i in range(600_000)) + "]"
    cfg = {str(i): {"name": str(i), "desc": "g", "ranks": ranks} for i in range(1000)}
    msg = refused(write(tmp_path, "shared_ranks", pickle.dumps(dict(RANK0_DOC, pg_config=cfg), protocol=2)))
    assert "ranks in all" in msg


def test_missing_empty_and_directory(tmp_path):
    for p in (tmp_path / "missing", write(tmp_path, "empty", b""), tmp_path):
        msg = refused(p)
        assert str(p) in msg


def test_large_real_shaped_dump_is_fast(tmp_path):
    entries = [dict(RANK0_DOC["entries"][i % 3], collective_seq_id=i + 1) for i in range(2000)]
    path = write(tmp_path, "rank_9", pickle.dumps(dict(RANK0_DOC, entries=entries), protocol=2))
    t = time.perf_counter()
    p = read_flight_recorder(path)
    assert time.perf_counter() - t < 6.0  # an amplification guard (orders of magnitude), loaded machines too
    assert p.rank == 9 and len(p.collectives.to_dict()["entries"]) == 2000


# --------------------------------------------------------------------------------------------
# Fuzzing
# --------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])
SEEDS = [RANK0_BYTES, pickle.dumps(RANK0_DOC, protocol=4), torch_json(RANK0_DOC).encode()]


def read_or_input_error(path: Path) -> None:
    t = time.perf_counter()
    try:
        p = read_flight_recorder(path)
    except InputError as e:
        assert "\n" not in str(e) and str(e)
    else:
        assert isinstance(p, Process) and p.threads == []
        json.dumps(p.to_dict())
    assert time.perf_counter() - t < 6.0  # an amplification guard (orders of magnitude), loaded machines too


@FUZZ
@given(st.sampled_from(range(len(SEEDS))),
       st.lists(st.tuples(st.integers(0, 20_000), st.integers(0, 255),
                          st.sampled_from(["replace", "insert", "delete"])), min_size=1, max_size=8))
def test_mutated_dump(tmp_path, seed, edits):
    data = bytearray(SEEDS[seed])
    for pos, byte, how in edits:
        pos %= len(data) or 1
        if how == "replace" and data:
            data[pos] = byte
        elif how == "insert":
            data.insert(pos, byte)
        elif data:
            del data[pos]
    read_or_input_error(write(tmp_path, "fuzz", bytes(data)))


@FUZZ
@given(st.binary(max_size=3000))
def test_random_bytes_after_a_pickle_header(tmp_path, data):
    read_or_input_error(write(tmp_path, "fuzz", b"\x80\x02}" + data))
