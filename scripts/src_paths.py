"""Point the virtual environment at the two import folders, ``analyzer/`` and ``gdbext/``.

``pip install -e . --config-settings editable_mode=compat`` installs the metadata and the
``hanganalyze`` command with a ``.pth`` file that names the repository root; this rewrites that file
to name the two folders the packages live in (src-layout style). A plain path entry, not an import
hook: pyright, mypy and ruff see the same packages Python imports.
"""

import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    site = Path(sysconfig.get_path("purelib"))
    pths = sorted(site.glob("__editable__.hanganalyze-*.pth"))
    if not pths:
        print("src_paths: no editable hanganalyze install in %s" % site, file=sys.stderr)
        return 1
    text = "".join("%s\n" % (REPO / d) for d in ("analyzer", "gdbext"))
    for pth in pths:
        pth.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
