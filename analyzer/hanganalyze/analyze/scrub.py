"""Default scrubbing: secret-shaped values removed from a report before anything is written (issue 36).

Reports are made to be attached to public bug trackers, and a hung process's command line, log
lines, thread names and pasted text carry its secrets (``--api-key=sk-...``, ``HF_TOKEN=hf_...``,
``https://user:pass@host``).  Crash reporters people trust scrub by default (Sentry's data
scrubbing), so this runs on every report: ``pipeline.analyze`` calls ``scrub`` once on the analyzed
model - after signature matching and the bucket id, which therefore see the same text with and
without it - so every format (HTML, Markdown, JSON, text, node summaries) shows the same
``<redacted:KIND>`` placeholders, and no renderer has its own pass.

What counts as a secret is data, ``signatures/redact/secrets.yaml``: token shapes by kind, the
words of option / setting names that hold secrets (and the name endings and values that do not:
``--key-file /path``, ``--max-tokens 512``), and credentials in URLs.  Two passes, like
``--redact`` (``redact.py``, which keeps its stronger meaning and runs after this): *discover* the
secret values in every string (and the item after a secret flag in argv lists), then *replace*
each wherever it occurs, so a token that also shows up in a thread name goes there too.  When
nothing is found the model is left untouched (the report is byte-identical to an unscrubbed one).
``--no-redact`` skips the replacement and says so in the report.
"""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from hanganalyze.analyze.regex_guard import risky_regex
from hanganalyze.analyze.signatures import builtin_dir, display_path, read_data_file
from hanganalyze.errors import SignatureError
from hanganalyze_gdbext.model import Snapshot
from hanganalyze_gdbext.model.record import Record

DATA_FILE = ("redact", "secrets.yaml")
#: Fields whose values come from us (signature DB, enums, tool), never from the user's machine.
UNTOUCHED = frozenset({"bucket", "tool", "references", "signature", "severity", "kind", "scrubbed", "stack_table"})
#: A value shorter than this is never replaced everywhere (``pwd=abc`` would eat every ``abc``).
MIN_VALUE = 4
_NAME = r"[A-Za-z_][\w.-]*"
#: ``--name=V`` / ``--name V`` (groups 1, 2) or ``NAME=V`` (group 3), the value in group 4: a
#: dash-less name takes only ``=`` ("the token is" is prose).  The look-behind starts a match only
#: at a run's start, so the backtracking of the name is linear.
_ASSIGN = re.compile(r"(?<![\w.-])(?:--?(%s)(=|\s+)|(%s)=)([^\s\"',;)\]}]+)" % (_NAME, _NAME))
#: ``"token": "V"`` / ``'password' = 'V'`` (a quoted key).
_QUOTED = re.compile(r"([\"'])(%s)\1\s*[:=]\s*[\"']?([^\s\"',;)\]}]+)" % _NAME)
_FLAG = re.compile(r"--?(%s)" % _NAME)
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


class Rules:
    """The compiled data file."""

    def __init__(self, data: Any, disp: str) -> None:
        def need(key: str, typ: type) -> Any:
            v = data.get(key) if isinstance(data, dict) else None
            if not isinstance(v, typ) or not v:
                raise SignatureError("%s: %s: missing or not a %s" % (disp, key, typ.__name__))
            return v

        tokens, names = need("tokens", dict), need("names", dict)
        self.kinds: List[str] = []
        alts = []
        for kind, rx in tokens.items():
            self.kinds.append(str(kind))
            alts.append("(%s)" % _checked(disp, "tokens: %s" % kind, rx))
        self.tokens = re.compile(r"(?<![A-Za-z0-9])(?:%s)(?![A-Za-z0-9])" % "|".join(alts))
        self.words = [(str(k), re.compile(_checked(disp, "names: %s" % k, rx), re.I)) for k, rx in names.items()]
        self.key_qualifiers = re.compile(_checked(disp, "key_qualifiers", need("key_qualifiers", str)), re.I)
        self.keep_before = re.compile(_checked(disp, "keep_before", need("keep_before", str)), re.I)
        self.keep_names = re.compile(_checked(disp, "keep_names", need("keep_names", str)), re.I)
        self.keep_values = re.compile(_checked(disp, "keep_values", need("keep_values", str)), re.I | re.S)
        self.url = re.compile(_checked(disp, "url_password", need("url_password", str), groups=1), re.I)
        #: Cheap pre-check for the name and URL rules: a secret word anywhere, or "://".  Most
        #: strings (function names, library paths) hold neither, and skip three scans.
        self.hint = re.compile("|".join(["://"] + [rx.pattern for _k, rx in self.words]), re.I)

    def name_kind(self, name: str) -> Optional[str]:
        """The kind of secret an option or setting called ``name`` holds, or None: its last word
        naming a secret (``--hf-token``: token), unless its last word names a path, size or switch,
        the word before it a count or a special token (``--max-tokens``, ``--pad-token``), or it is a
        plain ``key`` that no other word qualifies (``--sort-key``; ``--api-key`` is one)."""
        words = [w.lower() for w in _WORDS.findall(name)]
        if not words or self.keep_names.fullmatch(words[-1]):
            return None
        for i in range(len(words) - 1, -1, -1):
            w = words[i]
            kind = next((k for k, rx in self.words if rx.fullmatch(w)), None)
            if kind is None:
                continue
            if i > 0 and self.keep_before.fullmatch(words[i - 1]):
                return None
            if w == "key" and not any(self.key_qualifiers.fullmatch(q) for q in words if q != w):
                return None
            return kind
        return None

    def secret_value(self, value: str) -> bool:
        return len(value) >= MIN_VALUE and not value.startswith("-") and not self.keep_values.fullmatch(value)


def _checked(disp: str, where: str, rx: Any, groups: int = 0) -> str:
    """A data regex that compiles, has ``groups`` capturing groups and a safe shape."""
    if not isinstance(rx, str) or not rx:
        raise SignatureError("%s: %s: not a regex string" % (disp, where))
    try:
        n = re.compile(rx).groups
    except re.error as e:
        raise SignatureError("%s: %s: invalid regex: %s" % (disp, where, e)) from None
    if n != groups:
        raise SignatureError("%s: %s: %d capturing group(s), expected %d (use (?:...))" % (disp, where, n, groups))
    risky = risky_regex(rx)
    if risky:
        raise SignatureError("%s: %s: unsafe regex: %s" % (disp, where, risky))
    return rx


@lru_cache(maxsize=None)
def rules() -> Rules:
    """The built-in rules, read once per process (from the parsed-data cache after the first run)."""
    path = builtin_dir().joinpath(*DATA_FILE)
    data, _ = read_data_file(path)
    return Rules(data, display_path(path))


class Scrubber:
    """The secret values of one report: value -> kind."""

    def __init__(self, r: Optional[Rules] = None) -> None:
        self.rules = r or rules()
        self.found: Dict[str, str] = {}
        self._seen: Set[str] = set()
        self._literal: Optional[re.Pattern] = None

    def _add(self, value: str, kind: str, shaped: bool = False) -> None:
        """``shaped``: matched by a token shape, a secret whatever it looks like; else a value by its
        name (or a URL password), which must not look like a number, a path, a flag..."""
        value = value.strip()
        ok = len(value) >= MIN_VALUE if shaped else self.rules.secret_value(value)
        if ok and value not in self.found:
            self.found[value] = kind
            self._literal = None

    def discover(self, s: str) -> str:
        if s in self._seen:  # frames repeat the same names and paths many times
            return s
        self._seen.add(s)
        r = self.rules
        for m in r.tokens.finditer(s):  # shapes first: their kind is the more telling one
            self._add(m.group(0), r.kinds[(m.lastindex or 1) - 1], shaped=True)
        if not r.hint.search(s):
            return s
        for m in r.url.finditer(s):
            self._add(m.group(1), "url-password")
        for m in _ASSIGN.finditer(s):
            kind = r.name_kind(m.group(1) or m.group(3))
            if kind:
                self._add(m.group(4), kind)
        for m in _QUOTED.finditer(s):
            kind = r.name_kind(m.group(2))
            if kind:
                self._add(m.group(3), kind)
        return s

    def discover_list(self, items: List[Any]) -> None:
        """argv-like lists: ``["--hf-token", "hf_..."]`` makes the second item a secret."""
        for a, b in zip(items, items[1:]):
            if isinstance(a, str) and isinstance(b, str):
                self.discover(b)  # a token shape names its kind better than the flag does
                m = _FLAG.fullmatch(a)
                kind = self.rules.name_kind(m.group(1)) if m else None
                if kind:
                    self._add(b, kind)

    def replace(self, s: str) -> str:
        if self._literal is None:
            values = sorted(self.found, key=len, reverse=True)
            self._literal = re.compile(r"(?<![A-Za-z0-9])(?:%s)(?![A-Za-z0-9])" % "|".join(map(re.escape, values)))
        return self._literal.sub(lambda m: "<redacted:%s>" % self.found[m.group(0)], s)

    def counts(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for kind in self.found.values():
            out[kind] = out.get(kind, 0) + 1
        return dict(sorted(out.items()))


@lru_cache(maxsize=None)
def _fields(cls: type) -> Tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in UNTOUCHED)


def _walk(obj: Any, fn: Callable[[str], str], on_list: Optional[Callable[[List[Any]], None]],
          seen: Set[int]) -> Any:
    """``fn`` applied to every string under ``obj``: records and lists changed in place (they are
    shared: interned stacks, the node summary's rows), tuples and strings returned anew."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, (list, dict, Record)):
        if id(obj) in seen:
            return obj
        seen.add(id(obj))
    if isinstance(obj, Record):
        for name in _fields(type(obj)):
            v = getattr(obj, name)
            if v is None or v is True or v is False or type(v) in (int, float):
                continue
            nv = _walk(v, fn, on_list, seen)
            if nv is not v:
                setattr(obj, name, nv)
    elif isinstance(obj, list):
        if on_list is not None:
            on_list(obj)
        for i, v in enumerate(obj):
            nv = _walk(v, fn, on_list, seen)
            if nv is not v:
                obj[i] = nv
    elif isinstance(obj, dict):
        for k, v in list(obj.items()):
            if k not in UNTOUCHED:
                nv = _walk(v, fn, on_list, seen)
                if nv is not v:
                    obj[k] = nv
    elif isinstance(obj, tuple):
        items = tuple(_walk(v, fn, on_list, seen) for v in obj)
        if any(a is not b for a, b in zip(items, obj)):
            return type(obj)(*items) if hasattr(obj, "_fields") else items
    return obj


def scrub(snapshot: Snapshot, keep: bool = False) -> Tuple[int, Dict[str, int]]:
    """Replace the secret values of an analyzed snapshot in place (node summary included), and say
    so in it: ``scrubbed`` (JSON) and a warning line (text, Markdown, HTML), only when something was
    found, so a report without secrets is unchanged.  ``keep`` (``--no-redact``): only count them,
    and say that they were kept.  Returns (values, per-kind counts)."""
    s = Scrubber()
    _walk(snapshot, s.discover, s.discover_list, set())
    counts = s.counts()
    n = len(s.found)
    if keep:
        snapshot.scrubbed = {"kept": n, "kinds": counts} if n else {"kept": 0}
        line = ("not scrubbed (--no-redact): %d secret-shaped value(s) kept in this report" % n)
    elif n:
        _walk(snapshot, s.replace, None, set())
        snapshot.scrubbed = {"values": n, "kinds": counts}
        line = ("scrubbed %d secret-shaped value(s) (%s), shown as <redacted:KIND>; --no-redact keeps them"
                % (n, ", ".join("%d %s" % (c, k) for k, c in counts.items())))
    else:
        return 0, counts
    snapshot.warnings.append(line)
    if snapshot.node_summary is not None:
        snapshot.node_summary.warnings.append(line)
    return n, counts



def scrub_lines(lines: List[str]) -> List[str]:
    """The same scrubbing for raw text written beside a report (``watch``'s log tail): a job's own
    output often echoes its command line and environment."""
    s = Scrubber()
    for line in lines:
        s.discover(line)
    return [s.replace(line) for line in lines] if s.found else list(lines)
