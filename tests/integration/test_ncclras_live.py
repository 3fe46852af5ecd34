"""``hanganalyze --pid A --pid B`` on two live "ranks" whose NCCL RAS port answers with the stopped
job's real captured answers (tests/data/nccl_ras/stuck.*, their pids made these processes' pids):
the RAS queries are taken once per sample round through ``request.py``'s hook, the stuck verdict
names the rank behind by its pid, and the report says where the evidence came from.  The ranks
are plain Python processes with a file named like NCCL's library mapped (no NCCL on CI)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rasserver import RasServer

from hanganalyze import cli
from hanganalyze.acquire import raslive
from hanganalyze.analyze import rasprogress
from hanganalyze.errors import EXIT_HANG

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_ras"
MAPPER = ("import mmap, sys, time\nf = open(sys.argv[1], 'rb')\n"
          "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\nprint('ready', flush=True)\ntime.sleep(120)\n")


@pytest.fixture(scope="module")
def stuck_ranks(tmp_path_factory):
    lib = tmp_path_factory.mktemp("nccl") / "libnccl.so.2"
    lib.write_bytes(b"\0" * 4096)
    srv = RasServer([b""])
    procs = []
    try:
        for rank in (0, 1):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "NCCL_RAS_ADDR": srv.addr}
            p = subprocess.Popen([sys.executable, "-c", MAPPER, str(lib)], stdout=subprocess.PIPE, env=env)
            procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        srv.answers[:] = [(DATA / ("stuck.query%d.json" % i)).read_text()
                          .replace('"pid": 673', '"pid": %d' % procs[0].pid)
                          .replace('"pid": 674', '"pid": %d' % procs[1].pid).encode() for i in (1, 2, 3)]
        yield [p.pid for p in procs], srv
    finally:
        srv.close()
        for p in procs:
            p.kill()
            p.wait()


def test_live_ras_names_the_stuck_rank_by_pid(stuck_ranks, capsys, tmp_path, monkeypatch):
    (pid0, pid1), srv = stuck_ranks
    out = tmp_path / "r.json"
    with monkeypatch.context() as m:  # suite time: a stuck window the stacks' own (about 1 s) covers
        m.setattr(raslive, "STUCK_WINDOW_S", 0.3)
        m.setattr(rasprogress, "STUCK_MIN_SPAN_S", 0.3)
        rc = cli.run(["--pid", str(pid0), "--pid", str(pid1), "--format", "json", "-o", str(out)])
    capsys.readouterr()
    d = json.loads(out.read_text())
    assert rc == EXIT_HANG
    ras = [f for f in d["findings"] if f["signature"] == "nccl-ras-stuck"]
    assert len(ras) == 1 and ras[0]["ranks"] == [1] and "(pid %d)" % pid1 in ras[0]["summary"]
    assert d["processes"][ras[0]["process"]]["pid"] == pid1
    assert d["nccl_ras"]["live"] == srv.addr and len(d["nccl_ras"]["queries"]) >= 2
    assert srv.commands.count("VERBOSE STATUS") == len(d["nccl_ras"]["queries"])


def test_stopped_ranks_are_not_held_open_for_the_ras_window(stuck_ranks, capsys):
    """Both ranks asleep in every sample (never woke: the stacks are unambiguous): the run ends with
    the stack samples instead of waiting for RAS's 2 s; RAS over that shorter window names the rank
    behind but calls no rank stuck (a step longer than the window would look the same)."""
    (pid0, pid1), srv = stuck_ranks
    rc = cli.run(["--pid", str(pid0), "--pid", str(pid1)])
    text = capsys.readouterr().out
    verdict = next(line for line in text.splitlines() if line.startswith("VERDICT: "))
    assert rc in (0, EXIT_HANG) and "nccl-ras-stuck" not in verdict
    window = re.search(r"AllReduce counts 4/3 unchanged over \d+ queries \(([\d.]+) s\): rank 1 \(pid %d\) is "
                       r"behind and not moving over [\d.]+ s, under the 2 s RAS needs to tell stuck from slow" % pid1,
                       text)
    assert window is not None and float(window.group(1)) < raslive.STUCK_WINDOW_S, text
    assert "pid %d never woke in any sample, so the run was not held to RAS's 2 s window" % pid1 in text
    assert "live queries of %s at " % srv.addr in text
