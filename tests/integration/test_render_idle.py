"""The idle rule on a real core: pool workers, queue consumers and an event loop are dimmed and
sorted last; the thread stuck on a lock and the main thread are not."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import FIXTURES, gcore, pyenv_pythons, run_hanganalyze, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    py = pyenv_pythons().get("3.11") or next(iter(pyenv_pythons().values()), None)
    if py is None:
        pytest.skip("no pyenv Python")
    h = start_hung([py, FIXTURES / "rpt_idle_pool.py"], ready="READY", settle=0.5)
    try:
        path = gcore(h.pid, tmp_path_factory.mktemp("idle"))
    finally:
        h.kill()
    yield path
    path.unlink()


def _out(core, fmt):
    res = run_hanganalyze([core, "--format", fmt], timeout=300)
    assert res.returncode in (0, 3, 5, 6), res.stderr.decode("utf-8", "replace")
    return res.stdout.decode("utf-8")


def test_text_groups_and_idle(core):
    out = _out(core, "text")
    heads = [line for line in out.splitlines() if line.startswith("Thread ")]
    by_name = {re.search(r'"([^"]+)"', h).group(1): h for h in heads}
    pool = next(h for n, h in by_name.items() if n.startswith("pool"))
    assert "+ 5 more threads like this" in pool and "idle" in pool
    consumer = next(h for n, h in by_name.items() if n.startswith("consumer"))
    assert "+ 2 more threads like this" in consumer and "idle" in consumer
    assert "idle" in by_name["event-loop"]
    assert "idle" not in by_name["stuck"] and "idle" not in by_name["MainThread"]
    # busy threads come before idle ones
    idle_rank = [("idle" in h) for h in heads]
    assert idle_rank == sorted(idle_rank)
    assert re.search(r"THREADS of .*: 12 threads in 5 groups, 10 idle", out)


def test_html_marks_idle_groups(core):
    out = _out(core, "html")
    groups = re.findall(r'<details class="group([^"]*)"', out)
    assert len(groups) == 5
    assert sum("idle" in g for g in groups) == 3
    assert "6 threads like this" in out and "3 threads like this" in out
