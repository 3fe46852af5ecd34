"""Stuck or slow from the change of NCCL RAS counts, on real captures (tests/data/nccl_ras: a
stopped rank, a slow rank, a healthy job; 2x H200, NCCL 2.28.9) and on near misses made from
them (one query, counts going down, a rank that changed process, ranks agreeing and idle)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import List

import pytest

from hanganalyze.acquire.ncclras import parse_ras, read_ras
from hanganalyze.analyze.rasprogress import (
    BEHIND,
    NO_VERDICT,
    ONE_QUERY,
    PROGRESSING,
    SLOW,
    STUCK,
    UNCHANGED,
    ras_progress,
)
from hanganalyze_gdbext.model.ncclras import RasMissingRank, RasQuery

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_ras"


def queries(job: str, form: str = "json") -> List[RasQuery]:
    return read_ras(sorted(DATA.glob("%s.query*.%s" % (job, form)))).queries


def test_stuck_names_the_rank_behind_and_not_moving():
    p = ras_progress(queries("stuck"))
    (c,) = p.communicators
    assert c.state == STUCK and c.slow == () and c.rate is None and c.window_s == 4.0
    assert [(lag.rank, lag.pid, lag.op, lag.behind, lag.moving) for lag in c.stuck] == [
        (1, 674, "AllReduce", (1, 1, 1), False)]
    assert c.sentence == ("communicator 0x5e413f75dea32c06: AllReduce counts 4/3 unchanged over 3 queries (4.0 s): "
                          "rank 1 (pid 674) is behind and not moving (stuck)")
    assert p.sentence == "3 NCCL RAS queries over 4.0 s: communicators 1 stuck (0x5e413f75dea32c06)"


def test_slow_rank_is_slow_never_stuck():
    (c,) = ras_progress(queries("slow")).communicators
    assert c.state == SLOW and c.stuck == ()
    assert [(lag.rank, lag.behind, lag.moving) for lag in c.slow] == [(1, (1, 1, 1), True)]
    assert c.rate == pytest.approx(2.0) and c.window_s == 5.0
    assert c.sentence == ("communicator 0x96d3fcb29c7245f7: AllReduce counts 17/16 -> 22/21 -> 27/26 over 3 queries "
                          "(5.0 s), 2.0 collectives/s: rank 1 (pid 821) is 1 behind in every query and moving "
                          "(slow, not stuck)")


def test_healthy_progresses_with_nobody_behind():
    (c,) = ras_progress(queries("healthy")).communicators
    assert c.state == PROGRESSING and c.stuck == () and c.slow == () and c.problems == ()
    assert c.rate == pytest.approx((13852 - 8102) / 4.0)
    assert c.sentence == ("communicator 0xb59cad56915b07c0: AllReduce counts 8102/8102 -> 10977/10977 -> "
                          "13852/13852 over 3 queries (4.0 s), 1,438 collectives/s: progressing, no rank behind")


def test_text_form_gives_the_same_verdicts_and_time_when_given():
    (stuck,) = ras_progress(queries("stuck", "txt")).communicators
    assert stuck.state == STUCK and [lag.rank for lag in stuck.stuck] == [1] and stuck.window_s is None
    assert "(time not recorded)" in stuck.sentence
    (slow,) = ras_progress(queries("slow", "txt"), interval_s=2.0).communicators
    assert slow.state == SLOW and slow.window_s == 4.0 and slow.rate == pytest.approx(2.5)
    healthy = ras_progress(queries("healthy", "txt"))
    assert healthy.communicators == () and "progress cannot be measured" in healthy.sentence


@pytest.mark.parametrize("job", ["stuck", "slow", "healthy"])
def test_one_query_gives_no_verdict_about_time(job):
    p = ras_progress(queries(job)[:1])
    (c,) = p.communicators
    assert c.state == ONE_QUERY and c.stuck == () and c.slow == () and c.rate is None
    assert c.sentence.endswith("(one query: no evidence over time)")
    assert p.sentence == "1 NCCL RAS query: one query: no evidence over time"


def test_counts_going_down_give_no_verdict():
    p = ras_progress(list(reversed(queries("slow"))))  # out of time order, as given
    (c,) = p.communicators
    assert c.state == NO_VERDICT and c.stuck == () and c.slow == ()
    assert "count went down (27 -> 22)" in c.sentence and c.sentence.endswith("no verdict")


def test_a_rank_that_changed_process_gives_no_verdict():
    qs = copy.deepcopy(queries("stuck"))
    qs[2].communicators[0].ranks[1].pid = 999
    (c,) = ras_progress(qs).communicators
    assert c.state == NO_VERDICT and "rank 1 changed process (pids 674, 999)" in c.sentence


def test_a_rank_that_stops_while_others_launch_is_stuck():
    qs = copy.deepcopy(queries("healthy"))
    for q, n in zip(qs, (100, 101, 102)):
        q.communicators[0].ranks[0].counts["AllReduce"] = n
        q.communicators[0].ranks[1].counts["AllReduce"] = 100
    (c,) = ras_progress(qs).communicators
    assert c.state == STUCK and [(lag.rank, lag.behind) for lag in c.stuck] == [(1, (0, 1, 2))]


def test_a_rank_behind_once_is_jitter_not_slow():
    qs = copy.deepcopy(queries("healthy"))
    qs[1].communicators[0].ranks[1].counts["AllReduce"] -= 1
    (c,) = ras_progress(qs).communicators
    assert c.state == PROGRESSING and c.slow == () and c.stuck == ()


def test_ranks_agreeing_and_not_moving_are_not_accused():
    qs = copy.deepcopy(queries("stuck"))
    for q in qs:
        q.communicators[0].ranks[1].counts["AllReduce"] = 4
    (c,) = ras_progress(qs).communicators
    assert c.state == UNCHANGED and c.stuck == () and "RAS cannot tell" in c.sentence


def test_errors_aborts_and_missing_ranks_are_reported():
    qs = copy.deepcopy(queries("stuck"))
    r1 = qs[2].communicators[0].ranks[1]
    r1.async_error, r1.abort_flag = 6, True
    qs[2].communicators[0].missing_ranks.append(RasMissingRank(rank=2, pid=700, unresponsive=True))
    (c,) = ras_progress(qs).communicators
    assert c.state == STUCK
    assert [(p.rank, p.what) for p in c.problems] == [(2, "unresponsive"), (1, "async error 6 (remote process error)"),
                                                       (1, "aborted")]
    assert c.sentence.endswith("; rank 2 (pid 700) is unresponsive; rank 1 (pid 674): async error 6 (remote "
                               "process error); rank 1 (pid 674): aborted")


TEXT_ERROR = """NCCL version 2.28.9 compiled with CUDA 13.0
CUDA runtime version 13000, driver version 13000

Communicators... (0.012s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         1         2         4         4   RUNNING  INCOMPLETE,ERROR

Errors
======

INCOMPLETE
  Missing communicator data from 1 job process
  Process 700 on node 192.0.2.3 managing GPU 2

#0-0 (00000000000abc12) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 2 -- GPU 2 managed by process 700 on node 192.0.2.3

#0-0 (00000000000abc12) ERROR
  Asynchronous error on 1 rank
  Rank 3 reported Remote process error -- GPU 1 (NVML 3) managed by process 701 on node 192.0.2.2

Warnings
========

"""


def test_text_errors_and_missing_ranks_read_and_reported():
    (q,) = parse_ras(TEXT_ERROR, "t")
    (c,) = q.communicators
    assert (c.hash, c.size, c.problems) == ("0xabc12", 4, ["INCOMPLETE", "ERROR"])
    assert [(m.rank, m.pid, m.host) for m in c.missing_ranks] == [(2, 700, "192.0.2.3")]
    (r3,) = c.ranks
    assert (r3.rank, r3.pid, r3.cuda_dev, r3.nvml_dev, r3.async_error_text) == (3, 701, 1, 3, "Remote process error")
    assert q.errors == ["INCOMPLETE: Missing communicator data from 1 job process; Process 700 on node 192.0.2.3 "
                        "managing GPU 2"]
    assert q.collection_time_s == 0.012
    (v,) = ras_progress([q]).communicators
    assert v.state == ONE_QUERY
    assert [(p.rank, p.what) for p in v.problems] == [(2, "missing"), (3, "async error (Remote process error)")]


def _timed(qs: List[RasQuery], times) -> List[RasQuery]:
    qs = copy.deepcopy(qs)
    for q, t in zip(qs, times):
        q.time_s = t
    return qs


def test_a_rank_behind_over_less_than_two_seconds_is_no_stuck_claim():
    """What a live run the stacks settled brings (issue 31): the stopped job's queries over 1.0 s.
    A step longer than the window reads the same, so RAS alone names the rank behind, never stuck."""
    p = ras_progress(_timed(queries("stuck"), (100.0, 100.5, 101.0)))
    (c,) = p.communicators
    assert c.state == BEHIND and c.stuck == () and c.slow == ()
    assert [(lag.rank, lag.pid, lag.behind, lag.moving) for lag in c.held] == [(1, 674, (1, 1, 1), False)]
    assert c.sentence == ("communicator 0x5e413f75dea32c06: AllReduce counts 4/3 unchanged over 3 queries (1.0 s): "
                          "rank 1 (pid 674) is behind and not moving over 1.0 s, under the 2 s RAS needs to tell "
                          "stuck from slow: no verdict from RAS alone")
    assert p.sentence == "3 NCCL RAS queries over 1.0 s: communicators 1 behind (0x5e413f75dea32c06)"
    # the same counts over 2 s: stuck; a rank behind and moving over a short window is still slow
    (c,) = ras_progress(_timed(queries("stuck"), (100.0, 101.0, 102.0))).communicators
    assert c.state == STUCK and c.held == () and [lag.rank for lag in c.stuck] == [1]
    (c,) = ras_progress(_timed(queries("slow"), (100.0, 100.5, 101.0))).communicators
    assert c.state == SLOW and c.held == ()
