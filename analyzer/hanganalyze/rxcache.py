"""``compile``: ``re.compile`` with the parse kept across runs, in the user cache.

Compiling the tool's regexes (the triage table's categories, the signatures' frame patterns, the
frame lists, the name normalisations) was a fifth of a warm one-sample run (issue 21), and every
run compiled the same ones again.  ``re`` turns a pattern into a list of opcodes in Python
(``re._parser`` and ``re._compiler``: nearly all the time) and hands them to ``_sre.compile``; this
module keeps those arguments, per pattern and flags, in one marshal file of the cache
(``datapaths.cache_dir("rx")``, named by the interpreter's version and ``_sre.MAGIC``, as the opcodes
change between Python versions) and later runs call ``_sre.compile`` with them: the same
``re.Pattern`` (equal to ``re.compile``'s), without the parse.  New entries are written once, at
exit.  Any surprise (another Python's internals, an unreadable or foreign cache file) falls back to
``re.compile``; a bad pattern raises ``re.error`` as ``re.compile`` does.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Dict, Optional, Tuple

from hanganalyze import datapaths

try:  # the internals this relies on (CPython 3.8-3.13 alike); without them, plain re.compile
    import _sre
    from re import _compiler as _rx_compiler  # type: ignore[attr-defined]
    from re import _parser as _rx_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10 and older name them sre_compile, sre_parse
    try:
        import _sre
        import sre_compile as _rx_compiler  # type: ignore[no-redef]
        import sre_parse as _rx_parser  # type: ignore[no-redef]
    except ImportError:
        _sre = None  # type: ignore[assignment]

#: More entries than this: the file starts again (patterns of signature folders no longer used).
MAX_ENTRIES = 4000

_Args = Tuple[int, list, int, Dict[str, int], tuple]
_entries: Optional[Dict[Tuple[Any, int], _Args]] = None
_path: Optional[str] = None
_dirty = False


def _file() -> Optional[str]:
    folder = datapaths.cache_dir("rx")
    if folder is None or _sre is None or sys.version_info[:2] > (3, 13):  # internals checked up to 3.13
        return None
    return os.path.join(str(folder), "rx-%s-%s-%d.marshal" % (
        sys.implementation.name, "%x" % sys.hexversion, getattr(_sre, "MAGIC", 0)))


def _private(path: str) -> bool:
    """Ours and writable by nobody else (as the signature cache asks of its folder)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not (st.st_mode & 0o022)


def _load() -> Dict[Tuple[Any, int], _Args]:
    global _entries, _path
    _entries = {}
    _path = _file()
    if _path is not None and _private(os.path.dirname(_path)):
        try:
            import marshal  # only with a cache (start-up time)

            with open(_path, "rb") as f:
                got = marshal.loads(f.read())
            if isinstance(got, dict):
                _entries = got
        except (OSError, ValueError, EOFError, TypeError):
            pass  # absent or corrupt: compiled again and written anew
    return _entries


def _args(pattern: Any, flags: int) -> _Args:
    """What ``re._compiler.compile`` hands to ``_sre.compile``, besides the pattern."""
    p = _rx_parser.parse(pattern, flags)
    code = _rx_compiler._code(p, flags)
    groupindex = dict(p.state.groupdict)
    indexgroup = [None] * p.state.groups
    for k, i in groupindex.items():
        indexgroup[i] = k
    # the opcodes are named int constants: plain ints for marshal
    return flags | p.state.flags, [int(c) for c in code], p.state.groups - 1, groupindex, tuple(indexgroup)


def compile(pattern: Any, flags: int = 0) -> re.Pattern:  # noqa: A001 - re.compile's name, on purpose
    """``re.compile(pattern, flags)``, from the cache's opcodes when a run compiled it before."""
    global _dirty
    flags = int(flags)
    entries = _entries if _entries is not None else _load()
    if _path is None or not isinstance(pattern, (str, bytes)):
        return re.compile(pattern, flags)
    key = (pattern, flags)
    got = entries.get(key)
    if got is not None:
        try:
            f, code, groups, groupindex, indexgroup = got
            return _sre.compile(pattern, f, code, groups, groupindex, indexgroup)
        except Exception:  # noqa: BLE001 - a foreign or damaged entry: compiled again below
            pass
    try:
        args = _args(pattern, flags)  # a bad pattern raises re.error here, as re.compile does
        rx = _sre.compile(pattern, *args)
    except re.error:
        raise
    except Exception:  # noqa: BLE001 - internals not as expected: nothing cached
        return re.compile(pattern, flags)
    if not _dirty:
        import atexit  # only once something new was compiled (start-up time)

        atexit.register(_save)
    _dirty = True
    if len(entries) >= MAX_ENTRIES:
        entries.clear()
    entries[key] = args
    return rx


def _save() -> None:
    """The entries, atomically; any failure only means the next run compiles again."""
    if not _dirty or _path is None or not _entries:
        return
    try:
        import marshal  # noqa: I001 - at exit only
        import tempfile  # here: at exit only (start-up time)

        folder = os.path.dirname(_path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not _private(folder):
            return
        fd, tmp = tempfile.mkstemp(prefix=".rx.", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps(_entries))
            os.replace(tmp, _path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:  # noqa: BLE001
        pass
