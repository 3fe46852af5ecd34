"""``hanganalyze watch``'s decision (analyze/stall.py) on recorded counter series, and the watcher's
plumbing that needs no job (acquire/watchjob.py: alarms, flight-recorder settings, pass-through).

The series are what ``watchjob.rank_counters`` read once a second from real gloo jobs
(tests/fixtures/torch_job.py straggler, torch_steps_job.py with a rank that sleeps 0.4 s a step):
(CPU seconds of the rank, voluntary switches of its main thread).
"""

from __future__ import annotations

import io
import threading
from collections import deque
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from hanganalyze.acquire import watchjob
from hanganalyze.analyze.stall import RankCounters, StallDetector

Series = List[Dict[int, Tuple[float, int]]]


def _run(series: Series, stall: float, every: float = 1.0) -> List[str]:
    d = StallDetector(stall)
    states = []
    for i, reading in enumerate(series):
        d.observe(i * every, {pid: RankCounters(cpu, sw) for pid, (cpu, sw) in reading.items()})
        states.append(d.decide().state)
    return states


# the straggler as read: counters frozen once rank 1 sleeps in load_next_batch and rank 0 waits in all_reduce
HUNG: Series = [{10: (1.09, 11), 11: (1.06, 19)}] * 3 + [{10: (1.09, 11), 11: (1.07, 19)},
                                                          {10: (1.10, 11), 11: (1.07, 19)}] * 2
# rank 11 sleeps 0.4 s a step; rank 10 waits for it in all_reduce: each main thread wakes ~2.5 times a second
SLOW: Series = [{10: (1.0 + 0.01 * i, 40 + (5 * i) // 2), 11: (1.0 + 0.01 * i, 30 + (5 * i) // 2)} for i in range(30)]


def test_hung_series_is_quiet_once_the_window_is_full() -> None:
    assert _run(HUNG, stall=3) == ["warming"] * 3 + ["quiet"] * 4


def test_slow_rank_is_never_a_candidate() -> None:
    states = _run(SLOW, stall=3)
    assert "quiet" not in states and "busy" not in states
    assert states[3:] == ["progress"] * (len(SLOW) - 3)


def test_one_slow_rank_moving_is_enough() -> None:
    """Rank 10 frozen, rank 11 sleeping through steps: still progress (the frozen one waits for it)."""
    series = [{10: (1.0, 11), 11: (1.0 + 0.01 * i, 30 + 3 * i)} for i in range(8)]
    assert set(_run(series, stall=3)[3:]) == {"progress"}


def test_cpu_burnt_without_wakeups_is_busy_not_quiet() -> None:
    """A busy-wait (NCCL's spin in a hung collective) and a compute loop look alike here: both go to
    the samples, neither is called a hang by the counters alone."""
    series = [{10: (1.0 + 0.9 * i, 5), 11: (1.0, 7)} for i in range(6)]
    states = _run(series, stall=3)
    assert states[3:] == ["busy"] * 3


def test_a_few_wakeups_still_quiet_more_are_progress() -> None:
    """A wait that times out and waits again (2 wake-ups in the window) hides no hang; 3 are a loop."""
    quiet = [{10: (1.0, 11 + (1 if i >= 2 else 0) + (1 if i >= 4 else 0))} for i in range(6)]
    assert _run(quiet, stall=4)[4:] == ["quiet"] * 2
    moving = [{10: (1.0, 11 + i)} for i in range(6)]
    assert _run(moving, stall=4)[4:] == ["progress"] * 2


def test_rank_set_change_restarts_the_window() -> None:
    series = [{10: (1.0, 1)}] * 3 + [{10: (1.0, 1), 12: (0.5, 3)}] * 5
    states = _run(series, stall=3)
    assert states[3:6] == ["progress"] * 3  # rank 12 appeared within the window
    assert states[6:] == ["quiet"] * 2


def test_backoff_after_samples_saw_progress() -> None:
    d = StallDetector(3)
    for i in range(4):
        d.observe(float(i), {10: RankCounters(1.0, 1)})
    assert d.decide().candidate
    d.backoff(3.0)
    for i in range(4, 9):
        d.observe(float(i), {10: RankCounters(1.0, 1)})
        assert d.decide().candidate == (i >= 6), i


def test_no_rank_running_is_no_candidate() -> None:
    assert _run([{}] * 6, stall=2)[-1] == "warming"
    with pytest.raises(ValueError):
        StallDetector(0)


@pytest.mark.parametrize("line", [
    "[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
    "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.",
    "[PG ID 0 PG GUID 0(default_pg) Rank 3] Timeout at NCCL work: 12, last enqueued NCCL work: 12",
    "[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck for 480 seconds",
])
def test_alarm_lines(line: str) -> None:
    assert watchjob.ALARMS.search(line)


@pytest.mark.parametrize("line", [
    "node0:123:456 [0] NCCL INFO Channel 00/02 : 0 1",  # a healthy job prints these too
    "rank 0 step 12 sum 4096.0",
    "epoch 3: loss 0.12, timeout=600 configured",
])
def test_healthy_lines_are_no_alarm(line: str) -> None:
    assert not watchjob.ALARMS.search(line)


def test_flight_recorder_env_set_unless_the_user_did(tmp_path: Path) -> None:
    env, prefix = watchjob.flight_recorder_env({"PATH": "/bin"}, tmp_path)
    assert prefix == str(tmp_path / "nccl_trace_rank_")
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == prefix and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert int(env["TORCH_FR_BUFFER_SIZE"]) > 0
    user = {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/x/fr_", "TORCH_FR_BUFFER_SIZE": "9", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}
    env2, prefix2 = watchjob.flight_recorder_env(user, tmp_path)
    assert prefix2 == "/x/fr_" and "TORCH_FR_DUMP_TEMP_FILE" not in env2
    assert env2["TORCH_FR_BUFFER_SIZE"] == "9" and env2["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "0"
    assert watchjob.flight_recorder_dumps(prefix) == []
    (tmp_path / "nccl_trace_rank_1.tmp").write_text("partial")
    (tmp_path / "nccl_trace_rank_0").write_text("{}")
    (tmp_path / "other").write_text("")
    assert watchjob.flight_recorder_dumps(prefix) == [str(tmp_path / "nccl_trace_rank_0")]


def test_output_pump_passes_lines_in_order_and_catches_the_alarm() -> None:
    lines = [b"step %d\n" % i for i in range(500)]
    lines[300] = b"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)\n"
    sink = io.BytesIO()
    tail: deque = deque(maxlen=watchjob.TAIL_LINES)
    pump = watchjob.OutputPump(io.BytesIO(b"".join(lines) + b"no newline at the end"), sink, tail, threading.Lock())
    pump.thread.join(5)
    assert sink.getvalue() == b"".join(lines) + b"no newline at the end"
    assert pump.alarm is not None and pump.alarm.startswith("[Rank 0] Watchdog caught")
    assert list(tail)[-1] == "no newline at the end" and len(tail) == watchjob.TAIL_LINES
