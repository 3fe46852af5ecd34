"""Where hanganalyze's files live: the built-in signature database and the per-user cache.

One resolver each, so every reader agrees. The signature database is data beside the code, not a
package: in a source checkout it is the repository's ``signatures/`` folder; an installed copy has
it under ``<prefix>/share/hanganalyze/signatures`` (``pyproject.toml``'s data-files).
"""

import os
import sys
from pathlib import Path
from typing import Iterator, List, Optional

#: Present in every signature folder the tool ships; how a candidate folder is recognised.
SCHEMA_FILE = "schema.json"


class DataNotFound(Exception):
    """The built-in signature folder is nowhere (a broken installation)."""


def _signature_candidates() -> Iterator[Path]:
    """The source checkout first, then the installed copies (read lazily: a checkout needs no
    ``sysconfig``, whose import costs a one-sample run a few ms)."""
    here = Path(__file__).resolve().parent  # analyzer/hanganalyze
    yield here.parent.parent / "signatures"  # the source checkout
    import sysconfig  # here: a source checkout never needs it (start-up time)

    for prefix in (sysconfig.get_path("data"), sys.prefix, sys.base_prefix):
        if prefix:
            yield Path(prefix) / "share" / "hanganalyze" / "signatures"


def builtin_signatures() -> Path:
    """The built-in signature folder (it holds ``schema.json``, ``fragments.yaml`` and ``lists/``)."""
    candidates: List[Path] = []
    for c in _signature_candidates():
        if (c / SCHEMA_FILE).is_file():
            return c
        candidates.append(c)
    raise DataNotFound(
        "built-in signatures not found (no %s in %s)" % (SCHEMA_FILE, ", ".join(map(str, candidates)))
    )


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
