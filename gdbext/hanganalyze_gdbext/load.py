"""Entry point: ``source gdbext/load.py`` (source tree) or ``source .../hanganalyze_gdbext/load.py``
(an installed copy) inside gdb, for a live process or a core.

Imports this file's folder as the package ``hanganalyze_gdbext`` by file location, without putting
any folder on ``sys.path``, so nothing in it can shadow the user's modules; then registers the
commands.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAME = "hanganalyze_gdbext"


def _load_package():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(
        _NAME, os.path.join(_HERE, "__init__.py"), submodule_search_locations=[_HERE]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


_load_package()
importlib.import_module(_NAME + ".commands").register_all()
