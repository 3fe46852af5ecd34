"""Stacks as the job view sees them: each frame a normalized one-line label, each thread's stack a
small int, and which thread is a process's main one.

The call tree (``calltree.py``) and the rank classes (``rankclasses.py``) both start here:

* Frames are *normalized* (``frametext.FrameStyle.TREE``): addresses, C++ parameter lists,
  template arguments and clone suffixes differ between builds, hosts and ASLR layouts of the same code, and
  would otherwise split the tree on noise.  Python frames keep their line, because a different
  line *is* a different place in the program.
* CPython's own native frames (``_PyEval_EvalFrameDefault`` ...) are dropped: between two Python
  frames they only add noise, and their number varies with the CPython version.
* Speed: identical raw stacks are normalized once (a cache keyed by the raw frames without
  addresses), and equal normalized stacks share one id, so the rest of the work is on small ints.
* A stack deeper than ``MAX_DEPTH`` is elided in the middle, so every recursive consumer of the
  tree stays bounded.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Dict, List, Optional, Sequence, Tuple

from hanganalyze.analyze.framelists import is_interpreter_frame
from hanganalyze.analyze.grouping import is_idle_stack
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze_gdbext.model import Process, Thread

#: A thread without any frame left after normalization.
NO_FRAMES_LABEL = "<no frames>"
#: Frames per stack kept in the tree (outermost ``DEPTH_HEAD`` + innermost rest, a marker in
#: between).  Keeps every recursive consumer of the tree (jinja2 macros: ~4 Python frames per
#: level; ``json.dumps``) far below Python's recursion limit.
MAX_DEPTH = 96
DEPTH_HEAD = 16
#: Thread selections of ``build_call_tree``.
THREAD_MODES = ("all", "main", "active")

_RAW = attrgetter("kind", "function", "file", "line", "library", "marker")


def main_thread(proc: Process) -> Optional[Thread]:
    """The thread whose tid is the pid, else the one named MainThread, else the first one."""
    if not proc.threads:
        return None
    if proc.pid is not None:
        for t in proc.threads:
            if t.tid == proc.pid:
                return t
    for t in proc.threads:
        if t.name == "MainThread" or t.python_name == "MainThread":
            return t
    return proc.threads[0]


class Stacks:
    """Normalized stacks, interned: raw frames (no addresses) -> stack id -> tuple of label ids.

    Normalizing a frame costs a few regexes; a job repeats the same few stacks thousands of
    times.  Each distinct raw frame is normalized once, each distinct raw stack once, and equal
    normalized stacks share one id, so the rest of the work is on small ints."""

    def __init__(self) -> None:
        self.frame_ids: Dict[tuple, int] = {}  # raw frame -> label id, or -1 when dropped
        self.label_ids: Dict[Tuple[str, str], int] = {}
        self.labels: List[str] = []
        self.kinds: List[str] = []
        self.raw_stacks: Dict[tuple, list] = {}  # raw stack -> [stack id, idle (None: not yet known)]
        self.seq_ids: Dict[Tuple[int, ...], int] = {}
        self.seqs: List[Tuple[int, ...]] = []
        # id(frames list) -> (the list, python frames, entry): threads that share their lists
        # (``analyze/intern.py``) skip the raw key
        self._by_list: Dict[int, tuple] = {}

    def label_id(self, label: str, kind: str) -> int:
        key = (label, kind)
        lid = self.label_ids.get(key)
        if lid is None:
            lid = self.label_ids[key] = len(self.labels)
            self.labels.append(label)
            self.kinds.append(kind)
        return lid

    @staticmethod
    def raw(t: Thread) -> tuple:
        return tuple(map(_RAW, t.frames + t.python_frames if t.python_frames else t.frames))

    def entry(self, t: Thread) -> list:
        """``[stack id, idle or None]`` of a thread: one raw key, one dict look-up."""
        hit = self._by_list.get(id(t.frames))
        if hit is not None and hit[0] is t.frames and hit[1] is (t.python_frames or None):
            return hit[2]
        raw = self.raw(t)
        e = self.raw_stacks.get(raw)
        if e is None:
            e = self.raw_stacks[raw] = [self._normalize(t, raw), None]
        self._by_list[id(t.frames)] = (t.frames, t.python_frames or None, e)
        return e

    def stack_id(self, t: Thread) -> int:
        return self.entry(t)[0]

    @staticmethod
    def is_idle(t: Thread, e: list) -> bool:
        if e[1] is None:
            e[1] = is_idle_stack(t)
        return e[1]

    def _normalize(self, t: Thread, raw: tuple) -> int:
        frames = t.all_frames()
        ids: List[int] = []
        for f, rf in zip(reversed(frames), reversed(raw)):  # outermost first
            lid = self.frame_ids.get(rf)
            if lid is None:
                if f.marker or (f.kind != "python" and is_interpreter_frame(f)):
                    lid = -1
                else:
                    lid = self.label_id(frame_text(f, FrameStyle.TREE), "python" if f.kind == "python" else "native")
                self.frame_ids[rf] = lid
            if lid >= 0 and (not ids or ids[-1] != lid):  # consecutive duplicates collapse
                ids.append(lid)
        if not ids:
            ids = [self.label_id(NO_FRAMES_LABEL, "native")]
        elif len(ids) > MAX_DEPTH:
            tail = MAX_DEPTH - DEPTH_HEAD - 1
            cut = len(ids) - DEPTH_HEAD - tail
            ids = ids[:DEPTH_HEAD] + [self.label_id("… %d frames …" % cut, "native")] + ids[-tail:]
        seq = tuple(ids)
        sid = self.seq_ids.get(seq)
        if sid is None:
            sid = self.seq_ids[seq] = len(self.seqs)
            self.seqs.append(seq)
        return sid


def scan_threads(proc: Process, mode: str, stacks: Stacks, want_active: bool) -> Tuple[List[int], List[int]]:
    """One pass over a process: (stack ids of the threads selected by ``mode``, stack ids of its
    non-idle threads when ``want_active``).  The raw stack key is the costly part (one tuple per
    frame), so the tree and the classes share it when ``job_view`` builds both."""
    main = main_thread(proc)
    if mode == "main" and not want_active:
        return ([stacks.stack_id(main)] if main is not None else []), []
    selected: List[int] = []
    active: List[int] = []
    for t in proc.threads:
        e = stacks.entry(t)
        if mode == "all" and not want_active:
            selected.append(e[0])
            continue
        # grouping's idle rule: the main and the current thread are never idle
        busy = t is main or t.current or not stacks.is_idle(t, e)
        if busy:
            active.append(e[0])
        if mode == "all" or (mode == "active" and busy) or (mode == "main" and t is main):
            selected.append(e[0])
    return selected, active


def check_args(processes: Sequence[Process], keys: Sequence[int], threads: str) -> None:
    """Refuse bad arguments up front, with a message that names them (not a KeyError deep inside)."""
    if len(keys) != len(processes):
        raise ValueError("%d keys for %d processes" % (len(keys), len(processes)))
    bad = next((k for k in keys if not isinstance(k, int) or isinstance(k, bool) or k < 0), None)
    if bad is not None:
        raise ValueError("process key %r is not a rank (a non-negative int)" % (bad,))
    if threads not in THREAD_MODES:
        raise ValueError("threads must be one of %s, not %r" % (", ".join(THREAD_MODES), threads))
