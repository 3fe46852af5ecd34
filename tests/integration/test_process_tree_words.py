"""Process trees in their own words (issue 30), on a real hung ``multiprocessing.Pool``
(tests/fixtures/py_pool_hang.py: the workers block on a lock the parent holds, no rank anywhere):

* ``--pid`` of the parent names its child processes (pids and names, from /proc) and the option
  that reads them too (``--job PID``), in the process's facts and in the triage's advice;
* ``--job`` of the parent speaks of the parent and its workers: no rank, no "cross-rank", no
  "where the ranks diverge", in text, Markdown and HTML; the advice does not tell it to run --job.
"""

from __future__ import annotations

import os
import re
import signal
import sys

import pytest
from helpers import FIXTURES, run_hanganalyze, start_hung

from hanganalyze.errors import EXIT_HANG

FIXTURE = FIXTURES / "py_pool_hang.py"
RANK_WORDS = re.compile(r"\brank|cross-rank|RANK", re.I)


def _children(pid: int) -> list:
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            out.extend(int(x) for x in f.read().split())
    return sorted(out)


@pytest.fixture(scope="module")
def pool():
    hung = start_hung([sys.executable, str(FIXTURE)], settle=0.5)
    workers = _children(hung.pid)
    try:
        yield hung, workers
    finally:
        for w in workers:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass
        hung.kill()


def test_pid_of_the_parent_names_its_workers(pool):
    hung, workers = pool
    assert len(workers) == 2
    res = run_hanganalyze(["--pid", hung.pid], timeout=120)
    out = res.stdout.decode()
    assert res.returncode == EXIT_HANG, res.stderr.decode()
    facts = next(line for line in out.splitlines() if line.strip().startswith("children "))
    for w in workers:
        assert "%d (python" % w in facts
    assert "hanganalyze --job %d" % hung.pid in facts
    fixes = [line for line in out.splitlines() if line.strip().startswith("fix:")]
    assert any("--job PID reads the parent and its workers" in f for f in fixes), fixes


def test_job_of_the_parent_speaks_of_parent_and_workers(pool, tmp_path):
    hung, workers = pool
    res = run_hanganalyze(["--job", hung.pid], timeout=180)
    out = res.stdout.decode()
    assert res.returncode == EXIT_HANG, res.stderr.decode()
    first = out.split("\nFINDINGS\n")[0]
    assert "WHERE THE PARENT AND ITS WORKERS DIVERGE" in first
    assert "no finding across the parent and its workers" in first
    rows = [line.split() for line in first.splitlines() if str(hung.pid) in line.split() or
            any(str(w) in line.split() for w in workers)]
    assert ["parent", "-", str(hung.pid)] == rows[0][:3] and rows[1][:2] == ["worker", "1"], rows
    assert not RANK_WORDS.search(first), first
    job = out.split("\nJOB: ")[1].split("THREADS of ")[0]
    assert "PROCESS CLASSES" in job and "[workers 1-2] (2)" in job and "[the parent] (1)" in job
    assert not RANK_WORDS.search(job), job
    # the workers' frame: resize_image, where they wait for the parent's lock
    assert re.search(r"\[py\] resize_image \(\S*py_pool_hang.py:\d+\)", out)
    # a --job report is not told to run --job
    fixes = [line for line in out.splitlines() if line.strip().startswith("fix:")]
    assert fixes and not any("--job" in f for f in fixes), fixes
    for fmt in ("md", "html"):
        path = tmp_path / ("r." + fmt)
        r = run_hanganalyze(["--job", hung.pid, "--samples", "1", "-o", path], timeout=180)
        text = path.read_text()
        assert r.returncode == EXIT_HANG and "parent and its workers" in text
        head = text.split("THREADS")[0] if fmt == "md" else re.sub(r"(?s)<style>.*?</style>", "",
                                                                   text.split('id="findings"')[0])
        assert not re.search(r"cross-rank|ranks diverge|Rank classes|<th>rank</th>|\| rank \|", head), fmt
