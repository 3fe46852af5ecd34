"""Fixes from open development rounds 93/94 (manifest-blind93/94.yaml), each on the round's real paste
and a near miss: a column of names under a stack heading, a thread pool's "all threads busy" line,
a thread that threading's excepthook reports ended, TSL's address-less stack rows, Ray 2.0's memory
monitor line, TensorFlow's signal banner behind a CI log's prefix, a SIGILL on an extension's
instruction under lldb."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_two_names_under_a_stack_heading_are_a_stack(db):
    text = real_text("psycopg2/psycopg2-112-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames] == ["pqWaitTimed", "PQgetResult"]
    assert text_verdict(text, db)[1] == "network"
    # near miss: the same two names with no heading are no stack (two words in a column)
    with pytest.raises(InputError):
        parse_text(">> pqWaitTimed\n>> PQgetResult\n")


def test_a_thread_pool_saying_every_worker_is_busy_is_a_known_line(db):
    text = real_text("core/core-2939-1.txt")
    assert text_verdict(text, db)[1] == "future"
    with pytest.raises(InputError):  # near miss: a pool that says its workers are idle
        parse_text("16-08-22 15:04:19 homeassistant.core: WorkerPool:All 20 threads are idle\n")


def test_a_thread_that_threadings_excepthook_reports_ended(db):
    text = real_text("ec-su_axb35-linux/ec-su_axb35-linux-30-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    tri = [f for f in snap.findings if f.signature == "triage"][0]
    assert "that thread ended" in tri.summary
    # a chain under the header: its last block is the thread's end, not the queue wait the first one left
    assert text_verdict(real_text("paddle/paddle-41508-1.txt"), db)[1] == "crashed"
    # near miss: a logger's record over the same traceback says the program caught and logged it
    near = text.replace("Exception in thread Thread-2:\n", "ERROR:gui:timer callback failed:\n")
    assert near != text and not crash_said(near, db)
    # near miss: a Ctrl-C under the header is where the thread stood, not an exception of its own
    ctrl_c = text.replace("RuntimeError: main thread is not in main loop", "KeyboardInterrupt")
    assert ctrl_c != text and text_verdict(ctrl_c, db)[1] != "crashed"


def test_tsl_stack_rows_without_an_address_are_frames(db):
    text = real_text("xla/xla-15144-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    sync = [f for f in frames if f.function and "SynchronizeStream" in f.function][0]
    assert sync.file == "xla/stream_executor/cuda/cuda_driver.cc" and sync.line == 1358
    assert text_verdict(text, db)[1] == "gpu"
    # near miss: prose after an at sign (a mention) is no frame
    with pytest.raises(InputError):
        parse_text("@  someone please look at this\n@  another reviewer too\n")


def test_ray_20_memory_monitor_line_is_the_kill(db):
    text = real_text("ray/ray-28781-1.txt")
    assert "ray-memory-monitor-killed-worker" in sigs(text_verdict(text, db)[0])
    # near miss: the node's memory reported below the threshold is no eviction
    near = ("(raylet, ip=10.0.3.179) [2022-09-22 17:46:53,692 E 134 134] (raylet) node_manager.cc:2966: "
            "Memory usage is 0.50 of the node, below the threshold 0.95\n"
            "Watchdog caught collective operation timeout\n")
    assert "ray-memory-monitor-killed-worker" not in sigs(text_verdict(near, db)[0])


def test_tensorflows_signal_banner_behind_a_ci_prefix_is_a_crash(db):
    text = real_text("pytorch/pytorch-86093-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: SIGTERM's banner (a launcher ending a hung run) is no crash of its own
    near = text.replace("*** Received signal 11 ***", "*** Received signal 15 ***")
    assert near != text and text_verdict(near, db)[1] != "crashed"


def test_sigill_on_an_instruction_of_a_cpu_extension(db):
    text = real_text("pytorch/pytorch-116623-1.txt").replace('-c "import torch"', "x.py")
    found = [f for f in text_verdict(text, db)[0].findings if f.signature == "cpu-instruction-set-unsupported"]
    assert found and found[0].confidence == pytest.approx(0.8)
    # near miss: a trap instruction (a compiler's ud2) is SIGILL's other cause: no instruction set named
    near = text.replace("pinsrq $0x1, %r13, %xmm0", "ud2")
    assert near != text and "cpu-instruction-set-unsupported" not in sigs(text_verdict(near, db)[0])
