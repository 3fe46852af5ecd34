"""The compiled signature objects (``Signature`` and its parts, ``SignatureDB``) and version specs:
what ``signatures.py`` validates and compiles a file into, what the cache pickles and what
``match.py`` runs, with no parsing left."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hanganalyze import rxcache
from hanganalyze.names import glibc_alias, normalize_function


class LazyPattern:
    """A compiled pattern as the signature cache gives it back: compiled on its first use.  A
    signature whose first step fails never compiles the rest (unpickling a ``re.Pattern`` compiles
    it: all of a file's patterns were a tenth of a warm one-sample run, issue 21).  Equal to the
    pattern it stands for."""

    __slots__ = ("pattern", "flags", "_rx")

    def __init__(self, pattern: Any, flags: int) -> None:
        self.pattern = pattern
        self.flags = flags
        self._rx: Optional[re.Pattern] = None

    def compiled(self) -> re.Pattern:
        rx = self._rx
        if rx is None:
            rx = self._rx = rxcache.compile(self.pattern, self.flags)
        return rx

    def search(self, *args: Any) -> Any:
        return self.compiled().search(*args)

    def match(self, *args: Any) -> Any:
        return self.compiled().match(*args)

    def fullmatch(self, *args: Any) -> Any:
        return self.compiled().fullmatch(*args)

    def __getattr__(self, name: str) -> Any:  # the rest of re.Pattern (finditer, sub, groups...)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (LazyPattern, re.Pattern)):
            return (self.pattern, self.flags) == (other.pattern, other.flags)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return repr(self.compiled())

    def __reduce__(self) -> Tuple[Any, Tuple[Any, int]]:
        return LazyPattern, (self.pattern, self.flags)


# --------------------------------------------------------------------------------------------
# Version specs (">=2.26,<3") on dotted numeric versions.
# --------------------------------------------------------------------------------------------

_SPEC_PART = rxcache.compile(r"^\s*(==|!=|>=|<=|>|<)\s*([0-9]+(?:\.[0-9]+)*)\s*$")


def parse_version(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    """(2, 26, 5) from "2.26.5" or "3.11.7+"; None when there is no leading number."""
    if not text:
        return None
    m = re.match(r"\s*(\d+(?:\.\d+)*)", str(text))
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


@dataclass(frozen=True)
class VersionSpec:
    text: str
    parts: Tuple[Tuple[str, Tuple[int, ...]], ...]

    @classmethod
    def parse(cls, text: str) -> VersionSpec:
        parts = []
        for chunk in text.split(","):
            m = _SPEC_PART.match(chunk)
            if not m:
                raise ValueError("bad version spec %r" % text)
            parts.append((m.group(1), tuple(int(x) for x in m.group(2).split("."))))
        return cls(text, tuple(parts))

    def contains(self, version: Tuple[int, ...]) -> bool:
        for op, want in self.parts:
            n = max(len(want), len(version))
            a = version + (0,) * (n - len(version))
            b = want + (0,) * (n - len(want))
            ok = {
                "==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b,
            }[op]
            if not ok:
                return False
        return True


# --------------------------------------------------------------------------------------------
# Compiled signature objects
# --------------------------------------------------------------------------------------------


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_list(x: Any) -> List[Any]:
    return x if isinstance(x, list) else [x]


def glob_re(pattern: Any) -> re.Pattern:
    """A glob (or a list of globs) as one regex anchored at both ends (usable with ``search``)."""
    items = pattern if isinstance(pattern, list) else [pattern]
    return rxcache.compile("|".join("^" + fnmatch.translate(p) for p in items))


@dataclass
class FunctionMatcher:
    """One function pattern: exact names (a set), globs and regexes, all on normalized names."""

    exact: frozenset
    regexes: Tuple[re.Pattern, ...]
    unknown: bool  # "??": matches frames without a symbol
    nccl_public: bool
    text: str

    @classmethod
    def compile(cls, spec: Any, nccl_public: bool) -> FunctionMatcher:
        items = spec if isinstance(spec, list) else [spec]
        exact, regexes, unknown = set(), [], False
        for item in items:
            if item == "??":
                unknown = True
            elif item.startswith("re:"):
                regexes.append(rxcache.compile(item[3:]))
            elif any(c in item for c in "*?["):
                regexes.append(glob_re(item))
            else:
                exact.add(normalize_function(item))
        return cls(frozenset(exact), tuple(regexes), unknown, nccl_public, " | ".join(items))

    def matches(self, norm: str) -> bool:
        if norm == "??":
            return self.unknown
        if norm in self.exact:
            return True
        alias = glibc_alias(norm)
        if alias is not norm and alias != norm and self.matches(alias):
            return True  # __GI___dl_iterate_phdr is dl_iterate_phdr (names.glibc_alias)
        if self.nccl_public and norm.startswith("pnccl") and norm[1:] in self.exact:
            return True
        for r in self.regexes:  # globs are compiled anchored at both ends, regexes search
            if r.search(norm):
                return True
            if self.nccl_public and norm.startswith("pnccl") and r.search(norm[1:]):
                return True
        return False


@dataclass
class FramePattern:
    """What one frame must look like: function, library (basename glob), file glob, kind."""

    function: Optional[FunctionMatcher] = None
    library: Optional[re.Pattern] = None
    file: Optional[re.Pattern] = None
    file_has_slash: bool = False
    kind: Optional[str] = None
    text: str = ""
    #: searched in the source line the frame stands on (the paste's): a Python-only stack's wait
    source: Optional[re.Pattern] = None

    @classmethod
    def compile(cls, d: Dict[str, Any]) -> FramePattern:
        fn = FunctionMatcher.compile(d["function"], bool(d.get("nccl_public"))) if "function" in d else None
        parts = []
        if fn:
            parts.append(fn.text)
        if d.get("library"):
            lib = d["library"]
            parts.append("in " + ("|".join(lib) if isinstance(lib, list) else lib))
        if d.get("file"):
            f = d["file"]
            parts.append("at " + ("|".join(f) if isinstance(f, list) else f))
        if d.get("source"):
            parts.append("on `%s`" % "|".join(_as_list(d["source"])))
        return cls(
            function=fn,
            library=glob_re(d["library"]) if d.get("library") else None,
            file=glob_re(d["file"]) if d.get("file") else None,
            file_has_slash=all("/" in f for f in _as_list(d.get("file", ""))),
            kind=d.get("kind"),
            text=d.get("name") or _shorten(" ".join(parts)) or "any frame",
            source=rxcache.compile("|".join("(?:%s)" % r for r in _as_list(d["source"]))) if d.get("source") else None,
        )

    def anchors(self) -> Optional[frozenset]:
        """Exact names of which one must be present for this pattern to match (None: no anchor)."""
        f = self.function
        if f is None or f.regexes or f.unknown or not f.exact:
            return None
        if f.nccl_public:
            return f.exact | frozenset("p" + n for n in f.exact)
        return f.exact


@dataclass
class Step(FramePattern):
    gap: Optional[int] = None
    within: Optional[int] = None
    optional: bool = False
    stripped: Optional[FramePattern] = None
    #: the frame stands this many times in a row, the same function and file (a recursion)
    repeat: Optional[int] = None

    @classmethod
    def compile_step(cls, d: Dict[str, Any]) -> Step:
        base = FramePattern.compile(d)
        return cls(
            function=base.function, library=base.library, file=base.file, file_has_slash=base.file_has_slash,
            kind=base.kind, text=base.text, source=base.source,
            gap=d.get("gap"), within=d.get("within"), optional=bool(d.get("optional")),
            stripped=FramePattern.compile(d["stripped"]) if d.get("stripped") else None, repeat=d.get("repeat"),
        )


@dataclass
class ThreadRule:
    rule: str
    stack: List[Step]
    not_: List[FramePattern]
    thread_name: Optional[re.Pattern]
    min: int
    max: Optional[int]
    optional: bool
    gil: Optional[str] = None
    #: What the rule looks at: "threads" (their stacks) and/or "tasks" (each pending asyncio
    #: task's coroutine stack, as a pseudo-thread).
    scope: Tuple[str, ...] = ("threads",)

    def anchors(self) -> Optional[frozenset]:
        """Names of which at least one must be in a thread for this rule to match (index key)."""
        for s in self.stack:
            if not s.optional and s.stripped is None:
                a = s.anchors()
                if a:
                    return a
        return None


@dataclass
class MessageRule:
    rule: str
    regex: re.Pattern
    #: named groups two matching lines must share while the regex's other named groups differ (the
    #: same collective sequence number called with different arguments): a pair, not one line
    conflict: Tuple[str, ...] = ()
    #: a line this regex finds anywhere in the log voids the rule (a wait the log shows ending)
    absent: Optional[re.Pattern] = None


def conflicting_lines(rule: MessageRule, lines: Sequence[str]) -> Optional[List[int]]:
    """Two lines (their indexes) that ``rule.regex`` matches with the same ``rule.conflict`` groups
    and different other named groups; None when no such pair is in ``lines``."""
    seen: Dict[tuple, Tuple[int, tuple]] = {}
    for i, line in enumerate(lines):
        m = rule.regex.search(line)
        if m is None:
            continue
        groups = m.groupdict()
        key = tuple(groups.get(g) for g in rule.conflict)
        rest = tuple(sorted((k, v) for k, v in groups.items() if k not in rule.conflict))
        first = seen.setdefault(key, (i, rest))
        if first[1] != rest:
            return [first[0], i]
    return None


@dataclass
class Clause:
    name: str
    confidence: float
    threads: List[ThreadRule]
    messages: List[MessageRule]
    thread_count: Optional[Dict[str, int]]


@dataclass
class LibraryCondition:
    name: re.Pattern
    name_text: str
    version: Optional[VersionSpec]


@dataclass
class Conditions:
    libraries: List[LibraryCondition] = field(default_factory=list)
    python: Optional[VersionSpec] = None
    signal: Optional[Tuple[str, ...]] = None


@dataclass
class Signature:
    id: str
    title: str
    severity: str
    cause: str
    fix: List[Dict[str, str]]
    references: List[str]
    clauses: List[Clause]
    conditions: Conditions
    source: str  # "file:line" of the signature, for messages

    def uses_tasks(self) -> bool:
        """Does a rule of this signature look at asyncio task stacks?"""
        return any("tasks" in r.scope for c in self.clauses for r in c.threads)

    def fix_lines(self) -> List[str]:
        out = []
        for f in self.fix:
            line = "%s: %s" % (f["kind"], f["text"])
            if f.get("version"):
                line += " (fixed in %s)" % f["version"]
            out.append(line)
        return out


@dataclass
class SignatureDB:
    signatures: List[Signature] = field(default_factory=list)

    def by_id(self, sig_id: str) -> Optional[Signature]:
        for s in self.signatures:
            if s.id == sig_id:
                return s
        return None
