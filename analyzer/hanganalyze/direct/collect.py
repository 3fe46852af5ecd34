"""A ``Process`` from a stopped live process or a core, without gdb: unwind every thread, name
the frames, then hand the same seams gdbext uses (``pyframes.describe_target``,
``merge.merge_thread``, ``locks.annotate_waits``) the direct reader as their ``ProcessTarget``.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from hanganalyze.direct.mapped import MappedProcess
from hanganalyze.direct.symbols import Symbolizing
from hanganalyze.direct.unwind import RawFrame, dwarf_regs, unwind
from hanganalyze_gdbext import facts, locks, merge
from hanganalyze_gdbext.model import UNREADABLE_MARKER, Frame, Process, Thread
from hanganalyze_gdbext.pyasync import build as pyasync
from hanganalyze_gdbext.pyframes import walker
from hanganalyze_gdbext.pyframes.target import FrameView
from hanganalyze_gdbext.pylocks import PyLocks

NORMAL_FRAME, INLINE_FRAME = 0, 2  # gdb's frame type numbers, as merge expects


class DirectNative:
    """What the merge and the lock reader need of a native frame (``gdbext.native.NativeFrame``'s
    fields, with the unwound registers in place of gdb's frame object)."""

    __slots__ = ("frame", "sp", "cfa", "gdb_type", "pc", "raw")

    def __init__(self, frame: Frame, sp: Optional[int], gdb_type: int, pc: int, raw: RawFrame):
        self.frame, self.sp, self.gdb_type, self.pc, self.raw = frame, sp, gdb_type, pc, raw
        self.cfa: Optional[int] = None


class RegsView(FrameView):
    """Registers of one unwound frame (callee-saved ones recovered through the CFI)."""

    def __init__(self, raw: RawFrame):
        self.raw = raw

    def reg(self, name: str) -> Optional[int]:
        return self.raw.reg(name)


def _lookup_pc(frames: List[RawFrame], i: int) -> int:
    """The address that names frame i: its pc for the innermost frame and for the frame a signal
    interrupted, else pc - 1 (inside the call instruction)."""
    if i == 0 or frames[i - 1].signal:
        return frames[i].pc
    return frames[i].pc - 1


def start_naming(raws: Dict[int, List[RawFrame]]) -> Symbolizing:
    wanted: Dict[object, set] = {}
    for frames in raws.values():
        for i, rf in enumerate(frames):
            if rf.module is not None:
                wanted.setdefault(rf.module, set()).add(_lookup_pc(frames, i) - rf.module.bias)
    return Symbolizing(wanted)


def native_frames(target: MappedProcess, raws: Dict[int, List[RawFrame]],
                  naming: Optional[Symbolizing] = None) -> Dict[int, List[DirectNative]]:
    """Named native frames of every thread (inline chains expanded, as gdb lists them)."""
    names = (naming or start_naming(raws)).result()
    exe = target.executable()
    out: Dict[int, List[DirectNative]] = {}
    for tid, frames in raws.items():
        natives: List[DirectNative] = []
        for i, rf in enumerate(frames):
            mod = rf.module
            chain: List[Tuple[Optional[str], Optional[str], Optional[int]]] = [(None, None, None)]
            if mod is not None:
                chain = names.get((mod.path, _lookup_pc(frames, i) - mod.bias)) or chain
            lib = mod.path.replace(" (deleted)", "") if mod is not None else None
            for k, (fn, file_, line) in enumerate(chain):
                inline = k < len(chain) - 1
                fr = Frame(kind="native", function=fn, file=file_, line=line, library=lib, address=rf.pc,
                           inlined=inline, unwind=rf.how)
                natives.append(DirectNative(fr, rf.sp, INLINE_FRAME if inline else NORMAL_FRAME, rf.pc, rf))
        natives = _up_to_main(natives, exe)
        for k in range(len(natives) - 1):
            natives[k].cfa = natives[k + 1].sp
        out[tid] = natives
    return out


def _up_to_main(natives: List[DirectNative], exe: Optional[str]) -> List[DirectNative]:
    """Stop at the executable's ``main``, as gdb does (``backtrace past-main`` is off): what
    lies above it is the C runtime's start-up, the same in every program."""
    for k, n in enumerate(natives):
        if n.frame.function == "main" and not n.frame.inlined and n.frame.library == exe:
            return natives[:k + 1]
    return natives


def collect_process(target: MappedProcess, with_python: bool = True, with_locks: bool = True) -> Process:
    proc = Process(source=target.kind, pid=getattr(target, "pid", None) or None)
    proc.executable = target.executable()
    # unwind first and start naming the frames: the DWARF readers run while the Python walk does
    raws = {tid: unwind(dwarf_regs(regs), target.modules, target.read, regions=target.regions)
            for tid, regs in sorted(target.regs.items())}
    naming = start_naming(raws)
    pyproc = None
    if with_python:
        try:
            pyproc = walker.describe_target(target)
        except Exception as e:  # noqa: BLE001 - a broken runtime must not cost the native stacks
            proc.notes.append("Python runtime could not be read: %s" % e)
    if pyproc is not None and pyproc.version:
        proc.python, notes = facts.python_facts(pyproc, target)
        proc.notes.extend(notes)
    natives_by_tid = native_frames(target, raws, naming)
    activity = PyLocks(pyproc).activity if pyproc is not None else None
    for tid in sorted(raws):
        natives = natives_by_tid[tid]
        t = Thread(tid=tid, os_name=target.names.get(tid))
        t.name = t.os_name
        if pyproc is not None:
            merge.merge_thread(t, natives, pyproc)
            if activity is not None and tid in pyproc.threads:
                try:
                    t.py_activity = activity(tid)
                except Exception:  # noqa: BLE001 - a fingerprint is a bonus; a bad frame costs nothing
                    t.py_activity = None
        else:
            t.frames = [n.frame for n in natives]
            t.merge = "native-only"
        last = raws[tid][-1] if raws[tid] else None
        if last is not None and last.stop and natives and natives[-1].raw is last:
            marker = Frame(kind="native", function=UNREADABLE_MARKER, marker=True,
                           note="unwind stopped: %s" % last.stop)
            t.frames.append(marker)
            t.notes.append(marker.note or "")
        if last is not None and last.gave_up and natives and natives[-1].raw is last:
            t.unwind_stop = last.gave_up  # not when the listing ends at main, before the last frame
        proc.threads.append(t)
    if proc.threads:
        proc.threads[0].current = True
    pyasync.attach(proc, pyproc)  # asyncio tasks: their stacks are on no thread
    if with_locks:
        # one view per listed frame (inline ones share their real frame's registers), as gdb's list
        by_tid = {tid: [RegsView(n.raw) for n in natives] for tid, natives in natives_by_tid.items()}
        try:
            locks.annotate_waits(proc, natives_by_tid, pyproc, target, lambda tid, count: by_tid.get(tid, [])[:count])
        except Exception as e:  # noqa: BLE001
            proc.notes.append("lock analysis failed: %s" % e)
    return proc
