"""The rules that make findings, in the order the pipeline runs them (``signatures/rules/rules.yaml``).

Findings came in three styles (YAML signatures, a table of job findings in ``job.py``, fix strings
in ``waitfor.py``), so ``signatures list`` could not show the code rules and one rule named another
by a hard-coded id.  Now there is one ordered list: the signature database is one entry, every
other entry is a *code rule* whose decision stays code (a function declared by ``@rule``, which
``analyze/registry.py`` runs in this order) while its id, title, cause, fixes, links, what it ``supersedes`` and
how samples judge it are data here.  Findings are made from these texts by ``analyze/findings.py``.

The file ships with the tool and is read on every run, so the run reads it like the frame lists
(libyaml, no schema: importing jsonschema alone costs ~75 ms); ``signatures validate`` and the tests
check it against ``signatures/rules/schema.json`` with ``file:line`` errors as the signature loader
gives them (``load_rules(validate=True)``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from hanganalyze.analyze import signatures as sigs
from hanganalyze.errors import SignatureError
from hanganalyze_gdbext.model import Finding

#: Folder of the rule list inside the built-in signature folder, and its files.
RULES_DIR = "rules"
RULES_FILE = "rules.yaml"
RULES_SCHEMA = "schema.json"
#: ``Rule.kind`` of the entry where the YAML signature database runs.
SIGNATURES_KIND = "signatures"


@dataclass(frozen=True)
class Rule:
    """One entry of the rule list: what a finding with this id says (the decision is elsewhere)."""

    id: str
    kind: str  # "signatures" (the YAML database) or "code"
    stage: str  # "process" (each process), "job" (across the processes of a job) or "report" (the triage)
    step: str  # rules that run together (one object of the registry may decide several ids)
    title: str
    severity: str = ""
    cause: str = ""
    fix: Tuple[str, ...] = ()
    references: Tuple[str, ...] = ()
    texts: Dict[str, str] = field(default_factory=dict)
    supersedes: Tuple[str, ...] = ()
    cross_rank: bool = False
    samples: str = ""  # how samples judge its finding (progress.py): "waits", "straggler" or ""
    source: str = ""  # file:line

    @property
    def code(self) -> bool:
        return self.kind != SIGNATURES_KIND

    def text(self, name: str) -> str:
        """A named text of a code rule (a KeyError names a text the data lacks: a bug, not input)."""
        return self.texts[name]


@dataclass(frozen=True)
class RuleSet:
    """The ordered rule list with the look-ups the pipeline needs."""

    rules: Tuple[Rule, ...]

    def by_id(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError("no rule %r in %s" % (rule_id, RULES_FILE))

    def steps(self, stage: str) -> List[str]:
        """The steps of a stage in rule order, each once (at its first rule)."""
        out: List[str] = []
        for r in self.rules:
            if r.stage == stage and r.step not in out:
                out.append(r.step)
        return out

    @property
    def cross_rank(self) -> FrozenSet[str]:
        """Ids of the findings that compare ranks (the job's diagnosis)."""
        return frozenset(r.id for r in self.rules if r.cross_rank)

    def sampled(self, how: str) -> FrozenSet[str]:
        """Ids of the job rules whose findings repeated samples judge as ``how`` (``samples:``)."""
        return frozenset(r.id for r in self.rules if r.samples == how)

    def superseded(self, findings: Sequence[Finding], candidates: Sequence[Finding]) -> List[Finding]:
        """``candidates`` less those that a finding in ``findings`` supersedes: same id named in its
        rule's ``supersedes`` and a process the superseding finding names (a candidate that holds
        for several processes keeps the others)."""
        over: Dict[str, set] = {}
        for f in findings:
            rule = self._code_rule(f.signature)
            if rule is not None:
                for sid in rule.supersedes:
                    over.setdefault(sid, set()).update(f.processes or [f.process])
        out = []
        for c in candidates:
            drop = over.get(c.signature)
            if not drop:
                out.append(c)
            elif len(c.processes) > 1:  # a finding already grouped (a node summary's): the others stay
                keep = [i for i in c.processes if i not in drop]
                if keep:
                    c.process, c.processes = keep[0], keep
                    out.append(c)
            elif c.process not in drop:
                out.append(c)
        return out

    def _code_rule(self, rule_id: str) -> Optional[Rule]:
        return next((r for r in self.rules if r.id == rule_id and r.code), None)


def rules_path() -> Path:
    return sigs.builtin_dir() / RULES_DIR / RULES_FILE


def _rule(d: dict, source: str) -> Rule:
    return Rule(
        id=d["id"], kind=d["kind"], stage=d["stage"], step=d["step"], title=d["title"],
        severity=d.get("severity", ""), cause=d.get("cause", ""), fix=tuple(d.get("fix") or ()),
        references=tuple(d.get("references") or ()), texts=dict(d.get("texts") or {}),
        supersedes=tuple(d.get("supersedes") or ()), cross_rank=bool(d.get("cross_rank")),
        samples=d.get("samples", ""), source=source,
    )


def _rule_lines(data, node) -> Optional[List[int]]:
    """The line of each entry of ``rules`` (what a cached read keeps of the node tree)."""
    if node is None or not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        return None
    return [sigs._node_at(node, ["rules", i]).start_mark.line + 1 for i in range(len(data["rules"]))]


def read_rules(path: Path, validate: bool = True, cached: bool = False) -> RuleSet:
    """The rule list of ``path``; every problem is one ``SignatureError("file:line: key: message")``.
    ``cached`` (trusted, unvalidated): the parsed file and its lines may come from the data cache
    (``signatures.read_data_file``)."""
    disp = sigs.display_path(path)
    lines: Optional[List[int]] = None
    if cached and not validate:
        node = None
        data, lines = sigs.read_data_file(path, _rule_lines, "rule-lines")
    else:
        data, node = sigs.read_yaml(path, trusted=not validate)
    if validate:
        if data is None:
            raise SignatureError("%s:1: empty rule file" % disp)
        schema = json.loads((path.parent / RULES_SCHEMA).read_text(encoding="utf-8"))
        sigs._validate(data, schema, disp, node)
    out: List[Rule] = []
    seen: Dict[str, str] = {}
    for i, d in enumerate(data["rules"]):
        if lines is not None:
            line = lines[i]
        else:
            line = sigs._node_at(node, ["rules", i]).start_mark.line + 1 if node is not None else 0
        rule = _rule(d, "%s:%d" % (disp, line))
        if rule.id in seen:
            if cached:  # the error names the id's own line: read the node tree
                return read_rules(path, validate)
            raise sigs._err(disp, node, ["rules", i, "id"], "duplicate rule id %r (first defined at %s)"
                            % (rule.id, seen[rule.id]))
        seen[rule.id] = rule.source
        out.append(rule)
    if sum(1 for r in out if not r.code) != 1:
        raise SignatureError("%s:1: rules: exactly one rule must be of kind %r" % (disp, SIGNATURES_KIND))
    return RuleSet(tuple(out))


@lru_cache(maxsize=1)
def load_rules() -> RuleSet:
    """The built-in rule list, read once per process (trusted: shipped with the tool, see the module doc)."""
    return read_rules(rules_path(), validate=False, cached=True)


def validate_rules(signature_ids: Sequence[str] = ()) -> RuleSet:
    """The built-in rule list checked against its schema, and every id it ``supersedes`` known
    (a rule or one of ``signature_ids``): what ``signatures validate`` runs."""
    path = rules_path()
    rules = read_rules(path, validate=True)
    known = set(signature_ids) | {r.id for r in rules.rules}
    for r in rules.rules:
        for sid in r.supersedes:
            if sid not in known:
                raise SignatureError("%s: supersedes: unknown finding id %r" % (r.source, sid))
    clash = sorted(set(signature_ids) & {r.id for r in rules.rules if r.code})
    if clash:
        raise SignatureError("%s: id: signature id %r is also a code rule's" % (rules.by_id(clash[0]).source, clash[0]))
    return rules
