"""PyTorch's distributed debug server's dumps (acquire/torch_debug.py), with real files.

tests/data/torch_debug/straggler/ was written by PyTorch 2.13 (CPU, gloo, 2 ranks) with
tests/data/torch_debug/make_samples.py: rank 1 sleeps in load_next_batch, rank 0 waits in all_reduce.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hanganalyze.acquire import torch_debug as td
from hanganalyze.acquire.engine import EngineRequest
from hanganalyze.acquire.inputs import acquire
from hanganalyze.analyze.stacks import main_thread
from hanganalyze.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_debug" / "straggler"
STACKS = DATA / "stacks_20261126_075733.txt"


def _funcs(proc):
    return [f.function for f in main_thread(proc).frames]


def test_stacks_dump_one_process_per_rank():
    text = STACKS.read_text()
    assert td.looks_like_debug_dump(text)
    snap = td.read_debug_dump(text)
    assert [p.rank for p in snap.processes] == [0, 1]
    r0, r1 = snap.processes
    assert all(p.source == td.SOURCE and not p.error for p in snap.processes)
    assert _funcs(r0)[0] == "all_reduce" and "train_step" in _funcs(r0)
    assert _funcs(r1)[0] == "load_next_batch"
    # the worker server's own thread (faulthandler's "Current thread", no Python frame) comes last
    assert not r1.threads[-1].frames and not any(t.current for t in r1.threads)
    assert r0.dist.debug_server_url.endswith("/handler/dump_traceback?")


def test_rank_answer_recognised_by_content():
    text = (DATA / "rank1.dump_traceback.txt").read_text()
    assert td.looks_like_rank_traceback(text) and not td.looks_like_debug_dump(text)
    assert _funcs(td.read_rank_traceback(text).processes[0])[0] == "load_next_batch"


def test_not_by_name(tmp_path):
    other = tmp_path / "stacks_20260101_000000.txt"
    other.write_text("Thread 0x00007f00 (most recent call first):\n  File \"a.py\", line 1 in f\n")
    assert not td.looks_like_debug_dump(other.read_text())
    assert not td.looks_like_rank_traceback(other.read_text())


def test_unanswered_rank_and_cut_file():
    text = STACKS.read_text()
    cut = text[:text.index("=== Rank 1:")] + "=== Rank 1: http://vm:1/handler/dump_traceback? ===\nError: 408"
    cut = "PARTIAL DATA: 1/2 workers responded\n  Rank 1: Timeout: read timed out\n\n" + cut
    assert td.looks_like_debug_dump(cut)
    r0, r1 = td.read_debug_dump(cut).processes
    assert not r0.error and r1.rank == 1 and "408" in r1.error and "Timeout" in r1.error
    half = text[:text.index("line 45")]  # cut inside rank 1's section: what is there is read
    assert [p.rank for p in td.read_debug_dump(half).processes] == [0, 1]


def test_no_stacks_and_fr_tables(tmp_path):
    snap = td.read_debug_dump((DATA / "torchcomms_health_check_20261126_075733.txt").read_text())
    assert not snap.processes and "hold no stacks" in snap.warnings[0]
    tables = "=== FR Trace ===\n--- Groups ---\nid  desc  size\n"
    assert td.looks_like_debug_dump(tables)
    with pytest.raises(InputError) as e:
        td.read_debug_dump(tables, "fr_trace_x.txt")
    assert "\n" not in str(e.value) and "fr_trace_json" in str(e.value)


def test_inputs_hook():
    snap = acquire(str(STACKS), None, EngineRequest())
    assert [p.rank for p in snap.processes] == [0, 1]


def test_folder_joins_ranks_and_names_the_straggler():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "hanganalyze", "-f", "text", str(DATA)], env=env,
                         capture_output=True, text=True, timeout=120).stdout
    verdict = next(line for line in out.splitlines() if line.startswith("VERDICT"))
    assert "rank 1 is in load_next_batch" in verdict and "collective-straggler" in verdict
    assert "debug-server stacks, flight-recorder" in out
    assert "torchcomms_health_check answers hold no stacks" in out
