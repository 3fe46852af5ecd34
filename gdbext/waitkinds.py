"""Which kind of wait a stack shows, from native frame names alone (no gdb, no memory).

Kept apart from ``locks.py`` (which reads memory inside gdb) so the patterns can be unit-tested
on recorded stacks, stripped ones included: Debian's ``python3.11`` shows ``take_gil`` as
``??`` but keeps the exported ``PyEval_RestoreThread``; a stripped libc keeps
``pthread_mutex_lock`` and ``__lll_lock_wait`` in ``.dynsym``.
"""

import re
from typing import List, Optional, Tuple

#: Native-frame classifiers, checked innermost first; the first *specific* hit decides, the
#: generic ones (condvar, futex) only when nothing specific is found before Python/eval frames.
CLASSIFIERS: Tuple[Tuple[str, str], ...] = (
    ("gil", r"^(take_gil|PyEval_RestoreThread|PyEval_AcquireThread|PyEval_AcquireLock|PyGILState_Ensure"
            r"|_PyThreadState_Attach)$"),
    ("pyjoin", r"^(ThreadHandle_join|PyThreadHandleObject_join)$"),  # 3.13+ Thread.join
    ("pylock", r"^(rlock_acquire|lock_PyThread_acquire_lock|acquire_timed|PyThread_acquire_lock_timed"
               r"|PyThread_acquire_lock_timed_with_retries"
               r"|PyThread_acquire_lock|_PyMutex_LockTimed|_PyMutex_LockSlow|PyMutex_Lock|lock_acquire_parse_args)$"),
    ("mutex", r"(^|_)(lll_lock_wait|lll_robust_lock_wait|lll_mutex_lock_optimized)(64)?$"
              r"|pthread_mutex_(timed|clock)?lock|^std::(recursive_|timed_)?mutex::lock"
              r"|^__gthread_(recursive_)?mutex_lock"),
    ("rwlock", r"pthread_rwlock_(timed|clock)?(wr|rd)lock"),
    ("join", r"pthread_(clock|timed)?join|^std::thread::join"),
    ("condvar", r"pthread_cond_(timed|clock)?wait|^std::condition_variable::wait|^std::_V2::condition_variable"),
    ("futex", r"futex|sem_(timed|clock)?wait|__new_sem_wait"),
    # 3.13+: CPython's parking lot (PyMutex: threading.Lock, 3.14's RLock; PyEvent: Thread.join).
    # Exported, so named in stripped builds where the callers (rlock_acquire...) are not.
    ("parked", r"^(_PySemaphore_Wait|_PyParkingLot_Park)$"),
)
_COMPILED = [(kind, re.compile(rx)) for kind, rx in CLASSIFIERS]
BY_KIND = dict(_COMPILED)
#: Kinds that decide only when nothing specific is found before the eval frames, best first.
GENERIC = ("parked", "condvar", "futex")
#: Frames that execute Python: the wait belongs to native code called from here, not above it.
EVAL_FRAMES = re.compile(r"^(_PyEval_EvalFrameDefault|_PyEval_EvalFrame|PyEval_EvalFrameEx|_PyEval_Vector)$")
#: Frames that implement the wait itself; the "frame where it waits" is the first frame outside.
IMPL_FRAMES = re.compile(
    r"futex|lll_|pthread_|sem_|^std::(mutex|recursive_mutex|timed_mutex|thread|condition_variable"
    r"|_V2::condition_variable|unique_lock|lock_guard|scoped_lock)\b|^__gthread_|take_gil|PyEval_RestoreThread"
    r"|PyEval_AcquireThread|PyGILState_Ensure|acquire_timed|PyThread_acquire_lock|rlock_acquire"
    r"|lock_PyThread_acquire_lock|_PyMutex|PyMutex|_PySemaphore|_PyParkingLot"
)
#: Libraries whose frames are plumbing, not "where the program waits" (ctypes, ffi, the runtime).
RUNTIME_LIBS = re.compile(r"libpython|/python3[.\d]*$|_ctypes|libffi|/libc\.so|libstdc\+\+")
MAX_SCAN_FRAMES = 48


def classify(names: List[Optional[str]]) -> Tuple[Optional[str], Optional[int], Optional[int]]:
    """(kind, index of the deciding frame, index of the first eval frame) for innermost-first
    function names.  ``kind`` is None for a thread that is not waiting on anything we know."""
    generic: Tuple[Optional[str], Optional[int]] = (None, None)
    for i, name in enumerate(names[:MAX_SCAN_FRAMES]):
        if not name:
            continue
        if EVAL_FRAMES.match(name):
            return generic[0], generic[1], i
        for kind, rx in _COMPILED:
            if rx.search(name):
                if kind not in GENERIC:
                    return kind, i, _first_eval(names, i)
                if generic[0] is None or GENERIC.index(kind) < GENERIC.index(generic[0]):
                    generic = (kind, i)  # a condition variable explains a futex wait better
                break
    return generic[0], generic[1], None


def _first_eval(names: List[Optional[str]], start: int) -> Optional[int]:
    for j in range(start, min(len(names), MAX_SCAN_FRAMES)):
        if names[j] and EVAL_FRAMES.match(names[j] or ""):
            return j
    return None


def bare(name: Optional[str]) -> str:
    """A Python function name without its class (3.11+ frames carry qualnames: "Condition.wait")."""
    return (name or "").rsplit(".", 1)[-1]
