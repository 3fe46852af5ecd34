"""How the corpus's answers hold up when a paste is mangled the ways pages, chats and CI logs do it.

For every dump of tests/data/realworld/manifest-*.yaml whose wait (or expected known bug) is right as
pasted, each transform below is applied and the dump analyzed again; a transform "loses" a dump when
the wait or the known bug is no longer right.  Prints the losses per transform (and writes each dump's
with --json).  Unseen pastes come mangled in these ways; a loss here is a reader that leans on a
layout the paste may not keep.

    PYTHONPATH=analyzer:gdbext python scripts/paste_mangling.py [--jobs 2] [--transforms lstrip,ci] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import html
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "realworld"


def _lines(fn: Callable[[int, str], str]) -> Callable[[str], str]:
    return lambda text: "\n".join(fn(i, line) for i, line in enumerate(text.split("\n")))


#: name -> transform of the whole text
TRANSFORMS: Dict[str, Callable[[str], str]] = {
    "quote": _lines(lambda i, x: "> " + x),  # a mail's or a Markdown quote
    "html": lambda t: html.escape(t, quote=True),  # a scraped page's entities
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "indent4": _lines(lambda i, x: "    " + x if x else x),  # a Markdown code block
    "ci": _lines(lambda i, x: "2024-03-01T12:00:%02d.1234567Z %s" % (i % 60, x)),  # a CI runner's stamp
    "lineno": _lines(lambda i, x: "%4d  %s" % (i + 1, x)),  # a log viewer's line numbers
    "tabs": lambda t: t.replace("\t", "    "),
    "blank2": lambda t: "\n\n".join(t.split("\n")),  # a rich editor's paragraphs
    "fence": lambda t: "```\n" + t + "\n```",
    "prose": lambda t: "Here is the stack I got when it hung, any idea?\n\n" + t + "\n\nThanks in advance!",
    "rstrip": _lines(lambda i, x: x.rstrip()),
    "lstrip": _lines(lambda i, x: x.lstrip()),  # a rendered page's copy: no indentation
}


def _verdict(text: str, db) -> Tuple[Optional[List[str]], Optional[str]]:
    from hanganalyze import pipeline
    from hanganalyze.acquire.text import parse_text
    from hanganalyze.errors import InputError

    try:
        snap = pipeline.analyze(parse_text(text), db)
    except InputError:
        return None, None
    tri = [f for f in snap.findings if f.signature == "triage"]
    return [f.signature for f in snap.findings], (tri[0].triage.wait if tri else None)


_DB = None
_NAMES: List[str] = []


def _init(names: List[str]) -> None:
    global _DB, _NAMES
    from hanganalyze import pipeline

    _DB, _NAMES = pipeline.load_signature_db(), names


def _one(entry: dict) -> Tuple[str, Dict[str, List[str]]]:
    text = (CORPUS / entry["file"]).read_text(encoding="utf-8", errors="replace")
    sigs, wait = _verdict(text, _DB)
    want_wait = entry.get("wait") if sigs is not None and wait == entry.get("wait") else None
    want_sig = entry.get("expect") if sigs is not None and entry.get("expect") in (sigs or []) else None
    lost: Dict[str, List[str]] = {}
    if not (want_wait or want_sig):
        return entry["file"], lost
    for name in _NAMES:
        s2, w2 = _verdict(TRANSFORMS[name](text), _DB)
        why = []
        if want_wait and w2 != want_wait:
            why.append("wait %s -> %s" % (want_wait, w2))
        if want_sig and (s2 is None or want_sig not in s2):
            why.append("lost %s" % want_sig)
        if why:
            lost[name] = why
    return entry["file"], lost


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--transforms", default=",".join(TRANSFORMS))
    ap.add_argument("--json", help="write each dump's losses here")
    args = ap.parse_args(argv)
    names = [n for n in args.transforms.split(",") if n]
    unknown = [n for n in names if n not in TRANSFORMS]
    if unknown:
        print("paste_mangling: unknown transform %s (known: %s)" % (", ".join(unknown), ", ".join(TRANSFORMS)),
              file=sys.stderr)
        return 2
    entries = [e for m in sorted(CORPUS.glob("manifest-*.yaml")) for e in (yaml.safe_load(m.read_text()) or [])
               if not e.get("input_format") and not e.get("refusal")]
    results: Dict[str, Dict[str, List[str]]] = {}
    with ProcessPoolExecutor(max(1, args.jobs), initializer=_init, initargs=(names,)) as pool:
        for file, lost in pool.map(_one, entries, chunksize=8):
            results[file] = lost
    counts = collections.Counter(k for lost in results.values() for k in lost)
    print("%d dumps; answers lost per transform:" % len(results))
    for name in names:
        print("  %-8s %d" % (name, counts.get(name, 0)))
    if args.json:
        Path(args.json).write_text(json.dumps({f: v for f, v in results.items() if v}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
