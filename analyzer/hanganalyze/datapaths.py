"""Where hanganalyze's files live: the built-in signature database and the per-user cache.

One resolver each, so every reader agrees. The signature database is data beside the code, not a
package: in a source checkout it is the repository's ``signatures/`` folder; an installed copy has
it under ``<prefix>/share/hanganalyze/signatures`` (``pyproject.toml``'s data-files).
"""

import os
import sys
import sysconfig
from pathlib import Path
from typing import List, Optional

#: Present in every signature folder the tool ships; how a candidate folder is recognised.
SCHEMA_FILE = "schema.json"


class DataNotFound(Exception):
    """The built-in signature folder is nowhere (a broken installation)."""


def _signature_candidates() -> List[Path]:
    here = Path(__file__).resolve().parent  # analyzer/hanganalyze
    out = [here.parent.parent / "signatures"]  # the source checkout
    for prefix in (sysconfig.get_path("data"), sys.prefix, sys.base_prefix):
        if prefix:
            out.append(Path(prefix) / "share" / "hanganalyze" / "signatures")
    return out


def builtin_signatures() -> Path:
    """The built-in signature folder (it holds ``schema.json``, ``fragments.yaml`` and ``lists/``)."""
    candidates = _signature_candidates()
    for c in candidates:
        if (c / SCHEMA_FILE).is_file():
            return c
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
