"""Per-version layouts asyncio needs (x86-64), as plain data, like ``pyframes/tables.py``.

The C ``_asyncio`` module's ``TaskObj``/``FutureObj`` and the generator/frame fields that say
where a suspended coroutine stopped are not in ``_Py_DebugOffsets`` (3.14's ``_AsyncioDebug``
covers only part of the task), so they are data here, read from the DWARF of the pyenv builds
3.8.18 ... 3.13.0 and of the scripts/pythons.sh builds 3.14.4 / 3.13t / 3.14t
(``ptype /o TaskObj`` on ``_asyncio*.so``, ``ptype /o PyGenObject`` on libpython), and checked
by ``tests/unit/test_pyasync_own.py`` (each interpreter reads its own tasks through them).

Keys: ``task.*`` / ``fut.*`` the C Task / Future (``fut.*`` are the same offsets for a Future),
``gen.*`` PyGenObject (coroutines and generators share it), ``fo.*`` PyFrameObject (3.8-3.10
stack top), ``ifr.*`` _PyInterpreterFrame (3.11+), ``func.*`` PyFunctionObject, ``set.*``
PySetObject, ``ts.asyncio_*`` / ``is.asyncio_*`` 3.14's per-thread task lists.
Free-threaded builds: every object-relative key moves by the larger header (``ft_shift``).
"""

from typing import Dict, Optional, Tuple

Table = Dict[str, int]

_COMMON: Table = {
    "task.loop": 16, "task.callback0": 24, "task.callbacks": 40,
    "func.qualname": 40, "func.closure": 72,
    "set.mask": 32, "set.table": 40,
    "futiter.future": 16,  # futureiterobject.future: what ``await fut`` suspends on (C Future)
    "asend.gen": 16,  # PyAsyncGenASend.ags_gen
    "tp.base": 256,
}

#: Generator frame states (``gi_frame_state``) as ints, per version family.
_LAYOUTS: Dict[Tuple[int, int], Table] = {
    (3, 8): dict(_COMMON, **{"task.state": 72, "task.fut_waiter": 104, "task.coro": 112, "task.name": 120,
                             "func.qualname": 104, "func.closure": 48,
                             "gen.frame": 16, "gen.qualname": 56, "fo.valuestack": 64, "fo.stacktop": 72}),
    (3, 9): dict(_COMMON, **{"task.state": 80, "task.fut_waiter": 144, "task.coro": 152, "task.name": 160,
                             "func.qualname": 104, "func.closure": 48,
                             "gen.frame": 16, "gen.qualname": 56, "fo.valuestack": 64, "fo.stacktop": 72}),
    (3, 10): dict(_COMMON, **{"task.state": 88, "task.fut_waiter": 152, "task.coro": 160, "task.name": 168,
                              "gen.frame": 16, "gen.qualname": 48, "fo.valuestack": 64, "fo.stackdepth": 80,
                              "fo.state": 108,
                              "state.suspended": -1}),
    (3, 11): dict(_COMMON, **{"task.state": 88, "task.fut_waiter": 128, "task.coro": 136, "task.name": 144,
                              "gen.frame_state": 75, "gen.iframe": 80, "ifr.stacktop": 64,
                              "state.suspended": -1}),
    (3, 12): dict(_COMMON, **{"task.state": 88, "task.fut_waiter": 128, "task.coro": 136, "task.name": 144,
                              "gen.frame_state": 67, "gen.iframe": 72, "ifr.stacktop": 64,
                              "state.suspended": -1}),
    (3, 13): dict(_COMMON, **{"task.state": 96, "task.fut_waiter": 112, "task.coro": 120, "task.name": 128,
                              "gen.frame_state": 67, "gen.iframe": 72, "ifr.stacktop": 64,
                              "state.yield_from": -1}),
    (3, 14): dict(_COMMON, **{"task.state": 104, "task.fut_waiter": 120, "task.coro": 128, "task.name": 136,
                              "task.node": 152, "gen.frame_state": 67, "gen.iframe": 72, "ifr.stackpointer": 64,
                              "state.yield_from": -1,
                              "ts.asyncio_running_loop": 864, "ts.asyncio_tasks_head": 880,
                              "is.asyncio_tasks_head": 10856}),
}

#: Keys inside an object (after PyObject_HEAD): they move with a free-threaded build's header.
_OBJECT_PREFIXES = ("task.", "func.", "set.", "futiter.", "asend.", "tp.", "gen.")

#: Free-threaded builds: what is not a plain header shift (from the 3.14t DWARF / _AsyncioDebug).
_FT_EXTRA: Dict[Tuple[int, int], Table] = {
    (3, 14): {"is.asyncio_tasks_head": 17632},
}

#: 3.14's ``_AsyncioDebug`` (section ``.AsyncioDebug`` of ``_asyncio``): field order of
#: ``Py_AsyncioModuleDebugOffsets``, 13 uint64 (``size`` fields included), and the keys they set.
ASYNCIO_DEBUG_FIELDS = (
    None, "task.name", None, None, None, "task.coro", "task.node",
    None, "is.asyncio_tasks_head",
    None, "ts.asyncio_running_loop", None, "ts.asyncio_tasks_head",
)


def layout_for(version: Tuple[int, int], free_threaded: bool = False, ob_head: int = 32) -> Optional[Table]:
    """The asyncio layout of a CPython minor version (newer than known: the newest), or None."""
    t = _LAYOUTS.get(version)
    if t is None and version > max(_LAYOUTS):
        t = _LAYOUTS[max(_LAYOUTS)]
    if t is None:
        return None
    out = dict(t)
    if free_threaded:
        delta = ob_head - 16
        for k in out:
            if k.startswith(_OBJECT_PREFIXES):
                out[k] += delta
        out.update(_FT_EXTRA.get(version, {}))
    return out
