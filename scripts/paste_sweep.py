"""Paste-mangling invariance sweep (issue 32): the same answer whatever way a paste was wrapped.

Every open corpus text (``tests/data/realworld/manifest-*.yaml``; never the sealed rounds) is
analyzed as it is and then mangled the ways people's pastes arrive in issue threads (each line in
backticks, ``> `` quotes, line numbers, timestamps, launcher and log prefixes, CRLF, tabs as
spaces, a trailing ``\\``, HTML entities, non-breaking spaces, a Markdown code block's indent, a
terminal's hard wrap at 80/100/120 columns, and a few realistic combinations: a terminal's cut
inside a collector's tag and outside it; a chat's fence with a language tag, Jira's ``{code}``,
journalctl's and docker's prefixes, Jupyter's colour codes without their ESC bytes).  Each mangled
text is analyzed the way ``scripts/corpus_score.py`` does (acquire + pipeline.analyze) and compared
with the clean result:

* refused: the clean text is answered, the mangled one refused;
* wait changed: the answer's wait (the last triage finding's) is not among the other's waits;
* expect lost: the labelled ``expect`` is found in the clean text and not in the mangled one;
* confident added: a hang/crash finding with confidence >= 0.8 the clean text does not have (a
  mangling must never add a confident accusation).

    PYTHONPATH=analyzer:gdbext python scripts/paste_sweep.py [--workers 2] [--sample N] [--only a,b]
        [--json out.json]

The manglings are functions of the text only (``MANGLINGS``), importable by the unit tests.
"""

from __future__ import annotations

import argparse
import html
import json
import multiprocessing
import random
import re
import signal
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "realworld"
HANG_CLASS = ("hang", "deadlock")
CONFIDENT = 0.8
TIMEOUT_S = 60


def _per_line(prefix: Callable[[int], str]) -> Callable[[str], str]:
    def mangle(text: str) -> str:
        return "\n".join(prefix(i) + line for i, line in enumerate(text.split("\n")))
    return mangle


def _backticks(text: str) -> str:
    return "\n".join("`%s`" % line if line.strip() else line for line in text.split("\n"))


def _tabs(text: str) -> str:
    """A tab turned into spaces (an editor or a web form), to the next multiple of 4."""
    return "\n".join(line.expandtabs(4) for line in text.split("\n"))


def _lead_tabs(text: str) -> str:
    """Indentation as tabs (an editor or a chat that indents with them): each leading run of 4
    spaces one tab (a gdb argument's wrapped line, a traceback's source line)."""
    return "\n".join(re.sub(r"^(?: {4})+", lambda m: "\t" * (len(m.group()) // 4), x) for x in text.split("\n"))


def _double(text: str) -> str:
    """A blank line under every line (a web page's or a word processor's copy)."""
    return "\n\n".join(text.split("\n"))


def _prose(text: str) -> str:
    """The issue's own sentences around the paste: one above it, one below, each after a blank line."""
    return "It hangs at the end of training, stack below:\n\n" + text.rstrip("\n") + "\n\nAny idea? Thanks!\n"


def _continuation(text: str) -> str:
    return "\n".join(line + " \\" if line.strip() else line for line in text.split("\n"))


def _entities(text: str) -> str:
    return html.escape(text, quote=True).replace("&#x27;", "&#39;")


def _nbsp(text: str) -> str:
    """Runs of spaces as a rendered page copies them: every space of indentation a no-break space."""
    out = []
    for line in text.split("\n"):
        n = len(line) - len(line.lstrip(" "))
        out.append("\u00a0" * n + line[n:].replace("  ", "\u00a0 "))
    return "\n".join(out)


def _wrap(width: int) -> Callable[[str], str]:
    def mangle(text: str) -> str:
        out = []
        for line in text.split("\n"):
            line = line.expandtabs(8)
            while len(line) > width:
                out.append(line[:width])
                line = line[width:]
            out.append(line)
        return "\n".join(out)
    return mangle


def _chat_fence(text: str) -> str:
    """A chat's code block typed around a paste (Slack, Discord): the opening fence with a language
    tag on a line of its own, the closing one glued to the last line."""
    return "```python\n" + text.rstrip("\n") + "```\n"


def _jira(text: str) -> str:
    """Jira's wiki markup around a paste: ``{noformat}`` lines, or ``{code:python}`` ... ``{code}``."""
    return "{code:python}\n" + text.rstrip("\n") + "\n{code}\n"


def _bare_ansi(text: str) -> str:
    """Jupyter's (IPython's) colours copied out of a rendered page: the ESC bytes gone, each colour
    code left as ``[0;31m`` text around the line and its first word."""
    out = []
    for line in text.split("\n"):
        if line.strip():
            n = len(line) - len(line.lstrip())
            word, sep, rest = line[n:].partition(" ")
            line = "[0;31m" + line[:n] + "[0;32m" + word + "[0m" + sep + rest + "[0m"
        out.append(line)
    return "\n".join(out)


def _ts(i: int) -> str:
    return "2025-01-03 12:%02d:%02d,%03d " % (i // 3600 % 60, i // 60 % 60, i % 1000)


def _combo(*fs: Callable[[str], str]) -> Callable[[str], str]:
    def mangle(text: str) -> str:
        for f in fs:
            text = f(text)
        return text
    return mangle


#: name -> mangling (applied to the whole text, innermost first in a combination).
MANGLINGS: Dict[str, Callable[[str], str]] = {
    "backticks": _backticks,
    "quote": _per_line(lambda i: "> "),
    "quote2": _per_line(lambda i: "> > "),
    "lineno": _per_line(lambda i: "%d " % (i + 1)),
    "lineno_colon": _per_line(lambda i: "%d: " % (i + 1)),
    "lineno_bar": _per_line(lambda i: "%d| " % (i + 1)),
    "timestamp": _per_line(_ts),
    "time_brackets": _per_line(lambda i: "[12:%02d:%02d] " % (i // 60 % 60, i % 60)),
    "iso": _per_line(lambda i: "2025-01-03T12:00:%02d.123Z " % (i % 60)),
    "rank0": _per_line(lambda i: "[rank0]: "),
    "default0": _per_line(lambda i: "[default0]:"),
    "ray": _per_line(lambda i: "(RayWorker pid=123) "),
    "info_root": _per_line(lambda i: "INFO:root:"),
    "mpirun": _per_line(lambda i: "[1,0]<stderr>:"),
    "srun": _per_line(lambda i: "0: "),
    "compose": _per_line(lambda i: "worker-1  | "),
    "kubectl": _per_line(lambda i: "[pod/trainer-0/main] "),
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "tabs": _tabs,
    "lead_tabs": _lead_tabs,
    "double": _double,
    "prose": _prose,
    "prose+backticks": _combo(_backticks, _prose),
    "continuation": _continuation,
    "entities": _entities,
    "nbsp": _nbsp,
    "wrap80": _wrap(80),
    "wrap120": _wrap(120),
    "rank0+timestamp": _combo(_per_line(_ts), _per_line(lambda i: "[rank0]: ")),
    "srun+timestamp": _combo(_per_line(_ts), _per_line(lambda i: "0: ")),
    "quote+backticks": _combo(_backticks, _per_line(lambda i: "> ")),
    "entities+crlf": _combo(_entities, lambda t: t.replace("\n", "\r\n")),
    "wrap80+rank0": _combo(_wrap(80), _per_line(lambda i: "[rank0]: ")),
    "rank0+wrap80": _combo(_per_line(lambda i: "[rank0]: "), _wrap(80)),
    # a terminal at 100 columns; a Markdown code block (each line indented by 4); a launcher's or a
    # collector's lines in a narrow terminal; output a program cut at 120 (rich's console writing to a
    # pipe) that srun then tagged, each piece too
    "wrap100": _wrap(100),
    "indent4": _per_line(lambda i: "    "),
    "srun+wrap80": _combo(_per_line(lambda i: "0: "), _wrap(80)),
    "ray+wrap120": _combo(_per_line(lambda i: "(RayWorker pid=123) "), _wrap(120)),
    "timestamp+wrap120": _combo(_per_line(_ts), _wrap(120)),
    "wrap120+srun": _combo(_wrap(120), _per_line(lambda i: "0: ")),
    # what else people paste through: a chat's fenced block with a language tag (Slack, Discord),
    # Jira's markup, Windows' console (CRLF) at 100 columns, journalctl's record prefix, docker
    # logs --timestamps (nanoseconds), Jupyter's colour codes without their ESC bytes
    "chat_fence": _chat_fence,
    "jira": _jira,
    "wrap100+crlf": _combo(_wrap(100), lambda t: t.replace("\n", "\r\n")),
    "journal": _per_line(lambda i: "Nov 28 12:%02d:%02d host python3[4711]: " % (i // 60 % 60, i % 60)),
    "docker_ts": _per_line(lambda i: "2025-01-03T12:00:%02d.%09dZ " % (i % 60, 123456789 + i)),
    "jupyter_ansi": _bare_ansi,
}


def entries() -> List[dict]:
    """The open corpus: every ``manifest-*.yaml`` entry (sealed rounds are never named so)."""
    out = []
    for manifest in sorted(CORPUS.glob("manifest-*.yaml")):
        for e in yaml.safe_load(manifest.read_text()) or []:
            e = dict(e)
            e["path"] = str(manifest.parent / e["file"])
            out.append(e)
    return out


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001 - signal handler's signature
    raise _Timeout()


def analyze_text(text: str, suffix: str, input_format: Optional[str], db) -> dict:
    """What the sweep compares of one text's analysis (``corpus_score``'s way: acquire + analyze)."""
    from hanganalyze import pipeline
    from hanganalyze.acquire.engine import EngineRequest
    from hanganalyze.acquire.inputs import acquire
    from hanganalyze.acquire.many import Input, fill_identity

    with tempfile.NamedTemporaryFile("w", suffix=suffix, encoding="utf-8", newline="", delete=True) as fh:
        fh.write(text)
        fh.flush()
        try:
            snap = acquire(fh.name, None, EngineRequest(timeout=60.0), input_format=input_format)
            for p in snap.processes:
                fill_identity(p, Input(path=fh.name), len(snap.processes) == 1)
            snap = pipeline.analyze(snap, db)
        except _Timeout:
            raise
        except Exception as exc:  # noqa: BLE001 - a refusal is a result here
            return {"refused": "%s: %s" % (type(exc).__name__, str(exc)[:120])}
    waits = []
    for f in snap.findings:
        if f.signature == "triage" and f.triage is not None:
            t = f.triage
            waits.append(t.get("wait") if isinstance(t, dict) else t.wait)
    return {
        "refused": None,
        "wait": waits[-1] if waits else None,  # corpus_score's: the last triage finding's
        "waits": sorted({w or "" for w in waits}),  # every process's (``_wait_changed``)
        "sigs": sorted({f.signature for f in snap.findings}),
        "confident": sorted({f.signature for f in snap.findings
                             if f.signature != "triage" and (f.confidence or 0) >= CONFIDENT
                             and f.severity in HANG_CLASS + ("crash", "error")}),
    }


def compare(clean: dict, mangled: dict, expect: Optional[str]) -> Dict[str, object]:
    """The differences the issue forbids, one key each (falsy when none)."""
    if clean.get("refused"):
        return {"refused": False, "wait": False, "expect": False, "added": []}
    if mangled.get("refused"):
        return {"refused": True, "wait": clean.get("wait") is not None,
                "expect": bool(expect and expect in clean["sigs"]), "added": []}
    return {
        "refused": False,
        "wait": _wait_changed(clean, mangled),
        "expect": bool(expect and expect in clean["sigs"] and expect not in mangled["sigs"]),
        "added": sorted(set(mangled["confident"]) - set(clean["confident"])),
    }


def _wait_changed(clean: dict, mangled: dict) -> bool:
    """The answer's wait (the last triage finding's, ``corpus_score``'s) is not among the other's
    waits, either way: processes read in another order (a rank's tag sorts them) change nothing,
    a process's wait lost or a new one as the answer does."""
    a, b = clean.get("waits", [clean["wait"] or ""]), mangled.get("waits", [mangled["wait"] or ""])
    return (clean["wait"] or "") not in b or (mangled["wait"] or "") not in a


_DB = None


def _job(args: Tuple[dict, List[str]]) -> dict:
    global _DB
    e, names = args
    from hanganalyze import pipeline

    if _DB is None:
        _DB = pipeline.load_signature_db()
    signal.signal(signal.SIGALRM, _alarm)
    path = Path(e["path"])
    text = path.read_text(encoding="utf-8", errors="replace")
    suffix = path.suffix or ".txt"
    out = {"file": e["file"], "results": {}}
    try:
        signal.alarm(TIMEOUT_S)
        clean = analyze_text(text, suffix, e.get("input_format"), _DB)
    except _Timeout:
        out["clean"] = {"refused": "timeout"}
        return out
    finally:
        signal.alarm(0)
    out["clean"] = clean
    for name in names:
        try:
            signal.alarm(TIMEOUT_S)
            got = analyze_text(MANGLINGS[name](text), suffix, e.get("input_format"), _DB)
        except _Timeout:
            got = {"refused": "timeout"}
        finally:
            signal.alarm(0)
        out["results"][name] = {"diff": compare(clean, got, e.get("expect")), "got": got}
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sample", type=int, default=0, help="analyze this many texts (a fixed random sample)")
    ap.add_argument("--only", default="", help="comma-separated manglings (default: all)")
    ap.add_argument("--files", default="", help="comma-separated substrings of corpus file names")
    ap.add_argument("--json", default="", help="write every row here")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(MANGLINGS)
    todo = entries()
    if args.files:
        todo = [e for e in todo if any(s in e["file"] for s in args.files.split(","))]
    if args.sample and args.sample < len(todo):
        todo = random.Random(32).sample(todo, args.sample)
    jobs = [(e, names) for e in todo]
    if args.workers > 1:
        with multiprocessing.Pool(args.workers) as pool:
            rows = list(pool.imap_unordered(_job, jobs))
    else:
        rows = [_job(j) for j in jobs]
    answered = [r for r in rows if not r["clean"].get("refused")]
    print("%d texts, %d answered clean (%d refused clean)" % (len(rows), len(answered), len(rows) - len(answered)))
    print("%-18s %5s %8s %6s %7s %7s" % ("mangling", "N", "refused", "wait", "expect", "added"))
    total = [0, 0, 0, 0]
    for name in names:
        d = [r["results"][name]["diff"] for r in answered]
        row = [sum(1 for x in d if x["refused"]), sum(1 for x in d if x["wait"]),
               sum(1 for x in d if x["expect"]), sum(1 for x in d if x["added"])]
        total = [a + b for a, b in zip(total, row)]
        print("%-18s %5d %8d %6d %7d %7d" % (name, len(d), *row))
    print("%-18s %5s %8d %6d %7d %7d" % ("total", "", *total))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
