"""hanganalyze's gdb extension: merged Python + native stacks, GIL/GC and lock facts, JSON snapshots.

Runs inside gdb's embedded Python: standard library only, Python 3.8 syntax.  Modules that touch
the ``gdb`` module import it lazily so that ``model`` stays importable from the analyzer.
"""
