"""Score one manifest of real dumps (tests/data/realworld/*.yaml) with the tree this script runs on.

For a sealed blind round: the manifest is not named ``manifest-*.yaml`` (so the suite never reads it)
and is scored once, at the end of a session, with the code as it was before the work and as it is
after (``PYTHONPATH`` picks the tree).  The verdicts are those of ``tests/integration/
test_realworld_corpus.py``: known bug right / wrong / no finding / refused for each labelled
``expect``, the triage's wait against ``wait``, and confident (>= 0.8) findings of another cause.

    PYTHONPATH=analyzer:gdbext python scripts/corpus_score.py tests/data/realworld/sealed-blind8.yaml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HANG_CLASS = ("hang", "deadlock")


def _analyze(path: Path, db):
    from hanganalyze import pipeline
    from hanganalyze.acquire.engine import EngineRequest
    from hanganalyze.acquire.inputs import acquire
    from hanganalyze.acquire.many import Input, fill_identity

    snap = acquire(str(path), None, EngineRequest(timeout=60.0), input_format=None)
    for p in snap.processes:
        fill_identity(p, Input(path=str(path)), len(snap.processes) == 1)
    return pipeline.analyze(snap, db)


def _wait(snap):
    for f in snap.findings:
        if f.signature == "triage" and f.triage is not None:
            t = f.triage
            return t.get("wait") if isinstance(t, dict) else t.wait
    return None


def main(manifest: str) -> int:
    from hanganalyze import pipeline

    base = Path(manifest).parent
    entries = yaml.safe_load(Path(manifest).read_text()) or []
    db = pipeline.load_signature_db()
    rows = []
    for e in entries:
        row = {"file": e["file"], "expect": e.get("expect"), "wait": e.get("wait"), "hang": e.get("hang")}
        try:
            snap = _analyze(base / e["file"], db)
        except Exception as exc:  # noqa: BLE001 - a refusal or a failure is a result here
            row.update(result="refused", error="%s: %s" % (type(exc).__name__, str(exc)[:160]))
            rows.append(row)
            continue
        sigs = [f.signature for f in snap.findings]
        hangs = [f.signature for f in snap.findings if f.severity in HANG_CLASS and f.signature != "triage"]
        if e.get("expect"):
            row["result"] = "right" if e["expect"] in sigs else ("wrong" if hangs else "no finding")
        elif e.get("hang") is False:
            row["result"] = "right (no hang)" if not hangs else "wrong (hang said)"
        else:
            row["result"] = "no expectation"
        row["got_wait"] = _wait(snap)
        mine = ("triage", e.get("expect")) + tuple(e.get("also") or ())
        row["confident_other"] = sorted({f.signature for f in snap.findings
                                         if (f.confidence or 0) >= 0.8 and f.signature not in mine
                                         and f.severity in HANG_CLASS + ("crash", "error")})
        row["findings"] = sigs[:6]
        rows.append(row)
    labelled = [r for r in rows if r["expect"]]
    waits = [r for r in rows if r["wait"]]
    summary = {
        "dumps": len(rows),
        "known_bug_right": sum(r["result"] == "right" for r in labelled), "known_bug_labelled": len(labelled),
        "wait_right": sum(r.get("got_wait") == r["wait"] for r in waits), "wait_labelled": len(waits),
        "refused": sum(r["result"] == "refused" for r in rows),
        "no_hang_right": sum(r["result"] == "right (no hang)" for r in rows),
        "no_hang_labelled": sum(r["hang"] is False and not r["expect"] for r in rows),
        "confident_other": [(r["file"], r["confident_other"]) for r in rows if r.get("confident_other")],
    }
    json.dump({"summary": summary, "rows": rows}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
