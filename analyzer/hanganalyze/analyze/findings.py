"""The one place a finding is made (``Finding(`` is called here and nowhere else in the analyzer).

Findings were built at seven sites in five modules, each copying a rule's title, severity, cause,
fixes and links by hand, with the triage's texts as constants of its own: a new finding field
meant editing every site.  Now a rule decides only what it found (the process, the summary, the
evidence, its confidence, the ranks at fault); the texts come from data:

* ``from_rule``: a code rule's entry of ``signatures/rules/rules.yaml`` (``analyze/rules.py``);
  a rule whose title, fixes or cause depend on what it found picks them from its entry's named
  ``texts`` and passes them in;
* ``from_signature``: a signature of the YAML database (``signatures/*.yaml``, ``sigmodel.py``).

``tests/unit/test_findings_one_place.py`` keeps it that way.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from hanganalyze.analyze.rules import Rule
from hanganalyze.analyze.sigmodel import Signature
from hanganalyze_gdbext.model import Evidence, Finding


def from_rule(rule: Rule, process: int, summary: str, evidence: Sequence[Evidence], confidence: float, *,
              threads: Sequence[int] = (), ranks: Optional[Sequence[int]] = None,
              processes: Optional[Sequence[int]] = None, title: Optional[str] = None,
              fix: Optional[Sequence[str]] = None, cause: Optional[str] = None,
              triage: Optional[Dict[str, Any]] = None) -> Finding:
    """A finding of code rule ``rule``: id, severity and (unless given) title, fixes, cause and
    links from its data.  ``title``/``fix``/``cause``: texts the rule chose from ``rule.texts``."""
    return Finding(
        signature=rule.id, title=rule.title if title is None else title, severity=rule.severity, process=process,
        threads=list(threads), summary=summary, fix=list(rule.fix if fix is None else fix),
        references=list(rule.references), evidence=list(evidence), confidence=confidence,
        cause=rule.cause if cause is None else cause, ranks=list(ranks or []), processes=list(processes or []),
        triage=triage,
    )


def from_signature(sig: Signature, process: int, threads: List[int], summary: str, evidence: List[Evidence],
                   confidence: float) -> Finding:
    """A match of signature ``sig`` on process ``process``: its texts from the signature database."""
    return Finding(
        signature=sig.id, title=sig.title, severity=sig.severity, process=process, threads=threads,
        summary=summary, fix=sig.fix_lines(), references=list(sig.references), evidence=evidence,
        confidence=confidence, cause=sig.cause,
    )
