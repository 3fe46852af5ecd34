"""The direct reader: threads, registers and memory straight from ``/proc`` (ptrace) or a core,
native unwinding through ``.eh_frame``, symbols looked up only for the addresses on the stacks.

Why beside gdb: gdb reads, demangles and indexes every symbol of every library before it shows
one frame: most of the time and memory of a PyTorch rank's dump, whose libraries hold 620,000
symbols (``BENCHMARKS.md``).
py-spy and pystack answer in under a second because they only look at the addresses on the
stacks; so does this package.  It feeds the same CPython walker (``gdbext/pyframes``), merge and
lock reader as the gdb path through ``gdbext.target.ProcessTarget``, so both paths agree by
construction on everything but the native unwind and symbol lookup, which tests compare.

gdb stays the engine for ``--gdb cuda-gdb``, the in-gdb commands, other architectures and
wherever this reader gives up (``DirectUnsupported``).
"""

import hanganalyze_gdbext
from hanganalyze import rxcache

# gdbext's wait-kind patterns (``waitkinds``, imported by the lock reader) compiled from the cached
# opcodes, as the analyzer's own are (start-up time, issue 21); inside gdb they stay re.compile's.
hanganalyze_gdbext.compile_pattern = rxcache.compile


class DirectUnsupported(Exception):
    """This input needs gdb (another architecture, a compressed/odd core...): not a user error."""
