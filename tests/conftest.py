from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import Hung, start_hung  # noqa: E402


@pytest.fixture
def hung():
    """Start hung fixtures with hung(argv, ready=...); every one is killed at teardown."""
    started = []

    def _start(argv, **kw) -> Hung:
        h = start_hung(argv, **kw)
        started.append(h)
        return h

    yield _start
    for h in started:
        h.kill()


@pytest.fixture(scope="session")
def db():
    """The signature database as the command loads it, once for the run (a test file that needs
    another one defines its own ``db``)."""
    from hanganalyze import pipeline

    return pipeline.load_signature_db()


def pytest_terminal_summary(terminalreporter):
    """The real-world corpus score (tests/integration/test_realworld_corpus.py), when it ran."""
    mod = sys.modules.get("test_realworld_corpus") or sys.modules.get("tests.integration.test_realworld_corpus")
    score = getattr(mod, "SCORE", None)
    if not score:
        return
    from collections import Counter, defaultdict

    groups = defaultdict(Counter)
    for value in score.values():
        kind, _, verdict = value.partition(": ")
        groups[kind][verdict] += 1
    parts = ["%s: %s" % (kind, ", ".join("%s %d" % kv for kv in sorted(c.items())))
             for kind, c in sorted(groups.items())]
    terminalreporter.write_line("real-world corpus: %d dumps; %s" % (len(score), "; ".join(parts)))
    waits = getattr(mod, "WAITS", None) or {}
    if waits:
        right = sum(1 for want, got in waits.values() if want == got)
        wrong = ", ".join("%s (%s, said %s)" % (f, w, g) for f, (w, g) in sorted(waits.items()) if w != g)
        terminalreporter.write_line("real-world corpus: triage wait right on %d of %d dumps with an established "
                                    "wait; wrong: %s" % (right, len(waits), wrong))
