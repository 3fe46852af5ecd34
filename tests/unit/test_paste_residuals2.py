"""The paste sweep's residuals after rounds 13-16 (``scripts/paste_sweep.py``), each fixed by a rule
for the mangling: a real corpus text under the mangling that changed its answer, and a near miss the
rule must leave alone (a line that only looks like the mangling's)."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import REPO, real_text

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.unwrap import unwrap_layers

_spec = importlib.util.spec_from_file_location("paste_sweep", REPO / "scripts" / "paste_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def db():
    return pipeline.load_signature_db()


def _frames(text: str):
    return [[(f.function, f.file, f.line) for f in t.frames] for p in parse_text(text).processes for t in p.threads]


# ---- a stack printer's " : " margin under another wrapper (kafka-python-2077) -----------------------

KAFKA = "kafka-python/kafka-python-2077-1.txt"


@pytest.mark.parametrize("name", ["quote", "backticks", "timestamp", "srun", "compose", "lineno_bar",
                                  "rank0+timestamp", "wrap80", "ray+wrap120"])
def test_a_margin_under_another_wrapper_is_taken_off_too(db, name):
    """The margin every line carries is one of the unwrap layers, not only a cleaning step on the
    lines as they came: under a quote, a timestamp, a collector's tag or backticks the dump is read
    (refused before), the same frames, the heartbeat thread's wait on the client lock."""
    text = real_text(KAFKA)
    mangled = sweep.MANGLINGS[name](text)
    assert _frames(mangled) == _frames(text)
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == "lock"


def test_a_colon_some_lines_start_with_under_a_timestamp_stays():
    """Near miss: under a log's timestamps a few messages start with ``: `` (a YAML dump, a shell's
    no-op): no column every line carries, so no layer takes their colon off."""
    lines = ["2025-01-03 12:00:0%d,000 %s" % (i, x) for i, x in
             enumerate([": retry 1", "connecting to broker", ": retry 2", "giving up", "closed"])]
    layers = unwrap_layers(lines)
    assert layers and all(": retry 1" in [x.strip() for x in bare] for bare, _ in layers)
