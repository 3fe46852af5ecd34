"""pthread_t -> LWP: the one map that the CPython walker (``threading`` idents, thread states
without ``native_thread_id``) and the lock reader (join targets, RLock owners) use, so that both
name the same thread for the same pthread_t.  Standard library only, no ``gdb`` import."""

import struct
from typing import Dict, Optional, Set

from .target import ProcessTarget

#: glibc x86-64 ``struct pthread``: offset of ``tid`` (0x2d0 in glibc 2.17 ... 2.39).  Only used
#: as a last resort and only when the value read is one of the process's own LWPs.
GLIBC_PTHREAD_TID = 0x2D0


class LwpMap:
    """pthread_t -> LWP for every thread the target knows, computed once.

    The target's ``thread_handles`` (gdb: ``InferiorThread.handle()``, needs libthread_db; the
    direct reader: each thread's ``fs_base``, which is its pthread_t on x86-64 glibc) first, its
    ``lwp_of_handle`` as the per-ident fallback; without either (a core from another machine
    under gdb) the TID field of glibc's ``struct pthread`` is read and accepted only if it names a
    thread of this process."""

    def __init__(self, target: Optional[ProcessTarget]):
        self.target = target
        self.by_handle: Dict[int, Optional[int]] = {}
        self.lwps: Set[int] = set()
        if target is None:
            return
        self.lwps = set(target.lwps())
        for lwp, h in target.thread_handles().items():
            self.lwps.add(lwp)
            if h:
                self.by_handle[h] = lwp

    def lookup(self, ident: Optional[int]) -> Optional[int]:
        if not ident or self.target is None:
            return None
        if ident not in self.by_handle:
            lwp = self.target.lwp_of_handle(ident)
            if lwp is None:
                lwp = self._glibc_tid(ident)
            self.by_handle[ident] = lwp
        return self.by_handle[ident]

    def _glibc_tid(self, ident: int) -> Optional[int]:
        if not 4096 <= ident < 1 << 63:  # not a pointer
            return None
        try:
            tid = struct.unpack("<I", bytes(self.target.read_memory(ident + GLIBC_PTHREAD_TID, 4)))[0]
        except Exception:  # noqa: BLE001 - gdb.MemoryError, OSError, ValueError: unreadable either way
            return None
        return tid if tid in self.lwps else None
