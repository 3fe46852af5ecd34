"""hanganalyze's gdb extension: merged Python + native stacks, GIL/GC and lock facts, JSON snapshots.

Runs inside gdb's embedded Python: standard library only, Python 3.8 syntax.  Modules that touch
the ``gdb`` module import it lazily so that ``model`` stays importable from the analyzer.
"""

import re

#: How gdbext's modules compile their fixed patterns (``waitkinds``): ``re.compile`` inside gdb; the
#: analyzer's direct reader sets its own, which keeps the parse across runs (``hanganalyze.rxcache``),
#: before it imports them (start-up time, issue 21).
compile_pattern = re.compile
