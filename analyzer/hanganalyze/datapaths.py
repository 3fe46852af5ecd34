"""Where hanganalyze's files live: the built-in signature database, gdbext, and the per-user cache.

One resolver each, so every reader agrees. The signature database (signatures, rule texts, frame
lists, triage tables, schemas: everything under the repository's ``signatures/``) is **package
data** of ``hanganalyze``: the wheel carries it as ``hanganalyze/signatures/`` (``setup.py`` copies
the repository's one folder there), so every install scheme has it beside the code -- ``pip
install``, ``--user``, ``--target``, a venv, pipx, ``uv tool``, a zipapp (issue 35: data files
under ``<prefix>/share`` exist only for some schemes).  A source checkout (tests, ``PYTHONPATH``,
an editable install) reads the repository's folder in place.

Where the package is plain files, its folder is what ``importlib.resources.files`` answers, found
here without importing ``importlib.resources`` (20 ms of start-up on every run); inside an archive
(a zipapp) ``importlib.resources`` reads it, and the folder is copied once into the cache, because
the readers (and gdb, for gdbext) need real files.
"""

import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

#: Present in every signature folder the tool ships; how a candidate folder is recognised.
SCHEMA_FILE = "schema.json"
#: The signature database's folder name, inside the package and in a source checkout.
DATA_FOLDER = "signatures"
#: gdbext's package, and the script gdb ``source``s (it imports the package by file location).
GDBEXT_PACKAGE = "hanganalyze_gdbext"
GDBEXT_ENTRY = "load.py"


class DataNotFound(Exception):
    """The built-in signature folder is nowhere (a broken installation)."""


class DataSource(NamedTuple):
    """Where a folder of the tool's files was found: the folder (real files) and how, in words
    (``package data``, ``source checkout``, ``package data in ARCHIVE, extracted``)."""

    folder: Path
    how: str


_FOUND: Dict[str, DataSource] = {}


def _package_folder() -> Optional[Path]:
    """``hanganalyze``'s folder when it is imported from plain files; None inside an archive."""
    here = Path(os.path.abspath(__file__)).parent
    return here if (here / "__init__.py").is_file() else None


def signature_source() -> DataSource:
    """The built-in signature folder and where it came from (``hanganalyze --version`` says it):
    the package's data first, then the source checkout (``analyzer/hanganalyze`` beside
    ``signatures/``), then the package inside an archive through ``importlib.resources``."""
    if "signatures" in _FOUND:
        return _FOUND["signatures"]
    looked: List[str] = []
    here = _package_folder()
    found: Optional[DataSource] = None
    if here is not None:
        for folder, how in ((here / DATA_FOLDER, "package data"),
                            (here.parent.parent / DATA_FOLDER, "source checkout")):
            if (folder / SCHEMA_FILE).is_file():
                found = DataSource(folder, how)
                break
            looked.append(str(folder))
    else:
        found = _from_archive(__package__ or "hanganalyze", DATA_FOLDER, SCHEMA_FILE)
        looked.append("%s inside %s" % (DATA_FOLDER, __file__))
    if found is None:
        raise DataNotFound("built-in signatures not found (no %s in %s): reinstall hanganalyze"
                           % (SCHEMA_FILE, ", ".join(looked)))
    _FOUND["signatures"] = found
    return found


def builtin_signatures() -> Path:
    """The built-in signature folder (it holds ``schema.json``, ``fragments.yaml`` and ``lists/``)."""
    return signature_source().folder


def gdbext_source() -> DataSource:
    """gdbext's package folder as real files gdb can ``source`` (``hanganalyze gdb-path``, and the
    analyzer's own gdb sessions): where Python finds ``hanganalyze_gdbext`` -- site-packages, a
    ``--target`` folder, the checkout's ``gdbext/`` -- or, inside a zipapp, a copy in the cache."""
    if "gdbext" in _FOUND:
        return _FOUND["gdbext"]
    import importlib.util  # here: only a gdb session or `gdb-path` needs it

    spec = importlib.util.find_spec(GDBEXT_PACKAGE)  # finds without importing it
    if spec is None or not spec.submodule_search_locations:
        raise DataNotFound("%s is not installed beside hanganalyze: reinstall hanganalyze" % GDBEXT_PACKAGE)
    folder = Path(list(spec.submodule_search_locations)[0])
    if (folder / GDBEXT_ENTRY).is_file():
        found: Optional[DataSource] = DataSource(folder, "package")
    else:
        found = _from_archive(GDBEXT_PACKAGE, "", GDBEXT_ENTRY)
    if found is None:
        raise DataNotFound("%s not found in %s: reinstall hanganalyze" % (GDBEXT_ENTRY, folder))
    _FOUND["gdbext"] = found
    return found


def gdb_source_line() -> str:
    """The line to type in gdb or cuda-gdb (or put in ``~/.gdbinit``) to load the ``hang-*`` commands."""
    return "source %s" % (gdbext_source().folder / GDBEXT_ENTRY)


def _from_archive(package: str, sub: str, marker: str) -> Optional[DataSource]:
    """A folder of ``package``'s data read through ``importlib.resources`` (an archive: a zipapp),
    copied to real files once (``_extract``); None when the package does not carry it."""
    import importlib.resources  # here: only a package inside an archive needs it (20 ms)

    tree: Any = importlib.resources.files(package)
    for part in [p for p in sub.split("/") if p]:
        tree = tree / part
    if not (tree / marker).is_file():
        return None
    if isinstance(tree, Path):  # plain files after all (another loader)
        return DataSource(tree, "package data")
    archive = getattr(getattr(tree, "root", None), "filename", None) or "an archive"
    folder = _extract(tree, "%s-%s" % (package, sub or "package"))
    return DataSource(folder, "package data in %s, extracted" % archive)


def _tree_files(tree: Any, prefix: str = "") -> Dict[str, bytes]:
    """Every file under a resources tree (``Traversable``): relative path -> bytes; caches left out."""
    out: Dict[str, bytes] = {}
    for item in tree.iterdir():
        name = prefix + item.name
        if item.name.startswith(".") or item.name == "__pycache__":
            continue
        if item.is_dir():
            out.update(_tree_files(item, name + "/"))
        elif item.is_file():
            out[name] = item.read_bytes()
    return out


def _extract(tree: Any, name: str) -> Path:
    """A real folder in the cache, named by a hash of ``tree``'s contents (a new archive gets a new
    folder, the same one is reused), whose sub-folder named like the tree's last part (``signatures``,
    ``hanganalyze_gdbext``) holds its files; a private temporary folder, removed at exit, when there
    is no writable cache."""
    leaf = tree.name.strip("/") or name
    files = {leaf + "/" + rel: data for rel, data in _tree_files(tree).items()}
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    cache = cache_dir("extracted")
    target = cache / ("%s-%s" % (name, digest.hexdigest()[:16])) if cache is not None else None
    if target is not None and (target / ".complete").is_file():
        return target / leaf
    import tempfile  # here: only a first run from an archive writes files

    try:
        if target is None:
            raise OSError("no cache folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".%s." % name, dir=str(target.parent)))
    except OSError:
        import atexit  # here: likewise
        import shutil  # here: likewise

        staging = Path(tempfile.mkdtemp(prefix="hanganalyze-%s." % name))
        atexit.register(shutil.rmtree, str(staging), True)
        target = None
    for rel, data in files.items():
        path = staging.joinpath(*rel.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (staging / ".complete").write_bytes(b"")
    if target is None:
        return staging / leaf
    try:
        os.rename(str(staging), str(target))
    except OSError:  # another run put it there first: the same contents
        import shutil  # here: likewise

        shutil.rmtree(str(staging), ignore_errors=True)
    return target / leaf


def cache_dir(sub: str = "") -> Optional[Path]:
    """``$HANGANALYZE_CACHE_DIR``, else ``$XDG_CACHE_HOME/hanganalyze`` (an absolute one), else
    ``~/.cache/hanganalyze``; ``HANGANALYZE_CACHE_DIR=off`` or no home folder: None (no cache).
    ``sub`` names a folder inside it (``symbols``, ``lines``)."""
    d = os.environ.get("HANGANALYZE_CACHE_DIR")
    if d == "off":
        return None
    if not d:
        base = os.environ.get("XDG_CACHE_HOME")
        if not base or not os.path.isabs(base):
            home = os.path.expanduser("~")
            if not home or home == "~":
                return None
            base = os.path.join(home, ".cache")
        d = os.path.join(base, "hanganalyze")
    return Path(d) / sub if sub else Path(d)


def describe() -> str:
    """Where the tool's data came from, for ``--version``: one line per folder, or why it is missing."""
    lines = []
    for what, find in (("signatures", signature_source), ("gdbext", gdbext_source)):
        try:
            src = find()
            lines.append("%s: %s (%s)" % (what, src.folder, src.how))
        except DataNotFound as exc:
            lines.append("%s: %s" % (what, exc))
    lines.append("python: %s %s" % (sys.executable, sys.version.split()[0]))
    return "\n".join(lines)
