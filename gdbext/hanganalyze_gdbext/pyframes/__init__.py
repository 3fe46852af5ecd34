"""Reading CPython's own state (interpreters, threads, Python frames) from a live process or a
core, without DWARF and without running code in the inferior.

One module per concern:

* ``tables``        per-version struct offsets (x86-64, 3.8-3.14), plain data;
* ``debug_offsets`` the ``_Py_DebugOffsets`` table CPython 3.13+ carries at ``&_PyRuntime``;
* ``linetable``     line numbers from lnotab (3.8/3.9), linetable (3.10), locations (3.11+);
* ``objects``       raw-memory readers for str/bytes/int/dict/instance attributes;
* ``runtime``       finding ``_PyRuntime`` and the version through gdb (symbol, section, scan);
* ``target``        ``ProcessTarget``/``FrameView``: what the walkers read through (gdb: ``../gdbtarget.py``,
                    the direct reader: ``hanganalyze/direct/mapped.py``);
* ``lwpmap``        pthread_t -> LWP through glibc's ``struct pthread``;
* ``process``       ``PyProcess``/``PyThreadInfo``/``PyGroup``: what the walker finds;
* ``framewalk``     one thread's Python frames (``FrameWalker``);
* ``walker``        ``describe_target(target)``: the seam (``gdbtarget.describe_process`` for gdb).

``merge.py`` (one level up) places the walker's frames among the native ones.
"""
