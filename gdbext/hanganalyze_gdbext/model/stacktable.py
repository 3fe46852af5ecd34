"""The shared stack table of a ``hanganalyze/1`` document (additive to the contract).

A 4,096-rank job repeats the same few stacks thousands of times.  A document of
``STACK_TABLE_MIN_PROCESSES`` processes or more therefore writes each distinct list of frames once,
in a top-level ``"stacks"`` (a list of frame lists, each frame as ``Frame.to_dict`` writes it), and
each thread names its entry: ``"stack": i`` in place of ``"frames"`` (``"python_stack": i`` in
place of ``"python_frames"``).  Smaller documents keep the frames inline, as always.

* ``snapshot_doc(snapshot)``: the document, with the table when the snapshot is that large;
* ``expand_stacks(doc)``: the old shape back (every thread's frames inline), for readers of the
  first version: ``json.load`` then ``expand_stacks``;
* ``StackTable`` / ``table_of(snapshot)``: frames and stacks interned (threads with equal stacks
  share one list of shared ``Frame`` objects; ``analysis_id`` ignores the fields no analysis reads,
  such as ASLR'd addresses), built by acquisition as inputs come in or on first use;
* ``attach_stacks(snapshot, doc, stacks)``: reading (``acquire/snapshot_json.py``): each entry
  becomes one list of ``Frame`` objects shared by its threads.

Runs inside gdb: standard library only, Python 3.8.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Dict, List, Tuple

from . import Frame, Snapshot, Thread

#: Processes from which a document references the stack table instead of repeating frames.
STACK_TABLE_MIN_PROCESSES = 64

#: Every field of a frame (two frames with the same values are the same frame).
EXACT = attrgetter("kind", "function", "file", "line", "library", "address", "module", "inlined", "note",
                   "marker", "unwind")


#: The fields analysis reads: matching (function, library, file, kind, marker), evidence text (line).
ANALYSIS = attrgetter("kind", "function", "file", "line", "library", "marker")


class StackTable:
    """Distinct frames and stacks of a snapshot (see the module doc).  ``intern(thread)`` makes the
    thread share the table's lists; ``analysis_id(thread)`` is equal for threads the analysis cannot
    tell apart."""

    def __init__(self) -> None:
        self.frames: Dict[tuple, Frame] = {}
        self.lists: List[List[Frame]] = []  # distinct exact stacks
        self._by_key: Dict[tuple, int] = {}
        self._by_id: Dict[int, int] = {}  # id(list) -> index (the list is held in ``lists``)
        self._analysis: List[int] = []  # exact index -> analysis id
        self._by_akey: Dict[tuple, int] = {}

    def index(self, frames: List[Frame]) -> int:
        """The index of this list of frames in ``lists`` (interned on first sight)."""
        i = self._by_id.get(id(frames))
        if i is not None and self.lists[i] is frames:
            return i
        key = tuple(map(EXACT, frames))
        i = self._by_key.get(key)
        if i is None:
            shared = []
            for k, f in zip(key, frames):
                g = self.frames.get(k)
                if g is None:
                    g = self.frames[k] = f
                shared.append(g)
            i = self._by_key[key] = len(self.lists)
            self.lists.append(shared)
            self._by_id[id(shared)] = i
            akey = tuple(map(ANALYSIS, shared))
            self._analysis.append(self._by_akey.setdefault(akey, len(self._by_akey)))
        return i

    def intern(self, t: Thread) -> None:
        t.frames = self.lists[self.index(t.frames)]
        if t.python_frames:
            t.python_frames = self.lists[self.index(t.python_frames)]

    def analysis_id(self, t: Thread) -> Tuple[int, int]:
        py = self._analysis[self.index(t.python_frames)] if t.python_frames else -1
        return self._analysis[self.index(t.frames)], py

    @property
    def distinct(self) -> int:
        return len(self._by_akey)


def table_of(snapshot: Snapshot) -> StackTable:
    """The snapshot's stack table, built (every thread interned) on first use.  Kept on the snapshot
    (``Snapshot.stack_table``, a transient field: never serialised); acquisition may set it
    (``set_table``) so that the threads it interned as they came in are not hashed again; threads
    added later are interned when first looked up."""
    table = snapshot.stack_table
    if table is None:
        table = StackTable()
        for p in snapshot.processes:
            for t in p.threads:
                table.intern(t)
        set_table(snapshot, table)
    return table


def set_table(snapshot: Snapshot, table: StackTable) -> None:
    snapshot.stack_table = table


def _index_error(i: Any) -> ValueError:
    return ValueError("thread stack index %r out of range" % (i,))


def _valid(i: Any, n: int) -> bool:
    return isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n


def snapshot_doc(snapshot: Snapshot, min_processes: int = STACK_TABLE_MIN_PROCESSES) -> Dict[str, Any]:
    """``snapshot.to_dict()``, with a ``"stacks"`` table when it has ``min_processes`` processes or
    more.  Threads that share a list of frames (``analyze/intern.py`` interns them) cost one dict
    look-up; others are compared by content."""
    if len(snapshot.processes) < min_processes:
        return snapshot.to_dict()
    saved = []
    for p in snapshot.processes:  # serialise without frames: each distinct stack is written once
        for t in p.threads:
            saved.append((t, t.frames, t.python_frames))
            t.frames, t.python_frames = [], []
    try:
        doc = snapshot.to_dict()
    finally:
        for t, frames, py in saved:
            t.frames, t.python_frames = frames, py
    by_id: Dict[int, tuple] = {}
    by_key: Dict[tuple, int] = {}
    stacks: List[List[Dict[str, Any]]] = []

    def ref(frames: List[Frame]) -> int:
        hit = by_id.get(id(frames))
        if hit is not None and hit[0] is frames:
            return hit[1]
        key = tuple(map(EXACT, frames))
        i = by_key.get(key)
        if i is None:
            i = by_key[key] = len(stacks)
            stacks.append([f.to_dict() for f in frames])
        by_id[id(frames)] = (frames, i)
        return i

    for p, pd in zip(snapshot.processes, doc["processes"]):
        for t, td in zip(p.threads, pd["threads"]):
            td.pop("frames", None)
            td["stack"] = ref(t.frames)
            if t.python_frames:
                td.pop("python_frames", None)
                td["python_stack"] = ref(t.python_frames)
    doc["stacks"] = stacks
    return doc


def expand_stacks(doc: Dict[str, Any]) -> Dict[str, Any]:
    """A document with a ``"stacks"`` table in the shape readers of the first version know: every
    thread's ``"frames"`` (and ``"python_frames"``) inline, the table and the indices gone.  Threads
    with the same stack share one list.  A document without a table is returned as it is; a bad
    index is a ``ValueError``."""
    stacks = doc.get("stacks")
    if stacks is None:
        return doc
    if not isinstance(stacks, list):
        raise ValueError("stacks: expected a list")
    out = {k: v for k, v in doc.items() if k != "stacks"}
    procs = []
    for p in doc.get("processes") or []:
        if not isinstance(p, dict) or not isinstance(p.get("threads"), list):
            procs.append(p)
            continue
        threads = []
        for t in p["threads"]:
            if isinstance(t, dict) and ("stack" in t or "python_stack" in t):
                t = dict(t)
                for key, name in (("stack", "frames"), ("python_stack", "python_frames")):
                    if key in t:
                        i = t.pop(key)
                        if not _valid(i, len(stacks)):
                            raise _index_error(i)
                        t[name] = stacks[i]
            threads.append(t)
        procs.append(dict(p, threads=threads))
    out["processes"] = procs
    return out


def attach_stacks(snapshot: Snapshot, doc: Dict[str, Any], stacks: Any) -> None:
    """``snapshot`` was read from ``doc`` without its table: give each thread whose ``"stack"`` /
    ``"python_stack"`` names an entry that entry's frames, one list of ``Frame`` objects per entry
    shared by its threads.  A malformed table or index is a ``ValueError``."""
    if not isinstance(stacks, list) or not all(isinstance(s, list) for s in stacks):
        raise ValueError("stacks: expected a list of frame lists")
    lists: Dict[int, List[Frame]] = {}

    def get(i: Any) -> List[Frame]:
        if not _valid(i, len(stacks)):
            raise _index_error(i)
        if i not in lists:
            lists[i] = [Frame.from_dict(f) for f in stacks[i]]
        return lists[i]

    for p, pd in zip(snapshot.processes, doc.get("processes") or []):
        tds = pd.get("threads") if isinstance(pd, dict) else None
        for t, td in zip(p.threads, tds if isinstance(tds, list) else []):
            if isinstance(td, dict) and "stack" in td:
                t.frames = get(td["stack"])
            if isinstance(td, dict) and "python_stack" in td:
                t.python_frames = get(td["python_stack"])
