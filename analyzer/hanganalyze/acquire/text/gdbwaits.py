"""Native lock waits and their owners in a pasted gdb session, from what gdb printed.

Why: a paste has no memory to read, but gdb printed what the wait-for graph needs: the mutex a
thread waits for as its wait frame's argument (``pthread_mutex_lock (mutex=0x55..)``,
``__lll_lock_wait (futex=0x55.., private=0)``: the futex word is the mutex's first field, so one
address) and, where the user asked, the mutex's owner (``p *(pthread_mutex_t *) 0x55..`` ->
``{__data = {__lock = 2, __count = 0, __owner = 24352, ...``; ``p mutex->__data.__owner`` ->
``$3 = 24352``).  The wait is recorded as a live capture records it (``Thread.waits``), the owner
joined to the thread with that LWP; the evidence says it came from a paste
(``Wait.owner_inferred``), which the deadlock finding weighs below memory's proof.  Likewise the
GIL a wait frame's argument names (``gil_wait``) and the fatal error's message CPython's fatal-error
function was given (``fatal_message``).
"""

from __future__ import annotations

import re
from typing import Dict, Optional

from hanganalyze.names import normalize_native_name, wait_name
from hanganalyze_gdbext.model import Frame, Process, Thread, Wait

#: Frames whose first argument is the mutex (or its futex word) a thread waits for.
_LOCK_FRAMES = frozenset(("pthread_mutex_lock", "pthread_mutex_timedlock", "pthread_mutex_clocklock",
                          "pthread_mutex_lock_full", "lll_lock_wait", "lll_mutex_lock_optimized",
                          "mutex_lock_full", "lll_lock_wait_private", "PyThread_acquire_lock",
                          "PyThread_acquire_lock_timed"))
_ARG = re.compile(r"\b(?:mutex|futex|__mutex|lock)=(?:\w{1,20}@entry=)?(0x[0-9a-fA-F]{1,16})(?: <([^<>\s]{1,200})>)?")
#: The innermost frames where a lock wait is looked for.
_WITHIN = 8
#: ``(gdb) p *(pthread_mutex_t *) 0x55..`` / ``p ((pthread_mutex_t*)0x55..)->__data.__owner``.
_PRINT = re.compile(r"^(?:\(gdb\)\s*)?(?:p|print|output|x)(?:/\w+)?\s+.{0,80}?(0x[0-9a-fA-F]{1,16})")
_OWNER_FIELD = re.compile(r"\b__owner = (\d{1,9})\b")
_VALUE = re.compile(r"^\$\d{1,6} = (\d{1,9})$")


def mutex_wait(t: Thread, body: str) -> None:
    """Record the mutex a lock-wait frame's printed argument names as the thread's wait (the
    innermost such frame; a GIL wait recorded before wins)."""
    i = len(t.frames) - 1
    if t.waits is not None or i >= _WITHIN:
        return
    name = wait_name(normalize_native_name(t.frames[i].function or ""))
    if name not in _LOCK_FRAMES:
        return
    m = _ARG.search(body)
    if m is None:
        return
    symbol = m.group(2)
    if symbol and re.match(r"(gil_|switch_|_PyRuntime)", symbol):
        return  # the GIL's mutex: gdb.py's _gil_wait
    t.waits = Wait(kind="mutex", resource=m.group(1).lower(), name=symbol, frame=i,
                   detail="gdb printed the mutex's address as this wait's argument (%s)" % m.group(0))


class OwnerPrints:
    """``__owner`` values gdb printed after a print command that names a mutex's address."""

    def __init__(self) -> None:
        self.address: Optional[str] = None
        self.owner_field = False
        self.owners: Dict[str, int] = {}

    def line(self, s: str) -> bool:
        """Read one line; True when it was a print command or its owner value (consumed)."""
        m = _PRINT.match(s)
        if m and (s.startswith("(gdb)") or s.startswith(("p ", "print "))):
            self.address = m.group(1).lower()
            self.owner_field = "__owner" in s
            return True
        if self.address is None:
            return False
        m = _OWNER_FIELD.search(s)
        if m is None and self.owner_field:
            m = _VALUE.match(s)
        if m is not None:
            self.owners.setdefault(self.address, int(m.group(1)))
            self.address = None
        return False

    def apply(self, proc: Process) -> None:
        """Join each printed owner to the thread that waits for that mutex and the one that holds it."""
        if not self.owners:
            return
        tids = {t.tid for t in proc.threads if t.tid is not None}
        for t in proc.threads:
            w = t.waits
            if w is None or w.kind != "mutex" or w.owner_tid is not None or w.resource not in self.owners:
                continue
            owner = self.owners[w.resource or ""]
            if owner == 0 or owner not in tids or owner == t.tid:
                continue  # unlocked, a thread not in the paste, or a recursive wait on itself
            w.owner_tid = owner
            w.owner_inferred = "gdb printed __owner = %d for mutex %s (read from a paste, not from memory)" % (
                owner, w.resource)
            w.detail = "%s; held by LWP %d (gdb printed its __owner)" % (w.detail or "", owner)


#: CPython's GIL as gdb names it in a wait's arguments: the static ``gil_cond`` / ``gil_mutex`` (3.2-3.6;
#: ``switch_cond`` / ``switch_mutex`` for the forced switch) or a condition variable / mutex inside
#: ``_PyRuntime`` (3.7-3.11: ``_PyRuntime.ceval.gil``; 3.12+: the main interpreter's ``_gil``, inside it
#: too), as the ``cond=`` / ``mutex=`` / ``futex_word=`` of a wait frame.  CPython's other locks are
#: PyThread locks on the heap; other ``_PyRuntime`` fields (``gilstate=``, ``ceval=``) are no wait.
_GIL_ARG = re.compile(r"\b(?:cond|mutex|futex_word)=(?:\w{1,20}@entry=)?0x[0-9a-fA-F]{1,16} "
                      r"<(gil_cond|gil_mutex|switch_cond|switch_mutex|_PyRuntime)(\+\d{1,7})?>")
_WAIT_FRAME = re.compile(r"cond_\w*wait|futex|mutex_\w*lock|lll_lock")
#: The innermost frames where a GIL wait is looked for.
_GIL_WITHIN = 8

#: CPython's fatal-error functions: gdb prints the message they were given as a string argument
#: (``fatal_error (..., prefix=0x.. <__func__.13> "_PyMem_DebugFree", msg=0x.. "Python memory ...")``),
#: which is the "Fatal Python error: PREFIX: MSG" line a paste of the backtrace alone lacks.
_FATAL_FUNCS = ("fatal_error", "_Py_FatalErrorFunc", "Py_FatalError", "_Py_FatalErrorFormat")
_STR_ARG = r"=(?:\w{1,20}@entry=)?0x[0-9a-fA-F]{1,16}(?: <[^<>\n]{0,200}>)? \"((?:[^\"\\]|\\.){1,2000})\""
_FATAL_PREFIX = re.compile(r"\b(?:prefix|func)" + _STR_ARG)
_FATAL_MSG = re.compile(r"\b(?:msg|format)" + _STR_ARG)


def gil_wait(t: Thread, body: str) -> None:
    """A wait frame (condition variable, futex, mutex) whose arguments gdb printed as the GIL's
    (``cond=0x.. <_PyRuntime+384>``, ``<gil_cond>``): the thread waits for the GIL, even where the
    paste stops before ``take_gil``.  Recorded as the thread's wait, as a live capture does."""
    i = len(t.frames) - 1
    if t.waits is not None or i >= _GIL_WITHIN or not _WAIT_FRAME.search(t.frames[i].function or ""):
        return
    m = _GIL_ARG.search(body)
    if m:
        t.waits = Wait(kind="gil", name="GIL", frame=i, detail="gdb printed the GIL's condition variable or "
                       "mutex (<%s%s>) as this wait's argument" % (m.group(1), m.group(2) or ""))


def fatal_message(proc: Process, f: Frame, body: str) -> None:
    """CPython's fatal error, from the message gdb printed as its function's argument: the log line
    "Fatal Python error: PREFIX: MSG" that message rules (and the triage) read."""
    if f.function not in _FATAL_FUNCS:
        return
    msg = _FATAL_MSG.search(body)
    if not msg:
        return
    prefix = _FATAL_PREFIX.search(body)
    line = "Fatal Python error: %s%s" % ((prefix.group(1) + ": ") if prefix else "", msg.group(1))
    if line not in proc.messages:
        proc.messages.append(line)
