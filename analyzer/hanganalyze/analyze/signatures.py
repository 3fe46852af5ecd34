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

import hashlib
import io
import json
import os
import pickle
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from hanganalyze import __version__, cnames, datapaths, names
from hanganalyze.analyze.regex_guard import risky_regex
from hanganalyze.analyze.sigmodel import (
    Clause,
    Conditions,
    FramePattern,
    LazyPattern,
    LibraryCondition,
    MessageRule,
    Signature,
    SignatureDB,
    Step,
    ThreadRule,
    VersionSpec,
    glob_re,
)
from hanganalyze.errors import SignatureError

if TYPE_CHECKING:  # imported where used: both are slow to import, and a cached run needs neither
    import jsonschema
    import yaml

SCHEMA_FILE = "schema.json"
#: Named step pieces shared by signature files (not itself a signature file).
FRAGMENTS_FILE = "fragments.yaml"
#: A schema error quotes the offending value; keep the one-line message readable.
MAX_ERROR_CHARS = 300

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
    import yaml  # here: a warm run reads the cache, not YAML (start-up time)

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
    import yaml  # here: a warm run reads the cache, not YAML (start-up time)

    from hanganalyze.analyze.yaml_guard import check_node  # here: it imports yaml (start-up time)

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


#: Bump when what ``read_data_file`` stores changes.
_DATA_CACHE_FORMAT = "1"


def read_data_file(path: Path, extra: Optional[Callable[[Any, Optional[yaml.Node]], Any]] = None,
                   extra_name: str = "") -> Tuple[Any, Any]:
    """(data, ``extra(data, root node)``) of a YAML data file shipped with the tool (the triage
    table, the rule list, the frame lists), read on every run: from the user cache when a run read
    the same bytes before (``datapaths.cache_dir("data")``, JSON keyed by a hash of the file's bytes,
    ``extra_name`` and the package version), else with ``read_yaml(trusted=True)`` (every problem
    one SignatureError line, as before) and then cached.  A cached run imports no yaml (issue 21:
    importing and running the parser was a tenth of a one-sample run).  ``extra`` computes what
    the caller needs of the node tree (line numbers), as plain JSON data."""
    try:
        raw = path.read_bytes()
    except OSError:
        raw = None  # read_yaml reports it
    folder = datapaths.cache_dir("data") if raw is not None else None
    name = key = ""
    if folder is not None:
        h = hashlib.sha256(("%s\0%s\0%s\0" % (_DATA_CACHE_FORMAT, __version__, extra_name)).encode())
        h.update(raw)  # type: ignore[arg-type]
        key = h.hexdigest()[:32]
        name = "%s-%s.json" % (path.stem, key)
        if _private(folder):
            try:
                with open(str(folder / name), "rb") as f:
                    entry = json.loads(f.read())
                if isinstance(entry, dict) and entry.get("key") == key:
                    return entry["data"], entry.get("extra")
            except (OSError, ValueError, KeyError):
                pass  # absent, half-written elsewhere or corrupt: read the file
    data, node = read_yaml(path, trusted=True)
    more = extra(data, node) if extra is not None else None
    if folder is not None:
        _write_data_cache(folder, name, path.stem, {"key": key, "data": data, "extra": more})
    return data, more


def _write_data_cache(folder: Path, name: str, stem: str, entry: Dict[str, Any]) -> None:
    """Atomically, and only what JSON gives back as it was (a YAML date or a number as a mapping
    key would not be); the older entries of the same file go.  Any failure only means the next run
    parses again."""
    try:
        text = json.dumps(entry)
        if json.loads(text) != entry:
            return
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(folder):
            return
        import tempfile  # only on a cache miss (its imports cost every warm run ~8 ms)

        fd, tmp = tempfile.mkstemp(prefix=".%s." % stem, dir=str(folder))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, str(folder / name))
        except BaseException:
            os.unlink(tmp)
            raise
        for old in folder.glob("%s-*.json" % stem):
            if old.name != name and len(old.name) == len(name):
                old.unlink()
    except Exception:  # noqa: BLE001
        pass


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
    import jsonschema  # here: only when validating (its import costs ~100 ms)

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
                for ri, r in enumerate(s["source"] if isinstance(s.get("source"), list) else [s.get("source")]):
                    if r:
                        regex(tpath + ["stack", si, "source", ri], r)
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
                thread_name=glob_re(t["thread_name"]) if t.get("thread_name") else None,
                min=t.get("min", 0 if t.get("max") is not None else 1),
                max=t.get("max"),
                optional=bool(t.get("optional")),
                gil=t.get("gil"),
                scope=tuple(t.get("scope", ("threads",))),
            ))
        if rules and all(r.optional or r.max is not None for r in rules) and not c.get("messages"):
            raise bad(cpath + ["threads"], "a clause needs at least one required thread rule or a message rule")
        msgs = [MessageRule(mr["rule"], regex(cpath + ["messages", mi, "regex"], mr["regex"]),
                            tuple(mr.get("conflict", ())),
                            regex(cpath + ["messages", mi, "absent"], mr["absent"]) if mr.get("absent") else None)
                for mi, mr in enumerate(c.get("messages", []))]
        clauses.append(Clause(
            name=c.get("name", "clause %d" % (ci + 1)),
            confidence=float(c.get("confidence", 1.0)),
            threads=rules, messages=msgs, thread_count=c.get("thread_count"),
        ))
    cond_d = d.get("conditions") or {}
    conds = Conditions(
        libraries=[LibraryCondition(glob_re(lc["name"]), lc["name"],
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
    import jsonschema  # here: only when validating (its import costs ~100 ms)

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
    (every module of this folder: this one, ``sigmodel`` and the guards it calls; ``names`` and
    ``cnames``, which it uses), the schema, the built-in fragments, the Python and package versions (a
    development tree keeps one version number across code changes)."""
    h = hashlib.sha256(("%s %d.%d" % (__version__, sys.version_info[0], sys.version_info[1])).encode())
    here = Path(__file__).resolve().parent
    shared = [Path(m.__file__).resolve() for m in (names, cnames)]
    shared += [builtin_dir() / SCHEMA_FILE, builtin_dir() / FRAGMENTS_FILE]
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


def _read_cache(folder: Path) -> Dict[str, bytes]:
    """The cache's entries, each still pickled: a run unpickles only the entries of the files it
    loads (``_entry``), not every file and version the cache remembers (their patterns compiled
    again as they are unpickled: a tenth of a warm one-sample run, issue 21)."""
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
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, bytes)}


class _Pickler(pickle.Pickler):
    """Patterns pickled as ``LazyPattern``s: compiled when a run first uses them."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, re.Pattern):
            return LazyPattern, (obj.pattern, obj.flags)
        return NotImplemented


def _pickled(sigs: List[Signature]) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(sigs)
    return buf.getvalue()


def _entry(blob: Optional[bytes]) -> Optional[List[Signature]]:
    """One cached file's signatures; None for an absent or unreadable entry."""
    if blob is None:
        return None
    try:
        sigs = pickle.loads(blob)
    except Exception:  # noqa: BLE001 - as _read_cache
        return None
    if not (isinstance(sigs, list) and all(isinstance(s, Signature) for s in sigs)):
        return None
    return sigs


def _write_cache(folder: Path, entries: Dict[str, bytes]) -> None:
    """Atomically (a concurrent run reads the old or the new file, never half of one); any failure
    (read-only home, full disk) only means the next run validates again."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(folder):
            return
        import tempfile  # only on a cache miss

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
    cached: Dict[str, bytes] = _read_cache(folder_cache) if folder_cache is not None else {}
    code_key = _code_key() if folder_cache is not None else b""
    used: Dict[str, bytes] = {}
    for folder in folders:
        for path in signature_files(folder):
            key = _file_key(code_key, path) if folder_cache is not None else None
            sigs = _entry(cached.get(key)) if key is not None else None
            if sigs is None:
                sigs = load_file(path)
                if key is not None:
                    cached.pop(key, None)  # an unreadable entry is written again
                    used[key] = _pickled(sigs)
            elif key is not None:
                used[key] = cached[key]
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
