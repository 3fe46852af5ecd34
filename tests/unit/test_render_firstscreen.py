"""The first screen of a job report is the answer (issue 21.7): the verdict, the rank table, the
metadata all ranks share said once, the call tree opened where the ranks diverge, idle wait-for
graphs folded, in text, Markdown and HTML alike.  Built on a real 2-rank NCCL straggler
(tests/data/gpu_job); single-process reports keep their layout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hanganalyze import pipeline
from hanganalyze.render import render
from hanganalyze.render.view import build_view
from hanganalyze_gdbext.model import Samples, Snapshot
from hanganalyze_gdbext.model.job import JobRankProgress

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu_job"


def analyzed(name: str = "straggler.job.json") -> Snapshot:
    snap = Snapshot.from_dict(json.loads((DATA / name).read_text()))
    return pipeline.analyze(snap, pipeline.load_signature_db())


@pytest.fixture(scope="module")
def straggler() -> Snapshot:
    return analyzed()


def test_text_first_screen(straggler):
    text = render(straggler, "text")
    head = text.splitlines()[:15]
    verdict = next(line for line in head if line.startswith("VERDICT: "))
    assert verdict.startswith("VERDICT: rank 1 is in load_next_batch (nccl_job.py:80) -- stuck or slow: unknown")
    assert "meanwhile rank 0 waits in a device sync called from train_step (nccl_job.py:86)" \
        in verdict and verdict.endswith("[collective-straggler]")
    table = [line for line in head if re.match(r"^  [ *](rank|\d)", line)]
    assert table[0].split() == ["rank", "host", "pid", "state", "progress", "sources", "where"]
    assert table[1].split()[:6] == ["0", "-", "606", "device-sync", "-", "stacks"]
    assert table[2].split()[:6] == ["*1", "-", "607", "elsewhere", "-", "stacks"]
    assert table[2].endswith("in load_next_batch (nccl_job.py:80)")
    # the metadata the ranks share is said once, not once per rank
    assert "SAME ON RANKS 0-1: source live · executable /usr/bin/python3.12" in text
    assert text.count("nccl_job.py straggler 1") == 1 and text.count("libtorch_nvshmem.so") == 1
    assert "\nrank 0 · python3.12 · pid 606\n  source" not in text  # the old per-rank fact table


def test_text_tree_elides_the_common_trunk(straggler):
    lines = render(straggler, "text").splitlines()
    start = lines.index("WHERE THE RANKS DIVERGE (merged call tree, outermost first; common frames elided)")
    block = lines[start + 1:start + 10]
    assert block[0] == "  [0-1 (2)] 4 common frames, down to main (nccl_job.py:139)"  # user code first
    assert block[1].startswith("    [0 (1)] train (nccl_job.py:104) > train_step (nccl_job.py:86) > ")
    assert block[2] == "    [1 (1)] train (nccl_job.py:98) > load_next_batch (nccl_job.py:80) > clock_nanosleep"
    assert not any("__libc_start_main" in line for line in block)  # the trunk is elided
    assert any(re.search(r"\(\d+ branches where every rank is in the same place folded", line) for line in block)
    assert "(2 idle wait-for graphs folded: every thread in them waits on a resource nobody holds)" in lines
    # the full merged tree keeps its levels (indentation survives the terminal escaping)
    full = lines[lines.index("MERGED CALL TREE (outermost frame first; [ranks] (count) on each branch)") + 1:]
    assert any(line.startswith("    [") for line in full)


def test_markdown_first_screen(straggler):
    md = render(straggler, "md")
    head = "\n".join(md.splitlines()[:15])
    assert "**Verdict:** rank 1 is in load\\_next\\_batch (nccl\\_job.py:80)" not in head  # intra-word _ stays
    assert "**Verdict:** rank 1 is in load_next_batch (nccl_job.py:80) -- stuck or slow: unknown" in head
    assert "| rank | host | pid | state | progress | sources | where |" in head
    assert "| **1** (at fault) | - | 607 | elsewhere | - | stacks | in load_next_batch (nccl_job.py:80) |" in head
    assert md.count("nccl_job.py straggler 1") == 1
    assert "\n[0-1 (2)] 4 common frames, down to main (nccl_job.py:139)\n  [1 (1)] train (nccl_job.py:98)" in md \
        or "\n[0-1 (2)] 4 common frames, down to main (nccl_job.py:139)\n  [0 (1)] train (nccl_job.py:104)" in md
    assert "2 idle wait-for graphs folded" in md
    assert len(md) < 65000


def test_progress_and_unknown_evidence_in_the_verdict():
    """Sampled ranks say stuck or slow; a rank whose state has no evidence is listed, never blamed."""
    snap = analyzed()
    snap.processes[1].samples = Samples(count=3, window_s=1.0, interval_s=0.5)
    snap.job.progress = [JobRankProgress(process=1, rank=1, state="progressing", window_s=1.0, samples=3,
                                         cpu_s=0.01, changed=["load_next_batch (nccl_job.py:80)"])]
    view = build_view(snap).job
    assert "rank 1 is in load_next_batch (nccl_job.py:80) -- SLOW, not stuck over 1.0 s, 3 samples" in view.verdict
    assert [r.progress for r in view.rows] == ["", "progressing"] and view.progress_note == ""
    state0 = snap.job.state_of(0)
    state0.evidence, state0.evidence_reason = "unknown", "no stack in the input"
    view = build_view(snap).job
    assert "state unknown, not blamed: rank 0 (no stack in the input)" in view.verdict
    assert "meanwhile rank 0" not in view.verdict
    assert [r.state for r in view.rows] == ["unknown", "elsewhere"]


def test_only_differences_per_rank():
    snap = analyzed()
    snap.processes[1].threads = snap.processes[1].threads[:-1]
    shared = build_view(snap).job.shared
    assert shared.who == "ranks 0-1" and ("python", "3.12.3") in shared.same
    assert ("threads", [("0", "9"), ("1", "8")]) in shared.differ
    assert "DIFFERS threads: 9 on 0; 8 on 1" in render(snap, "text")


def test_html_opens_the_tree_where_ranks_diverge(straggler):
    html = render(straggler, "html")
    assert html.index('id="answer"') < html.index('id="findings"')
    assert '<tr class="at-fault st-elsewhere"><td><code>1</code> <span class="fault">at fault</span>' in html
    assert html.count('<details class="ct ct-div" open>') == 2  # main thread and one NCCL proxy thread
    assert html.count("ranks diverge here") == 2
    assert '<details class="ct-trunk"><summary>4 common frames</summary>' in html
    assert html.count('<section class="waitgraph idle-wg"') == 2
    assert 'id="summary"' not in html  # no per-rank fact tables


def test_single_process_keeps_its_layout():
    snap = analyzed()
    snap.processes = snap.processes[:1]
    snap.job = None
    snap.findings = []
    assert build_view(snap).job is None
    text = render(snap, "text")
    assert "VERDICT" not in text and "\nrank 0 · python3.12 · pid 606\n  source     live" in text
    assert 'id="summary"' in render(snap, "html") and "**Verdict:**" not in render(snap, "md")
