"""A code rule is declared where it is written: ``@rule(ids..., stage=, reads=)`` above its function.

Every rule needed a ``CodeRule(...)`` line in ``registry.py``, kept apart from its function (in
``crossrank.py``, ``gpurules.py``, ...) and from its texts (``signatures/rules/rules.yaml``): adding a
job rule touched three files.  As pwndbg registers each gdb command with a decorator on the function
that runs it, ``@rule`` records the function as a ``CodeRule`` when its module is imported:

    @rule("rank-slow", stage="job", reads="rank states and each rank's progress over the samples")
    def rank_slow(ctx: JobContext) -> List[Finding]: ...

One function may conclude several ids (``@rule("asyncio-await-cycle", "asyncio-orphan-wait", ...)``).
The decorator returns the function unchanged.  ``registry.py`` imports the rule modules by name and
orders what they declared by ``rules.yaml``, which stays the one source of run order, and refuses a
declared id that file lacks and an id of that file no function declares.

This module is the bottom of the rule modules (they import it; it imports only the model), so it
makes no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Tuple, TypeVar

from hanganalyze_gdbext.model import Finding

#: When a rule runs: on each process, across the processes of a job, on the whole sorted report.
STAGES = ("process", "job", "report")

Decide = Callable[..., List[Finding]]
F = TypeVar("F", bound=Decide)


class RuleDeclarationError(RuntimeError):
    """A rule declared wrongly (an unknown stage, an id declared twice, an id ``rules.yaml`` lacks,
    an id of ``rules.yaml`` without code): a bug of the tool, raised when the registry is imported."""


@dataclass(frozen=True)
class CodeRule:
    """One rule: the ids it concludes, what it reads, when it runs, and the code that decides
    (``process``: ``decide(snapshot, db)``; ``job``: ``decide(JobContext)``; ``report``:
    ``decide(snapshot)``)."""

    concludes: Tuple[str, ...]
    stage: str
    reads: str
    decide: Decide

    @property
    def name(self) -> str:
        return ", ".join(self.concludes)


#: Every rule declared so far, in import order (``registry.py`` puts them in ``rules.yaml``'s order).
DECLARED: List[CodeRule] = []


def rule(*concludes: str, stage: str, reads: str) -> Callable[[F], F]:
    """Declare the decorated function as the code rule that concludes the finding ids ``concludes``
    (their texts in ``rules.yaml``), run at ``stage``, reading what ``reads`` says."""
    if not concludes:
        raise RuleDeclarationError("@rule needs at least one finding id")
    if stage not in STAGES:
        raise RuleDeclarationError("@rule%r: stage %r is not one of %s" % (concludes, stage, ", ".join(STAGES)))
    if len(set(concludes)) != len(concludes):
        raise RuleDeclarationError("@rule%r: a finding id named twice" % (concludes,))

    def declare(decide: F) -> F:
        seen = {i for r in DECLARED for i in r.concludes}
        twice = next((i for i in concludes if i in seen), None)
        if twice is not None:
            raise RuleDeclarationError("@rule: finding id %r declared twice (the second time on %s.%s)"
                                       % (twice, decide.__module__, decide.__qualname__))
        DECLARED.append(CodeRule(tuple(concludes), stage, reads, decide))
        return decide

    return declare
