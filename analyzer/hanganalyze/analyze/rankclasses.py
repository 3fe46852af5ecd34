"""The equivalence classes of a job's processes (STAT's "process equivalence classes").

4,095 ranks waiting in the same collective are one class and the straggler is another: one reads
one process per class, not 4,096.  Built on the same normalized stacks as the call tree
(``stacks.py``), and by ``calltree.job_view`` from the same pass over the frames.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

from hanganalyze.analyze.framelists import is_interpreter_frame, is_runtime_frame
from hanganalyze.analyze.ranksets import compress_ranks
from hanganalyze.analyze.stacks import Stacks, check_args, main_thread, scan_threads
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Process


def _where(proc: Process) -> str:
    """Where a process is, in one phrase: its main thread's innermost Python frame
    (``function (file:line)``), else the innermost native frame outside libc/libstdc++/CPython."""
    t = main_thread(proc)
    if t is None:
        return ""
    frames = [f for f in t.all_frames() if not f.marker]
    for f in frames:
        if f.kind == "python":
            return frame_text(f, FrameStyle.PLACE)
    for f in frames:
        if not (is_runtime_frame(f) or is_interpreter_frame(f)):
            return frame_text(f, FrameStyle.TREE)
    return frame_text(frames[0], FrameStyle.TREE) if frames else ""


def rank_classes(processes: Sequence[Process], keys: Sequence[int]) -> List[dict]:
    """Equivalence classes of processes doing the same thing (STAT's "process equivalence classes").

    Two processes are equivalent when the multisets of their normalized non-idle thread stacks
    are equal (idle by grouping's rule; the main and current thread always count), so 4,095 ranks
    waiting in the same collective are one class and the straggler is another: one attaches to
    one rank per class, not to 4,096.  Each class is ``{"ranks", "keys", "processes", "size",
    "where"}``, largest first (then by first key)."""
    check_args(processes, keys, "all")
    stacks = Stacks()
    return active_classes(processes, keys, [scan_threads(p, "active", stacks, True)[1] for p in processes])


def active_classes(processes: Sequence[Process], keys: Sequence[int], active: List[List[int]]) -> List[dict]:
    by_sig: Dict[tuple, List[int]] = {}
    for i, sids in enumerate(active):
        counts: Dict[int, int] = {}
        for sid in sids:
            counts[sid] = counts.get(sid, 0) + 1
        sig: tuple = tuple(sorted(counts.items()))
        if processes[i].error:  # a process that could not be read is not "the same" as a healthy one
            sig = ("error",) + sig
        by_sig.setdefault(sig, []).append(i)
    classes = []
    for members in by_sig.values():
        ks = sorted(set(keys[i] for i in members))
        classes.append({"ranks": compress_ranks(ks), "keys": ks, "processes": members, "size": len(members),
                        "where": _where(processes[members[0]])})
    classes.sort(key=lambda c: (-c["size"], c["keys"][0] if c["keys"] else 0))
    return classes
