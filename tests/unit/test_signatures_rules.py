"""The rule list (signatures/rules/rules.yaml): one ordered list of every rule, code rules included."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_hanganalyze  # noqa: E402

from hanganalyze import pipeline  # noqa: E402
from hanganalyze.analyze import registry  # noqa: E402
from hanganalyze.analyze.rules import load_rules, read_rules, rules_path, validate_rules  # noqa: E402
from hanganalyze.errors import SignatureError  # noqa: E402
from hanganalyze_gdbext.model import SEVERITIES, Finding  # noqa: E402

JOB_RULES = ["rank-missing", "worker-straggler", "collective-straggler", "collective-mismatch", "collective-hang",
             "collective-peer-wait", "rank-slow", "nccl-ras-stuck", "nccl-ras-slow-rank", "nccl-ras-progressing",
             "nccl-ras-error"]

ASYNCIO_RULES = ["asyncio-await-cycle", "asyncio-orphan-wait", "asyncio-loop-blocked"]
GPU_RULES = ["gpu-fallen-off-bus", "gpu-ecc-errors", "gpu-xid", "gpu-kernel-never-ends", "gpu-busy-host-waits",
             "gpu-idle-peers-busy"]


def test_shipped_rules_are_valid_and_ordered():
    rules = validate_rules([s.id for s in pipeline.load_signature_db(use_cache=False).signatures])
    assert [r.id for r in rules.rules] == (["deadlock-cycle"] + ASYNCIO_RULES + ["signatures"] + JOB_RULES + GPU_RULES
                                           + ["triage"])
    assert [r.id for r in rules.rules if not r.code] == ["signatures"]
    assert rules.cross_rank == frozenset(JOB_RULES) - {"collective-peer-wait", "rank-slow"}
    assert rules.sampled("waits") == {"collective-mismatch", "collective-hang", "collective-peer-wait"}
    assert rules.sampled("straggler") == {"worker-straggler", "collective-straggler"}
    assert rules.by_id("triage").severity == "triage" and rules.by_id("triage").stage == "report"
    assert rules.by_id("collective-peer-wait").supersedes == ("cuda-sync-busy-spin", "cuda-host-waits-for-device")
    slow = rules.by_id("rank-slow")
    assert slow.severity == "warning" and slow.samples == "" and "collective-straggler" in slow.supersedes
    assert all(r.severity and r.cause and r.source.startswith(str(Path("signatures") / "rules" / "rules.yaml:"))
               for r in rules.rules if r.code)
    assert load_rules() == read_rules(rules_path(), validate=False)  # the run's unvalidated read agrees


def test_every_rule_has_code_and_every_code_a_rule():
    """The registry's objects conclude exactly the ids of the rule list, in its order and stages."""
    rules = load_rules()
    assert registry.ids() == [r.id for r in rules.rules]
    for code in registry.RULES:
        assert {rules.by_id(i).stage for i in code.concludes} == {code.stage}, code.name
        assert len({rules.by_id(i).step for i in code.concludes}) == 1, code.name  # one step per object
    assert [c.stage for c in registry.RULES] == sorted((c.stage for c in registry.RULES),
                                                       key=["process", "job", "report"].index)


def test_supersedes_only_on_the_processes_named():
    rules = load_rules()
    peer = Finding(signature="collective-peer-wait", title="t", severity="hang", process=1, processes=[1, 2])
    spins = [Finding(signature="cuda-sync-busy-spin", title="t", severity="info", process=i) for i in range(4)]
    other = Finding(signature="gil-held-by-sleeper", title="t", severity="hang", process=1)
    kept = rules.superseded([peer], spins + [other])
    assert [(f.signature, f.process) for f in kept] == [("cuda-sync-busy-spin", 0), ("cuda-sync-busy-spin", 3),
                                                       ("gil-held-by-sleeper", 1)]
    assert rules.superseded([], spins) == spins


def _copy(tmp_path: Path, old: str, new: str) -> Path:
    d = tmp_path / "rules"
    shutil.copytree(rules_path().parent, d)
    text = (d / "rules.yaml").read_text()
    assert old in text
    (d / "rules.yaml").write_text(text.replace(old, new, 1))
    return d / "rules.yaml"


def test_schema_errors_name_file_and_line(tmp_path):
    path = _copy(tmp_path, "  severity: deadlock\n", "  severity: stuck\n")
    with pytest.raises(SignatureError) as e:
        read_rules(path)
    line = path.read_text().splitlines().index("  severity: stuck") + 1
    assert str(e.value).startswith("%s:%d: severity: 'stuck' is not one of" % (path, line)), str(e.value)


def test_duplicate_rule_id_is_refused(tmp_path):
    path = _copy(tmp_path, "- id: collective-hang\n", "- id: collective-mismatch\n")
    with pytest.raises(SignatureError, match=r"rules\.yaml:\d+: id: duplicate rule id 'collective-mismatch'"):
        read_rules(path)


def test_code_rule_needs_its_texts(tmp_path):
    path = _copy(tmp_path, "  severity: hang\n", "")
    with pytest.raises(SignatureError, match=r"rules\.yaml:\d+: .*'severity' is a required property"):
        read_rules(path)


def test_signatures_list_shows_code_rules_in_order():
    res = run_hanganalyze(["signatures", "list"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.decode().splitlines()
    ids = [ln.split()[0] for ln in lines]
    code = [ln.split()[0] for ln in lines if ln.endswith("[code rule]")]
    assert code == ["deadlock-cycle"] + ASYNCIO_RULES + JOB_RULES + GPU_RULES + ["triage"]
    tail = JOB_RULES + GPU_RULES + ["triage"]
    assert ids[0] == "deadlock-cycle" and ids[-len(tail):] == tail
    assert "cuda-sync-busy-spin" in ids[1:-len(tail)] and not lines[ids.index("cuda-sync-busy-spin")].endswith(
        "[code rule]")


def test_schema_severities_are_the_models():
    schema = json.loads((rules_path().parent / "schema.json").read_text())
    assert tuple(schema["$defs"]["rule"]["properties"]["severity"]["enum"]) == SEVERITIES


def test_samples_key_is_checked(tmp_path):
    path = _copy(tmp_path, "  samples: waits\n", "  samples: sometimes\n")
    with pytest.raises(SignatureError, match=r"rules\.yaml:\d+: samples: 'sometimes' is not one of"):
        read_rules(path)


def test_triage_texts_are_data():
    """The triage's titles and cause are its entry's (analyze/triage.py keeps no text of its own)."""
    rule = load_rules().by_id("triage")
    assert rule.text("title_wait") % "a lock" == "Triage: waits for a lock"
    assert {"title_crashed", "title_runs", "title_samples"} <= set(rule.texts)
    assert rule.cause.startswith("What the stacks show when no known bug explains them")
