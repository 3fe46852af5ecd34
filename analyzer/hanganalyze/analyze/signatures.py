"""Load, validate and compile the signature database (``signatures/*.yaml`` + user folders).

Files are read with ``yaml.safe_load`` semantics (SafeLoader, no tags that build objects) but via
the composed node tree, so a schema error can be reported as ``file:line: path: message``.
Everything that can be checked once is checked here (schema, regexes, version specs, duplicate
ids), and every pattern is compiled here, so matching does no parsing at all.

An invalid file stops the tool (exit 2, one line): a silently skipped file would mean silently
missing findings, and the message names the file and line to fix.

Validating and compiling (importing jsonschema, YAML composition, schema checks) on every run
would cost a good part of a whole 200-thread core analysis, so the compiled
signatures of each file are kept in a cache (``$XDG_CACHE_HOME/hanganalyze/``) keyed by a hash of
everything they are made from (the file's bytes and display name, the schema, this module's code,
the package version): a file whose hash is not in the cache is validated in full, so the cache can
never let an invalid or edited file through.  yaml and jsonschema are imported only then.

Fragments: ``fragments.yaml`` (built-in, plus one in a user folder for that folder's files) names
step pieces shared by every file (``blocked``, ``aborted``, ``gil_wait``...).  A mapping inside a
signature's ``match`` with ``use: NAME`` is replaced by the fragment's keys, its own keys winning,
before the file is validated, so a fragment means exactly what a copy in its place would.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import pickle
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from hanganalyze import datapaths
from hanganalyze.analyze.regex_guard import risky_regex
from hanganalyze.errors import SignatureError
from hanganalyze.names import normalize_function

if TYPE_CHECKING:  # imported where used: both are slow to import, and a cached run needs neither
    import jsonschema
    import yaml

SCHEMA_FILE = "schema.json"
#: Named step pieces shared by signature files (not itself a signature file).
FRAGMENTS_FILE = "fragments.yaml"
#: A schema error quotes the offending value; keep the one-line message readable.
MAX_ERROR_CHARS = 300

# --------------------------------------------------------------------------------------------
# Version specs (">=2.26,<3") on dotted numeric versions.
# --------------------------------------------------------------------------------------------

_SPEC_PART = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*([0-9]+(?:\.[0-9]+)*)\s*$")


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


def _glob_re(pattern: Any) -> re.Pattern:
    """A glob (or a list of globs) as one regex anchored at both ends (usable with ``search``)."""
    items = pattern if isinstance(pattern, list) else [pattern]
    return re.compile("|".join("^" + fnmatch.translate(p) for p in items))


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
                regexes.append(re.compile(item[3:]))
            elif any(c in item for c in "*?["):
                regexes.append(_glob_re(item))
            else:
                exact.add(normalize_function(item))
        return cls(frozenset(exact), tuple(regexes), unknown, nccl_public, " | ".join(items))

    def matches(self, norm: str) -> bool:
        if norm == "??":
            return self.unknown
        if norm in self.exact:
            return True
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
        return cls(
            function=fn,
            library=_glob_re(d["library"]) if d.get("library") else None,
            file=_glob_re(d["file"]) if d.get("file") else None,
            file_has_slash=all("/" in f for f in _as_list(d.get("file", ""))),
            kind=d.get("kind"),
            text=d.get("name") or _shorten(" ".join(parts)) or "any frame",
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

    @classmethod
    def compile_step(cls, d: Dict[str, Any]) -> Step:
        base = FramePattern.compile(d)
        return cls(
            function=base.function, library=base.library, file=base.file, file_has_slash=base.file_has_slash,
            kind=base.kind, text=base.text,
            gap=d.get("gap"), within=d.get("within"), optional=bool(d.get("optional")),
            stripped=FramePattern.compile(d["stripped"]) if d.get("stripped") else None,
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


# --------------------------------------------------------------------------------------------
# Loading with line numbers
# --------------------------------------------------------------------------------------------

_SCHEMA_CACHE: Dict[str, Any] = {}


def builtin_dir() -> Path:
    """The built-in signature folder (``datapaths.builtin_signatures``, the one resolver)."""
    try:
        return datapaths.builtin_signatures()
    except datapaths.DataNotFound as exc:
        raise SignatureError(str(exc)) from None


def _schema() -> Dict[str, Any]:
    if "schema" not in _SCHEMA_CACHE:
        path = builtin_dir() / SCHEMA_FILE
        _SCHEMA_CACHE["schema"] = json.loads(path.read_text(encoding="utf-8"))
    return _SCHEMA_CACHE["schema"]


def display_path(path: Path) -> str:
    """Relative to the working directory when inside it (signatures/foo.yaml), else absolute."""
    try:
        rel = os.path.relpath(str(path))
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _node_at(node: yaml.Node, path: Sequence[Any]) -> yaml.Node:
    """The deepest composed node along a jsonschema error path (for its line number)."""
    import yaml

    for key in path:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == key:
                    nxt = v
                    break
            if nxt is None:
                return node
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            return node
    return node


def read_yaml(path: Path, trusted: bool = False) -> Tuple[Any, Optional[yaml.Node]]:
    """(data, root node) of a YAML file, every problem one SignatureError line.  ``trusted``: a
    file shipped with the tool (the frame lists), read with libyaml's C parser where it exists,
    because it is read on every run; user files go through the pure-Python reader, whose
    character check names the offending character."""
    import yaml

    from hanganalyze.analyze.yaml_guard import check_node

    disp = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SignatureError("%s: cannot read: %s" % (disp, getattr(e, "strerror", None) or e)) from None
    try:
        loader = (getattr(yaml, "CSafeLoader", yaml.SafeLoader) if trusted else yaml.SafeLoader)(text)
        # (the pure-Python reader checks every character first: a control character ends it here)
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, max(0, int(getattr(e, "position", 0) or 0))) + 1
        char = e.character if isinstance(e.character, int) else ord(str(e.character)[:1] or "?")
        raise SignatureError("%s:%d: invalid YAML: character U+%04X is not allowed (%s)"
                             % (disp, line, char, e.reason)) from None
    try:
        node = loader.get_single_node()
        unsafe = check_node(node)  # alias bombs, recursive aliases, absurd nesting: before walking it
        if unsafe:
            raise SignatureError("%s: refused: %s" % (disp, unsafe))
        data = loader.construct_document(node) if node is not None else None
    except RecursionError:
        raise SignatureError("%s: refused: nested too deeply to read" % disp) from None
    except yaml.MarkedYAMLError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else 0
        raise SignatureError("%s:%d: invalid YAML: %s" % (disp, line, e.problem)) from None
    except yaml.YAMLError as e:
        raise SignatureError("%s: invalid YAML: %s" % (disp, " ".join(str(e).split()))) from None
    finally:
        loader.dispose()
    return data, node


def _err(disp: str, node: Optional[yaml.Node], path: Sequence[Any], msg: str) -> SignatureError:
    line = _node_at(node, path).start_mark.line + 1 if node is not None else 0
    where = path_label(path)
    msg = " ".join(msg.split())
    if len(msg) > MAX_ERROR_CHARS:  # jsonschema quotes the whole offending value
        msg = msg[: MAX_ERROR_CHARS - 3] + "..."
    return SignatureError("%s:%d: %s%s" % (disp, line, (where + ": ") if where else "", msg))


def path_label(path: Sequence[Any]) -> str:
    """The last meaningful key of an error path (``severity``, ``match.any[0].threads``)."""
    keys = [str(p) for p in path if not isinstance(p, int)]
    if keys and keys[0] == "signatures":
        keys = keys[1:]
    return ".".join(keys[-2:]) if len(keys) > 1 and keys[-1] in ("function", "regex", "version") else (
        keys[-1] if keys else "")


def _best_error(errors: List[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    import jsonschema

    return jsonschema.exceptions.best_match(errors)


def _compile_signature(d: Dict[str, Any], disp: str, node: yaml.Node, base: List[Any]) -> Signature:
    def bad(path: List[Any], msg: str) -> SignatureError:
        return _err(disp, node, base + path, msg)

    def regex(path: List[Any], text: str) -> re.Pattern:
        try:
            compiled = re.compile(text)
        except re.error as e:
            raise bad(path, "bad regex %r: %s" % (text, e)) from None
        why = risky_regex(text)  # Python's re cannot be interrupted: refuse exponential shapes up front
        if why:
            raise bad(path, "unsafe regex %r: %s" % (text[:80], why))
        return compiled

    def check_fn(path: List[Any], spec: Any) -> None:
        for i, item in enumerate(spec if isinstance(spec, list) else [spec]):
            if item.startswith("re:"):
                regex(path + ([i] if isinstance(spec, list) else []), item[3:])

    m = d["match"]
    raw_clauses = m["any"] if "any" in m else [m]
    clauses = []
    for ci, c in enumerate(raw_clauses):
        cpath: List[Any] = ["match", "any", ci] if "any" in m else ["match"]
        rules = []
        for ti, t in enumerate(c.get("threads", [])):
            tpath = cpath + ["threads", ti]
            for si, s in enumerate(t.get("stack", [])):
                if "function" in s:
                    check_fn(tpath + ["stack", si, "function"], s["function"])
                if s.get("within") is not None and si != 0:
                    raise bad(tpath + ["stack", si, "within"], "'within' is only allowed on the first step")
                if s.get("stripped") and "function" in s["stripped"]:
                    check_fn(tpath + ["stack", si, "stripped", "function"], s["stripped"]["function"])
            for ni, n in enumerate(t.get("not", [])):
                if "function" in n:
                    check_fn(tpath + ["not", ni, "function"], n["function"])
            if t.get("max") is not None and t.get("min") is not None and t["max"] < t["min"]:
                raise bad(tpath + ["max"], "max %d is below min %d" % (t["max"], t["min"]))
            rules.append(ThreadRule(
                rule=t["rule"],
                stack=[Step.compile_step(s) for s in t.get("stack", [])],
                not_=[FramePattern.compile(n) for n in t.get("not", [])],
                thread_name=_glob_re(t["thread_name"]) if t.get("thread_name") else None,
                min=t.get("min", 0 if t.get("max") is not None else 1),
                max=t.get("max"),
                optional=bool(t.get("optional")),
                gil=t.get("gil"),
            ))
        if rules and all(r.optional or r.max is not None for r in rules) and not c.get("messages"):
            raise bad(cpath + ["threads"], "a clause needs at least one required thread rule or a message rule")
        msgs = [MessageRule(mr["rule"], regex(cpath + ["messages", mi, "regex"], mr["regex"]))
                for mi, mr in enumerate(c.get("messages", []))]
        clauses.append(Clause(
            name=c.get("name", "clause %d" % (ci + 1)),
            confidence=float(c.get("confidence", 1.0)),
            threads=rules, messages=msgs, thread_count=c.get("thread_count"),
        ))
    cond_d = d.get("conditions") or {}
    conds = Conditions(
        libraries=[LibraryCondition(_glob_re(lc["name"]), lc["name"],
                                    VersionSpec.parse(lc["version"]) if lc.get("version") else None)
                   for lc in cond_d.get("libraries", [])],
        python=VersionSpec.parse(cond_d["python"]) if cond_d.get("python") else None,
        signal=tuple(cond_d["signal"]) if cond_d.get("signal") else None,
    )
    line = _node_at(node, base).start_mark.line + 1
    return Signature(
        id=d["id"], title=d["title"], severity=d["severity"], cause=" ".join(d["cause"].split()),
        fix=[dict(f) for f in d["fix"]], references=list(d["references"]), clauses=clauses,
        conditions=conds, source="%s:%d" % (disp, line),
    )


def _validate(data: Any, schema: Dict[str, Any], disp: str, node: Optional[yaml.Node]) -> None:
    import jsonschema

    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if errors:
        e = _best_error(errors)
        # oneOf/anyOf wrap the useful message; the deepest context error names the real problem
        while e.context:
            e = _best_error(list(e.context))
        raise _err(disp, node, list(e.absolute_path), e.message)


class _Fragments:
    """The fragments one signature file may ``use``: name -> (body, file, its node, path in it)."""

    def __init__(self) -> None:
        self.raw: Dict[str, Tuple[Dict[str, Any], str, Optional[yaml.Node], List[Any]]] = {}
        self.done: Dict[str, Dict[str, Any]] = {}

    def add_file(self, path: Path) -> None:
        disp = display_path(path)
        data, node = read_yaml(path)
        _validate(data, {"$defs": _schema()["$defs"], "$ref": "#/$defs/fragmentFile"}, disp, node)
        for name, body in data["fragments"].items():
            if name in self.raw:
                raise _err(disp, node, ["fragments", name], "fragment %r is already defined in %s"
                           % (name, self.raw[name][1]))
            self.raw[name] = (body, disp, node, ["fragments", name])

    def resolve(self, name: str, chain: Tuple[str, ...]) -> Dict[str, Any]:
        if name not in self.done:
            body, disp, node, path = self.raw[name]
            if name in chain:
                raise _err(disp, node, path, "fragment cycle: %s" % " -> ".join(chain + (name,)))
            self.done[name] = self.expand(body, disp, node, path, chain + (name,))
        return self.done[name]

    def expand(self, obj: Any, disp: str, node: Optional[yaml.Node], path: List[Any], chain: Tuple[str, ...]) -> Any:
        """``obj`` with every ``{use: NAME, ...}`` mapping in it replaced by the fragment plus its own keys."""
        if isinstance(obj, list):
            return [self.expand(x, disp, node, path + [i], chain) for i, x in enumerate(obj)]
        if not isinstance(obj, dict):
            return obj
        out: Dict[str, Any] = {}
        if "use" in obj:
            name = obj["use"]
            if not isinstance(name, str) or name not in self.raw:
                known = ", ".join(sorted(self.raw)) or "none"
                raise _err(disp, node, path + ["use"], "unknown fragment %r (known: %s)" % (name, known))
            out.update(self.resolve(name, chain))
        for k, v in obj.items():
            if k != "use":
                out[k] = self.expand(v, disp, node, path + [k], chain)
        return out


_FRAGMENTS: Dict[Tuple[Tuple[str, bytes], ...], _Fragments] = {}


def fragment_files(folder: Path) -> List[Path]:
    """The fragment files a signature file in ``folder`` sees: the built-in one, then the folder's."""
    files = [builtin_dir() / FRAGMENTS_FILE, folder / FRAGMENTS_FILE]
    out: List[Path] = []
    for f in files:
        if f.is_file() and not any(f.samefile(o) for o in out):
            out.append(f)
    return out


def _fragments(folder: Path) -> _Fragments:
    files = fragment_files(folder)
    key = tuple((str(f), f.read_bytes()) for f in files)
    if key not in _FRAGMENTS:
        frags = _Fragments()
        for f in files:
            frags.add_file(f)
        _FRAGMENTS.clear()  # one folder's set is kept: enough for a run, which loads folder by folder
        _FRAGMENTS[key] = frags
    return _FRAGMENTS[key]


def _expand_fragments(data: Any, path: Path, disp: str, node: Optional[yaml.Node]) -> Any:
    """Every signature's ``match`` with its ``use:`` mappings expanded (before validation)."""
    sigs = data.get("signatures") if isinstance(data, dict) else None
    if not isinstance(sigs, list) or not any(isinstance(s, dict) and "match" in s for s in sigs):
        return data
    frags = _fragments(path.parent)
    out = dict(data)
    out["signatures"] = [
        dict(s, match=frags.expand(s["match"], disp, node, ["signatures", i, "match"], ()))
        if isinstance(s, dict) and "match" in s else s
        for i, s in enumerate(sigs)
    ]
    return out


def load_file(path: Path) -> List[Signature]:
    """Validate and compile one YAML file; raises SignatureError("file:line: ...")."""
    disp = display_path(path)
    data, node = read_yaml(path)
    if data is None:
        raise SignatureError("%s:1: empty signature file" % disp)
    data = _expand_fragments(data, path, disp, node)
    _validate(data, _schema(), disp, node)
    return [_compile_signature(s, disp, node, ["signatures", i]) for i, s in enumerate(data["signatures"])]


def signature_files(folder: Path) -> List[Path]:
    if not folder.exists():
        raise SignatureError("%s: no such signature folder" % display_path(folder))
    if not folder.is_dir():
        raise SignatureError("%s: not a folder (give --signatures a folder of *.yaml files)" % display_path(folder))
    return sorted(p for p in folder.iterdir()
                  if p.suffix in (".yaml", ".yml") and p.name != FRAGMENTS_FILE and p.is_file())


# --------------------------------------------------------------------------------------------
# Cache of compiled files
# --------------------------------------------------------------------------------------------

_CACHE_NAME = "signatures.pickle"
_CACHE_ENTRIES = 256


def cache_dir() -> Optional[Path]:
    """The per-user cache folder (``datapaths.cache_dir``); None without a home."""
    return datapaths.cache_dir()


def _private(path: Path) -> bool:
    """Ours and writable by nobody else: only then is a pickle in it trusted (loading a pickle runs
    whatever code it names, so a cache that another user can write would be a way in)."""
    try:
        st = os.stat(str(path), follow_symlinks=False)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not (st.st_mode & 0o022)


def _code_key() -> bytes:
    """What every cached entry depends on besides its file: the code that validates and compiles
    (every module of this folder: this one, ``names`` and the guards it calls; ``cnames``, which
    ``names`` uses), the schema, the built-in fragments, the Python and package versions (a
    development tree keeps one version number across code changes)."""
    import sys

    from hanganalyze import __version__, cnames

    h = hashlib.sha256(("%s %d.%d" % (__version__, sys.version_info[0], sys.version_info[1])).encode())
    here = Path(__file__).resolve().parent
    shared = [Path(cnames.__file__).resolve(), builtin_dir() / SCHEMA_FILE, builtin_dir() / FRAGMENTS_FILE]
    for p in sorted(here.glob("*.py")) + shared:
        h.update(p.name.encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"?")
    return h.digest()


def _file_key(code_key: bytes, path: Path) -> Optional[str]:
    try:
        data = path.read_bytes()
        # the fragments it may use (the built-in file's bytes are part of code_key)
        frags = (path.parent / FRAGMENTS_FILE).read_bytes() if (path.parent / FRAGMENTS_FILE).is_file() else b""
    except OSError:
        return None  # load_file reports it
    h = hashlib.sha256(code_key)
    h.update(display_path(path).encode("utf-8", "surrogateescape") + b"\0")  # part of each signature's `source`
    h.update(b"%d\0" % len(frags) + frags)
    h.update(data)
    return h.hexdigest()


def _read_cache(folder: Path) -> Dict[str, List[Signature]]:
    path = folder / _CACHE_NAME
    if not (_private(folder) and _private(path)):
        return {}
    try:
        with open(str(path), "rb") as f:
            data = pickle.load(f)
    except Exception:  # noqa: BLE001 - a corrupt or stale cache is ignored, never an error
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: v
        for k, v in data.items()
        if isinstance(k, str) and isinstance(v, list) and all(isinstance(s, Signature) for s in v)
    }


def _write_cache(folder: Path, entries: Dict[str, List[Signature]]) -> None:
    """Atomically (a concurrent run reads the old or the new file, never half of one); any failure
    (read-only home, full disk) only means the next run validates again."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(folder):
            return
        fd, tmp = tempfile.mkstemp(prefix=".signatures.", dir=str(folder))
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(entries, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, str(folder / _CACHE_NAME))
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:  # noqa: BLE001
        pass


def load_signatures(
    extra_dirs: Iterable[Path] = (), builtin: bool = True, use_cache: bool = False
) -> SignatureDB:
    """Built-in signatures plus every ``*.yaml`` in ``extra_dirs``; duplicate ids are an error.

    With ``use_cache``, a file whose content hash is in the cache is not parsed again (see the
    module docstring); every other file is validated and compiled, then added to the cache.
    """
    db = SignatureDB()
    seen: Dict[str, str] = {}
    folders = ([builtin_dir()] if builtin else []) + [Path(d) for d in extra_dirs]
    folder_cache = cache_dir() if use_cache else None
    cached: Dict[str, List[Signature]] = _read_cache(folder_cache) if folder_cache is not None else {}
    code_key = _code_key() if folder_cache is not None else b""
    used: Dict[str, List[Signature]] = {}
    for folder in folders:
        for path in signature_files(folder):
            key = _file_key(code_key, path) if folder_cache is not None else None
            sigs = cached.get(key) if key is not None else None
            if sigs is None:
                sigs = load_file(path)
            if key is not None:
                used[key] = sigs
            for sig in sigs:
                if sig.id in seen:
                    raise SignatureError("%s: id: duplicate signature id %r (first defined at %s)"
                                         % (sig.source, sig.id, seen[sig.id]))
                seen[sig.id] = sig.source
                db.signatures.append(sig)
    if folder_cache is not None and not set(used) <= set(cached):
        entries = dict(cached)
        entries.update(used)  # other runs' folders stay (the newest _CACHE_ENTRIES entries)
        _write_cache(folder_cache, dict(list(entries.items())[-_CACHE_ENTRIES:]))
    return db
