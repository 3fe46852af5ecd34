"""Whether a dump could show the threads a signature's counting rule says are absent.

Why: a rule like "no BLAS worker thread" (``max: 0``) is evidence only where every thread of the
process was captured (a live process, a core, ``thread apply all bt``).  A pasted ``bt`` of one
thread (no ``Thread N`` header, no thread id or name) never printed the others: their absence is
not observed, so a clause that leans on it answers at most ``CAP`` (below a confident answer) and
says why.  The OpenBLAS caller spinning in ``exec_blas_async_wait`` is such a case: in a forked
child its pool threads are gone, but a plain ``bt`` of the caller looks the same while they live.
"""

from __future__ import annotations

from hanganalyze.loglines import NO_THREAD_DB_NOTE
from hanganalyze_gdbext.model import Process

#: The highest confidence a clause keeps when a counting rule's "none" was not observable.
CAP = 0.6
#: What the finding says about it.
NOTE = ("the text shows one thread (a `bt` of one thread, or gdb without thread debugging), so the other "
        "threads' absence is not observed")


def unseen(process: Process) -> bool:
    """True when the process is one pasted thread without a header, or under gdb's header of a
    session without thread debugging (``Thread 1 (process N)``: gdb saw no other thread, open round
    74's JNI caller of OpenBLAS): its other threads, if any, were never printed.  ``thread apply all``'s
    one thread under a full header is the whole process (a forked child's single thread)."""
    threads = process.threads
    return (process.source == "text" and len(threads) == 1
            and ((threads[0].tid is None and threads[0].name is None) or NO_THREAD_DB_NOTE in threads[0].notes))
