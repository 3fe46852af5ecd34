"""Every rule that makes findings, as an object, in the order they run: the one registry.

The code-rule registry was split (``pipeline.PROCESS_STEPS`` and ``job.JOB_STEPS``, strings to
functions), five job rules shared one function, the triage ran outside the list, and a rule that
raised lost the whole report.  As in Mozilla Socorro's signature generator (a list of rule
objects, each recording what it did), each rule here is a ``CodeRule``: the finding ids it
``concludes`` (entries of ``signatures/rules/rules.yaml``, which keeps their texts, ``supersedes``
and order), what it ``reads``, and the function that ``decide``-s.  Each is declared where it is
written, by ``@rule(ids..., stage=, reads=)`` above its function (``ruledecl.py``); this module
imports the modules that declare them (``RULE_MODULES``) and lists them in ``RULES`` in the order
of ``rules.yaml``, by stage:

* ``process``: each process (deadlock cycles, asyncio, the signature database), before the job;
* ``job``: across the processes of a job (``crossrank.py``, ``rasrules.py``), on a ``JobContext``;
* ``report``: the whole report once sorted (``gpurules.py``; the triage, first when no known bug
  matched).

A declared id that ``rules.yaml`` lacks, an id of ``rules.yaml`` that no function declares, a stage
or step that disagrees with the file, or the ids of one function apart in it: ``RuleDeclarationError``
when this module is imported (every analysis and ``tests/unit/test_rule_registry.py`` fail).

A rule that raises is noted in ``Snapshot.warnings`` ("rule <id> failed: <error> (skipped)") and
skipped; the other rules and the report go on, as a failed input does in acquisition.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze import asyncio_findings, crashcontext, crossrank, gpurules, intern, rasrules, triage
from hanganalyze.analyze.crossrank import JobContext
from hanganalyze.analyze.rankstate import RankState
from hanganalyze.analyze.ruledecl import DECLARED, CodeRule, RuleDeclarationError, rule
from hanganalyze.analyze.rules import RuleSet, load_rules
from hanganalyze.analyze.waitfor import cycle_findings
from hanganalyze_gdbext.model import SERIOUS, SEVERITIES, Finding, Snapshot

#: The modules whose ``@rule`` functions make the findings (this one declares ``deadlock-cycle``).
RULE_MODULES = (asyncio_findings, intern, crossrank, rasrules, gpurules, triage)


@rule("deadlock-cycle", stage="process", reads="the wait-for graph (each thread's wait and its owner)")
def _deadlock_cycles(snapshot: Snapshot, db: Any) -> List[Finding]:
    """Cycles are proven by memory: no signature is read."""
    return cycle_findings(snapshot)


def in_run_order(declared: Sequence[CodeRule], listed: RuleSet) -> Tuple[CodeRule, ...]:
    """The ``declared`` rules in the order of ``listed`` (``rules.yaml``), each once (at its first
    id); a ``RuleDeclarationError`` that names the function or the file's line for each mismatch."""
    code_of: Dict[str, CodeRule] = {i: c for c in declared for i in c.concludes}
    known = {r.id for r in listed.rules}
    for c in declared:
        for i in c.concludes:
            if i not in known:
                raise RuleDeclarationError("@rule(%r) on %s.%s: %r is no rule of signatures/rules/rules.yaml (add "
                                           "its entry: texts and place in the run order)"
                                           % (i, c.decide.__module__, c.decide.__qualname__, i))
    out: List[CodeRule] = []
    at = 0
    while at < len(listed.rules):
        r = listed.rules[at]
        c = code_of.get(r.id)
        if c is None:
            raise RuleDeclarationError("%s: rule %r has no code: no function declares @rule(%r) in the modules "
                                       "analyze/registry.py imports" % (r.source, r.id, r.id))
        block = listed.rules[at:at + len(c.concludes)]
        if tuple(b.id for b in block) != c.concludes:
            raise RuleDeclarationError("%s: rules %s are not listed together, in the order of their @rule on %s.%s"
                                       % (r.source, ", ".join(c.concludes), c.decide.__module__, c.decide.__qualname__))
        for b in block:
            if b.stage != c.stage or b.step != r.step:
                raise RuleDeclarationError("%s: rule %r: stage %r step %r, but its @rule on %s says stage %r (and "
                                           "the ids of one function share one step)"
                                           % (b.source, b.id, b.stage, b.step, c.decide.__qualname__, c.stage))
        out.append(c)
        at += len(block)
    return tuple(out)


RULES: Tuple[CodeRule, ...] = in_run_order(DECLARED, load_rules())


def of_stage(stage: str) -> List[CodeRule]:
    return [r for r in RULES if r.stage == stage]


def _run(code: CodeRule, snapshot: Snapshot, *args: Any) -> List[Finding]:
    """``code.decide(*args)``; a rule that raises is noted in the report and gives no finding."""
    try:
        return code.decide(*args)
    except Exception as e:  # noqa: BLE001 - any bug of one rule: the report goes on without it
        snapshot.warnings.append("rule %s failed: %s: %s (skipped)" % (code.name, type(e).__name__, e))
        return []


def run_process_rules(snapshot: Snapshot, db: Any, rules: RuleSet,
                      step_of: Optional[Dict[int, int]] = None) -> List[Finding]:
    """The findings of every process rule, in rule order.  ``step_of`` (a node summary's): each
    finding's id -> the index of its rule's ``step`` among the process steps of ``rules``."""
    steps = rules.steps("process")
    found: List[Finding] = []
    for code in of_stage("process"):
        got = _run(code, snapshot, snapshot, db)
        if step_of is not None:
            si = steps.index(rules.by_id(code.concludes[0]).step)
            step_of.update((id(f), si) for f in got)
        found.extend(got)
    return rules.superseded(found, found)  # a process rule's finding replaces a signature's of the same process


def run_job_rules(snapshot: Snapshot, states: List[RankState], world: Optional[int], rules: RuleSet,
                  step: Optional[str] = None) -> List[Finding]:
    """The findings of the job rules (of one data ``step`` only, when given), in rule order."""
    ctx = JobContext(snapshot, states, world)
    found: List[Finding] = []
    for code in of_stage("job"):
        if step is None or rules.by_id(code.concludes[0]).step == step:
            found.extend(_run(code, snapshot, ctx))
    return found


def run_report_rules(snapshot: Snapshot) -> None:
    """The report rules' findings (the triage): first when no known bug matched, last otherwise."""
    for code in of_stage("report"):
        found = _run(code, snapshot, snapshot)
        if code.concludes != ("triage",):  # the GPU rules: placed by severity among the findings (a stable sort)
            order = {s: i for i, s in enumerate(SEVERITIES)}
            snapshot.findings = sorted(snapshot.findings + found, key=lambda f: order.get(f.severity, len(order)))
            continue
        crashcontext.demote_hangs_of_crashed(snapshot.findings, found)  # a crashed process's waits: context
        known = any(f.severity in SERIOUS or f.severity == "warning" for f in snapshot.findings)  # a verdict leads
        snapshot.findings = (snapshot.findings + found) if known else (found + snapshot.findings)


def ids(registry: Sequence[CodeRule] = RULES) -> List[str]:
    """The finding ids the registry concludes, in run order (``rules.yaml`` lists the same)."""
    return [i for r in registry for i in r.concludes]
