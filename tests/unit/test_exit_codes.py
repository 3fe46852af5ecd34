"""The exit code of an analysis (``cli.verdict_exit_code``): 3 hang, 5 deadlock, 6 crash, 0 when
nothing is hung or the process progressed, 4 when a job's input failed and nothing else was
found -- on snapshots built with the model, the same code a core, a live process and a job give.
The real processes behind these codes: tests/integration/test_plainlock_deadlock.py."""

from __future__ import annotations

from typing import List, Optional

import pytest

from hanganalyze.cli import EXIT_HELP, verdict_exit_code
from hanganalyze.errors import EXIT_CRASH, EXIT_DEADLOCK, EXIT_HANG, EXIT_INPUT, EXIT_OK, EXIT_TOOL
from hanganalyze_gdbext.model import Finding, Process, Snapshot, Thread, ThreadProgress, Triage


def _snap(findings: List[Finding], progress: Optional[str] = None, error: Optional[str] = None,
          processes: int = 1) -> Snapshot:
    procs = []
    for _ in range(processes):
        t = Thread(tid=7, name="worker")
        if progress is not None:
            t.progress = ThreadProgress(state=progress, samples=3)
        procs.append(Process(source="live", pid=7, threads=[t], error=error))
    return Snapshot(processes=procs, findings=findings)


def _f(severity: str, signature: str = "x", wait: Optional[str] = None, processes=()) -> Finding:
    return Finding(signature=signature, title="t", severity=severity, process=0,
                   processes=list(processes), triage=Triage(wait=wait) if wait else None)


def test_codes_are_distinct_and_keep_the_documented_ones():
    codes = [EXIT_OK, EXIT_INPUT, EXIT_HANG, EXIT_TOOL, EXIT_DEADLOCK, EXIT_CRASH]
    assert codes == [0, 2, 3, 4, 5, 6]
    said = ((0, "no hang"), (3, "hang"), (5, "deadlock"), (6, "crash"), (2, "usage"), (4, "the analysis failed"))
    for code, word in said:
        assert "%d %s" % (code, word) in EXIT_HELP


@pytest.mark.parametrize("severities,code", [
    ([], EXIT_OK),
    (["info"], EXIT_OK),
    (["hang"], EXIT_HANG),
    (["error"], EXIT_HANG),
    (["deadlock", "hang"], EXIT_DEADLOCK),
    (["hang", "deadlock", "crash"], EXIT_CRASH),
])
def test_the_most_serious_finding_decides(severities, code):
    assert verdict_exit_code(_snap([_f(s) for s in severities])) == code


@pytest.mark.parametrize("wait,progress,code", [
    ("lock", None, EXIT_HANG),  # a core: threads stuck in a wait
    ("lock", "stuck", EXIT_HANG),
    ("sleep", "stuck", EXIT_HANG),  # a process sleeping in native code is hung to its user
    ("lock", "progressing", EXIT_OK),  # it moved over the samples
    ("runs", None, EXIT_OK),
    ("idle", "stuck", EXIT_OK),  # waits for work
    ("crashed", None, EXIT_CRASH),
])
def test_triage_counts_by_its_wait_and_the_samples(wait, progress, code):
    assert verdict_exit_code(_snap([_f("triage", "triage", wait)], progress)) == code


def test_a_finding_outranks_the_triage():
    """A deadlocked process killed with SIGABRT for its core: the triage says crashed, the cycle
    says deadlock, and the deadlock is the diagnosis."""
    snap = _snap([_f("deadlock", "deadlock-cycle"), _f("triage", "triage", "crashed")])
    assert verdict_exit_code(snap) == EXIT_DEADLOCK
    snap = _snap([_f("info", "some-note"), _f("triage", "triage", "crashed")])
    assert verdict_exit_code(snap) == EXIT_CRASH


def test_jobs_and_failed_inputs():
    # a job: one triage finding for two processes; one of them stuck is enough
    snap = _snap([_f("triage", "triage", "collective", processes=[0, 1])], "progressing", processes=2)
    assert verdict_exit_code(snap) == EXIT_OK
    snap.processes[1].threads[0].progress = ThreadProgress(state="stuck", samples=3)
    assert verdict_exit_code(snap) == EXIT_HANG
    assert verdict_exit_code(_snap([], error="gdb timed out")) == EXIT_TOOL
    assert verdict_exit_code(_snap([_f("deadlock")], error="gdb timed out")) == EXIT_DEADLOCK
