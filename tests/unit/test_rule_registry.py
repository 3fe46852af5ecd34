"""The rule registry (analyze/registry.py): every rule an object, run in order, each isolated.

A rule that raises is noted in the report and skipped; the report survives with the findings of
the other rules (checked on the real 2-rank NCCL straggler of tests/data/gpu_job).  Each rule is
declared by ``@rule`` above its function (analyze/ruledecl.py) and run in ``rules.yaml``'s order; a
declaration and the file that disagree fail when the registry is imported."""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from hanganalyze import pipeline
from hanganalyze.analyze import registry, ruledecl
from hanganalyze.analyze.ruledecl import CodeRule, RuleDeclarationError, rule
from hanganalyze.analyze.rules import load_rules, read_rules, rules_path
from hanganalyze_gdbext.model import SERIOUS, SEVERITIES, TRIAGE, Finding, Snapshot

STRAGGLER = Path(__file__).resolve().parents[1] / "data" / "gpu_job" / "straggler.job.json"
ANALYZER = Path(__file__).resolve().parents[2] / "analyzer" / "hanganalyze"


def _snapshot() -> Snapshot:
    snap = Snapshot.from_dict(json.loads(STRAGGLER.read_text(encoding="utf-8")))
    snap.findings = []
    return snap


def _raise(*_args) -> List[Finding]:
    raise ValueError("boom")


def _with_failing(monkeypatch, rule_id: str) -> None:
    rules = tuple(dataclasses.replace(r, decide=_raise) if rule_id in r.concludes else r for r in registry.RULES)
    assert rules != registry.RULES, rule_id
    monkeypatch.setattr(registry, "RULES", rules)


def test_the_straggler_without_failures(db):
    snap = pipeline.analyze(_snapshot(), db)
    assert [f.signature for f in snap.findings][:2] == ["collective-straggler", "collective-peer-wait"]
    assert not any("failed" in w for w in snap.warnings)


@pytest.mark.parametrize("rule_id", ["collective-straggler", "signatures", "deadlock-cycle"])
def test_a_rule_that_raises_is_noted_and_skipped(monkeypatch, db, rule_id):
    _with_failing(monkeypatch, rule_id)
    snap = pipeline.analyze(_snapshot(), db)
    sigs = [f.signature for f in snap.findings]
    assert rule_id not in sigs
    assert "collective-peer-wait" in sigs and "triage" in sigs  # the other rules ran
    if rule_id != "collective-straggler":
        assert "collective-straggler" in sigs
    assert "rule %s failed: ValueError: boom (skipped)" % rule_id in snap.warnings
    assert snap.job is not None and snap.bucket  # the rest of the report is made


def test_a_failing_triage_leaves_the_known_findings(monkeypatch, db):
    _with_failing(monkeypatch, "triage")
    snap = pipeline.analyze(_snapshot(), db)
    assert [f.signature for f in snap.findings] == ["collective-straggler", "collective-peer-wait"]
    assert "rule triage failed: ValueError: boom (skipped)" in snap.warnings


def test_a_failing_rule_of_several_ids_names_them_all(monkeypatch, db):
    _with_failing(monkeypatch, "asyncio-orphan-wait")
    snap = pipeline.analyze(_snapshot(), db)
    assert ("rule asyncio-await-cycle, asyncio-orphan-wait, asyncio-loop-blocked failed: ValueError: boom "
            "(skipped)") in snap.warnings
    assert snap.findings[0].signature == "collective-straggler"


def test_severities_are_one_ordered_set():
    assert SEVERITIES[-1] == TRIAGE and SERIOUS == SEVERITIES[:4]
    assert all(s in SEVERITIES for s in ("crash", "deadlock", "hang", "error", "info"))


# --------------------------------------------------------------------------------------------
# Declared where written (@rule), ordered by rules.yaml, mismatches refused
# --------------------------------------------------------------------------------------------

def _declared_in(path: Path) -> List[str]:
    """The functions of a source file decorated with ``@rule(...)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "rule" for d in n.decorator_list)]


def test_every_rule_is_declared_above_its_function_in_a_module_the_registry_imports():
    declaring = {p.relative_to(ANALYZER).with_suffix("").as_posix().replace("/", "."): _declared_in(p)
                 for p in ANALYZER.rglob("*.py") if _declared_in(p)}
    imported = {m.__name__[len("hanganalyze."):] for m in registry.RULE_MODULES} | {"analyze.registry"}
    assert set(declaring) == imported  # a module with @rule that the registry does not import would be lost
    assert "rank_slow" in declaring["analyze.crossrank"] and "triage_findings" in declaring["analyze.triage"]
    where = {(c.decide.__module__, c.decide.__name__) for c in registry.RULES}
    assert where == {("hanganalyze." + m, f) for m, fs in declaring.items() for f in fs}
    assert len(ruledecl.DECLARED) == len(registry.RULES)


def test_the_run_order_is_rules_yaml_not_the_import_order(tmp_path):
    assert registry.in_run_order(list(reversed(ruledecl.DECLARED)), load_rules()) == registry.RULES
    path = _edited(tmp_path, "- id: worker-straggler\n", "- id: worker-straggler-moved\n")
    text = path.read_text()
    entry = text[text.index("- id: worker-straggler-moved\n"):text.index("- id: collective-straggler\n")]
    text = text.replace(entry, "").replace("- id: rank-slow\n", entry + "- id: rank-slow\n", 1)
    path.write_text(text.replace("- id: worker-straggler-moved\n", "- id: worker-straggler\n"))
    job = [c.name for c in registry.in_run_order(ruledecl.DECLARED, read_rules(path)) if c.stage == "job"]
    assert job[:6] == ["rank-missing", "collective-straggler", "collective-mismatch", "collective-hang",
                       "collective-peer-wait", "worker-straggler"]
    assert [c.name for c in registry.RULES if c.stage == "job"][:2] == ["rank-missing", "worker-straggler"]


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the shipped rule folder with ``old`` replaced by ``new`` once in ``rules.yaml``."""
    d = tmp_path / "rules"
    shutil.copytree(rules_path().parent, d)
    text = (d / "rules.yaml").read_text()
    assert old in text
    (d / "rules.yaml").write_text(text.replace(old, new, 1))
    return d / "rules.yaml"


def test_a_declared_id_that_rules_yaml_lacks_is_refused():
    def brand_new(ctx) -> List[Finding]:
        return []

    extra = CodeRule(("brand-new-rule",), "job", "nothing", brand_new)
    with pytest.raises(RuleDeclarationError, match=r"@rule\('brand-new-rule'\) on .+\.brand_new: 'brand-new-rule' is "
                                                   r"no rule of signatures/rules/rules.yaml"):
        registry.in_run_order(ruledecl.DECLARED + [extra], load_rules())


def test_a_rules_yaml_id_without_code_is_refused(tmp_path):
    path = _edited(tmp_path, "- id: rank-slow\n", "- id: rank-slower\n")
    with pytest.raises(RuleDeclarationError) as e:
        registry.in_run_order(ruledecl.DECLARED, read_rules(path))
    # the first problem found: the function's id the file lost
    assert "'rank-slow' is no rule of signatures/rules/rules.yaml" in str(e.value)
    without = [c for c in ruledecl.DECLARED if c.concludes != ("rank-slow",)]
    with pytest.raises(RuleDeclarationError, match=r"rules\.yaml:\d+: rule 'rank-slower' has no code: no function "
                                                   r"declares @rule\('rank-slower'\)"):
        registry.in_run_order(without, read_rules(path))
    with pytest.raises(RuleDeclarationError, match=r"rules\.yaml:\d+: rule 'rank-slow' has no code"):
        registry.in_run_order(without, load_rules())


def test_a_stage_or_step_that_disagrees_with_rules_yaml_is_refused(tmp_path):
    moved = [dataclasses.replace(c, stage="report") if c.concludes == ("rank-slow",) else c for c in ruledecl.DECLARED]
    with pytest.raises(RuleDeclarationError, match=r"rule 'rank-slow': stage 'job' step 'slow_rank', but its @rule "
                                                   r"on rank_slow says stage 'report'"):
        registry.in_run_order(moved, load_rules())
    path = _edited(tmp_path, "- id: nccl-ras-error\n  kind: code\n  stage: job\n  step: nccl_ras\n",
                   "- id: nccl-ras-error\n  kind: code\n  stage: job\n  step: nccl_errors\n")
    with pytest.raises(RuleDeclarationError, match=r"rule 'nccl-ras-error': stage 'job' step 'nccl_errors'"):
        registry.in_run_order(ruledecl.DECLARED, read_rules(path))


def test_the_ids_of_one_function_are_listed_together_in_its_order():
    swapped = [dataclasses.replace(c, concludes=(c.concludes[1], c.concludes[0]) + c.concludes[2:])
               if len(c.concludes) > 1 and c.stage == "job" else c for c in ruledecl.DECLARED]
    with pytest.raises(RuleDeclarationError, match=r"rules nccl-ras-slow-rank, nccl-ras-stuck, nccl-ras-progressing, "
                                                   r"nccl-ras-error are not listed together, in the order of their "
                                                   r"@rule on [\w.]+nccl_ras_findings"):
        registry.in_run_order(swapped, load_rules())


def test_rule_records_the_function_unchanged_and_refuses_a_second_declaration(monkeypatch):
    monkeypatch.setattr(ruledecl, "DECLARED", [])

    def decide(ctx) -> List[Finding]:
        return []

    assert rule("one", "two", stage="job", reads="what it reads")(decide) is decide
    assert ruledecl.DECLARED == [CodeRule(("one", "two"), "job", "what it reads", decide)]
    assert ruledecl.DECLARED[0].name == "one, two"
    with pytest.raises(RuleDeclarationError, match=r"finding id 'two' declared twice \(the second time on "):
        rule("two", stage="report", reads="x")(decide)
    with pytest.raises(RuleDeclarationError, match=r"@rule\('three', 'three'\): a finding id named twice"):
        rule("three", "three", stage="report", reads="x")
    with pytest.raises(RuleDeclarationError, match=r"stage 'jobs' is not one of process, job, report"):
        rule("four", stage="jobs", reads="x")
    with pytest.raises(RuleDeclarationError, match=r"at least one finding id"):
        rule(stage="job", reads="x")
    assert len(ruledecl.DECLARED) == 1


def test_importing_the_registry_fails_on_a_rule_rules_yaml_lacks():
    """What a newcomer sees who writes ``@rule("my-rule", ...)`` and forgets its ``rules.yaml`` entry."""
    code = ("from hanganalyze.analyze.ruledecl import rule\n"
            "@rule('my-rule', stage='job', reads='x')\n"
            "def my_rule(ctx):\n    return []\n"
            "import hanganalyze.analyze.registry\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == (
        "hanganalyze.analyze.ruledecl.RuleDeclarationError: @rule('my-rule') on __main__.my_rule: 'my-rule' is no "
        "rule of signatures/rules/rules.yaml (add its entry: texts and place in the run order)")
