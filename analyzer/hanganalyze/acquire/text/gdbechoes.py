"""gdb's echoes of frames it printed already (``gdb.py``): the selected frame it prints on loading a
core, a ``bt`` of the selected thread above ``thread apply all bt``; one thread each, not two."""

from __future__ import annotations

from typing import List, Optional, Tuple

from hanganalyze_gdbext.model import Thread


def without_echoes(threads: List[Thread], headless: List[Thread]) -> List[Thread]:
    """Every thread in print order, less gdb's echoes of a frame it printed again.

    gdb prints the selected frame (#0 ...) when it loads a core, before ``thread apply all``:
    with headed threads present, a headless thread repeating some thread's frame #0 is that echo.
    Likewise a ``bt`` of the selected thread pasted above ``thread apply all bt`` repeats that
    thread's frames whole: one thread, not two."""
    firsts = {(t.frames[0].function, t.frames[0].address) for t in threads if t.frames}
    stacks = {_stack_key(t) for t in threads if t.frames}
    headless = [
        t for t in headless
        if not threads or not (len(t.frames) == 1 and (t.frames[0].function, t.frames[0].address) in firsts
                               or _stack_key(t) in stacks)
    ]
    if not threads:
        # gdb's echo of the stop (a core's frame #0 printed on loading it, "#0 0x.. in f ()", its signal
        # line cut or not) above the ``bt`` it begins: one thread, not two (the ``bt`` may be cut after
        # its own frame #0: the echo is the one-frame thread before a thread with the same top)
        def top(t: Thread) -> Tuple[Optional[str], Optional[int], Optional[int]]:
            return t.frames[0].function, t.frames[0].address, t.frames[0].line
        headless = [t for i, t in enumerate(headless)
                    if not (len(t.frames) == 1 and any(top(x) == top(t) for x in headless[i + 1:] if x.frames))]
    return headless + threads if not threads else threads + headless


def _stack_key(t: Thread) -> tuple:
    return tuple((f.kind, f.function, f.address, f.line) for f in t.frames + t.python_frames)
