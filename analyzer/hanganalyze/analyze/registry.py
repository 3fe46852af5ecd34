"""Every rule that makes findings, as an object, in the order they run: the one registry.

The code-rule registry was split (``pipeline.PROCESS_STEPS`` and ``job.JOB_STEPS``, strings to
functions), five job rules shared one function, the triage ran outside the list, and a rule that
raised lost the whole report.  As in Mozilla Socorro's signature generator (a list of rule
objects, each recording what it did), each rule here is a ``CodeRule``: the finding ids it
``concludes`` (entries of ``signatures/rules/rules.yaml``, which keeps their texts, ``supersedes``
and order), what it ``reads``, and the function that ``decide``-s.  ``RULES`` lists them in run
order, by stage:

* ``process``: each process (deadlock cycles, asyncio, the signature database), before the job;
* ``job``: across the processes of a job (``crossrank.py``), on a ``JobContext``;
* ``report``: the whole report once sorted (the triage, first when no known bug matched).

A rule that raises is noted in ``Snapshot.warnings`` ("rule <id> failed: <error> (skipped)") and
skipped; the other rules and the report go on, as a failed input does in acquisition.
``tests/unit/test_rule_registry.py`` checks that ``RULES`` and ``rules.yaml`` list the same ids in
the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.asyncio_findings import asyncio_findings
from hanganalyze.analyze.crossrank import (
    JobContext,
    collective_hang,
    collective_mismatch,
    collective_straggler,
    peer_wait,
    rank_missing,
    rank_slow,
    worker_straggler,
)
from hanganalyze.analyze.gpurules import (
    gpu_busy_host_waits,
    gpu_ecc_errors,
    gpu_fallen_off_bus,
    gpu_idle_peers_busy,
    gpu_kernel_never_ends,
    gpu_xid,
)
from hanganalyze.analyze.intern import match_snapshot
from hanganalyze.analyze.rankstate import RankState
from hanganalyze.analyze.rasrules import nccl_ras_findings
from hanganalyze.analyze.rules import RuleSet
from hanganalyze.analyze.triage import triage_findings
from hanganalyze.analyze.waitfor import cycle_findings
from hanganalyze_gdbext.model import SERIOUS, SEVERITIES, Finding, Snapshot


@dataclass(frozen=True)
class CodeRule:
    """One rule: the ids it concludes, what it reads, when it runs, and the code that decides
    (``process``: ``decide(snapshot, db)``; ``job``: ``decide(JobContext)``; ``report``:
    ``decide(snapshot)``)."""

    concludes: Tuple[str, ...]
    stage: str
    reads: str
    decide: Callable[..., List[Finding]]

    @property
    def name(self) -> str:
        return ", ".join(self.concludes)


def _deadlock_cycles(snapshot: Snapshot, db: Any) -> List[Finding]:
    """Cycles are proven by memory: no signature is read."""
    return cycle_findings(snapshot)


RULES: Tuple[CodeRule, ...] = (
    CodeRule(("deadlock-cycle",), "process", "the wait-for graph (each thread's wait and its owner)",
             _deadlock_cycles),
    CodeRule(("asyncio-await-cycle", "asyncio-orphan-wait", "asyncio-loop-blocked"), "process",
             "Process.asyncio (event loops, tasks and what each awaits), the loop thread's frames", asyncio_findings),
    CodeRule(("signatures",), "process", "every thread's frames, the log, libraries and signal (signatures/*.yaml)",
             match_snapshot),
    CodeRule(("rank-missing",), "job", "ranks, WORLD_SIZE, local ranks, the launcher", rank_missing),
    CodeRule(("worker-straggler",), "job", "rank states: IPC waits and ranks elsewhere", worker_straggler),
    CodeRule(("collective-straggler",), "job", "rank states, flight-recorder sequence numbers", collective_straggler),
    CodeRule(("collective-mismatch",), "job", "the waiting ranks' collective, call site and sequence number",
             collective_mismatch),
    CodeRule(("collective-hang",), "job", "rank states (all waiting, none missing or elsewhere)", collective_hang),
    CodeRule(("collective-peer-wait",), "job", "ranks blocked in the device sync after a collective", peer_wait),
    CodeRule(("rank-slow",), "job", "rank states and each rank's progress over the samples (own wake-ups, frames)",
             rank_slow),
    CodeRule(("nccl-ras-stuck", "nccl-ras-slow-rank", "nccl-ras-progressing", "nccl-ras-error"), "job",
             "Snapshot.nccl_ras: NCCL RAS queries over time, joined to processes by pid", nccl_ras_findings),
    CodeRule(("gpu-fallen-off-bus",), "report", "Snapshot.gpu: Xid 79, lost GPUs; GPUs joined to ranks by pid",
             gpu_fallen_off_bus),
    CodeRule(("gpu-ecc-errors",), "report", "Snapshot.gpu: ECC Xids and counters, row remapping", gpu_ecc_errors),
    CodeRule(("gpu-xid",), "report", "Snapshot.gpu: the other Xids (signatures/gpu/xids.yaml)", gpu_xid),
    CodeRule(("gpu-kernel-never-ends",), "report", "cuda-gdb's kernel listings and rank states", gpu_kernel_never_ends),
    CodeRule(("gpu-busy-host-waits",), "report", "rank states (host waits) and each rank's GPU utilization",
             gpu_busy_host_waits),
    CodeRule(("gpu-idle-peers-busy",), "report", "every rank's GPU utilization and rank state", gpu_idle_peers_busy),
    CodeRule(("triage",), "report", "every thread's frames, waits and log (signatures/triage/waits.yaml)",
             triage_findings),
)


def of_stage(stage: str) -> List[CodeRule]:
    return [r for r in RULES if r.stage == stage]


def _run(rule: CodeRule, snapshot: Snapshot, *args: Any) -> List[Finding]:
    """``rule.decide(*args)``; a rule that raises is noted in the report and gives no finding."""
    try:
        return rule.decide(*args)
    except Exception as e:  # noqa: BLE001 - any bug of one rule: the report goes on without it
        snapshot.warnings.append("rule %s failed: %s: %s (skipped)" % (rule.name, type(e).__name__, e))
        return []


def run_process_rules(snapshot: Snapshot, db: Any, rules: RuleSet,
                      step_of: Optional[Dict[int, int]] = None) -> List[Finding]:
    """The findings of every process rule, in rule order.  ``step_of`` (a node summary's): each
    finding's id -> the index of its rule's ``step`` among the process steps of ``rules``."""
    steps = rules.steps("process")
    found: List[Finding] = []
    for rule in of_stage("process"):
        got = _run(rule, snapshot, snapshot, db)
        if step_of is not None:
            si = steps.index(rules.by_id(rule.concludes[0]).step)
            step_of.update((id(f), si) for f in got)
        found.extend(got)
    return found


def run_job_rules(snapshot: Snapshot, states: List[RankState], world: Optional[int], rules: RuleSet,
                  step: Optional[str] = None) -> List[Finding]:
    """The findings of the job rules (of one data ``step`` only, when given), in rule order."""
    ctx = JobContext(snapshot, states, world)
    found: List[Finding] = []
    for rule in of_stage("job"):
        if step is None or rules.by_id(rule.concludes[0]).step == step:
            found.extend(_run(rule, snapshot, ctx))
    return found


def run_report_rules(snapshot: Snapshot) -> None:
    """The report rules' findings (the triage): first when no known bug matched, last otherwise."""
    for rule in of_stage("report"):
        found = _run(rule, snapshot, snapshot)
        if rule.concludes != ("triage",):  # the GPU rules: placed by severity among the findings (a stable sort)
            order = {s: i for i, s in enumerate(SEVERITIES)}
            snapshot.findings = sorted(snapshot.findings + found, key=lambda f: order.get(f.severity, len(order)))
            continue
        known = any(f.severity in SERIOUS or f.severity == "warning" for f in snapshot.findings)  # a verdict leads
        snapshot.findings = (snapshot.findings + found) if known else (found + snapshot.findings)


def ids(registry: Sequence[CodeRule] = RULES) -> List[str]:
    """The finding ids the registry concludes, in run order (``rules.yaml`` lists the same)."""
    return [i for r in registry for i in r.concludes]
