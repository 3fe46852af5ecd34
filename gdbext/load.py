"""``source gdbext/load.py`` inside gdb or cuda-gdb: runs the package's own entry script,
``hanganalyze_gdbext/load.py``, which imports the extension by file location (nothing is put on
``sys.path``) and registers the ``hang-*`` commands."""

import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hanganalyze_gdbext", "load.py"))
