"""C++ names as gdb prints them: the demangler of the C++ runtime (``__cxa_demangle``, the same
libiberty code gdb and c++filt use), called through ctypes for the few names on the stacks.

Without libstdc++ the names stay mangled (and say so by their ``_Z`` prefix); nothing fails.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Dict, Optional

_fn = None
_free = None
_tried = False
_cache: Dict[str, str] = {}
_lock = threading.Lock()  # ranks are read on a thread pool: load the demangler once


def _load() -> bool:
    with _lock:
        return _load_locked()


def _library_names():
    """libstdc++'s soname, and only if that fails the name ``ctypes.util`` finds (it runs
    ``ldconfig -p`` and imports tempfile: ~15 ms that every run paid before it was asked)."""
    yield "libstdc++.so.6"
    from ctypes.util import find_library  # here: ctypes.util imports subprocess etc. (start-up time)

    yield find_library("stdc++")


def _load_locked() -> bool:
    global _fn, _free, _tried
    if _tried:
        return _fn is not None
    _tried = True
    for name in _library_names():
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            fn = lib.__cxa_demangle
            fn.restype = ctypes.c_void_p
            fn.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                           ctypes.POINTER(ctypes.c_int))
            free = ctypes.CDLL(None).free
            free.argtypes = (ctypes.c_void_p,)
            _fn, _free = fn, free
            return True
        except (OSError, AttributeError):
            continue
    return False


def demangle(name: Optional[str]) -> Optional[str]:
    """``_ZNSt6thread4joinEv`` -> ``std::thread::join()``; other names unchanged."""
    if not name or not name.startswith("_Z"):
        return name
    hit = _cache.get(name)
    if hit is not None:
        return hit
    out = name
    if _load():
        base, _sep, _ver = name.partition("@")
        status = ctypes.c_int()
        p = _fn(base.encode("utf-8", "replace"), None, None, ctypes.byref(status))
        if p:
            try:
                out = ctypes.string_at(p).decode("utf-8", "replace")
            finally:
                _free(p)
    _cache[name] = out
    return out
