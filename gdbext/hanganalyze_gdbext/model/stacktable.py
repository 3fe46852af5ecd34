"""The shared stack table of a ``hanganalyze/1`` document (additive to the contract).

A 4,096-rank job repeats the same few stacks thousands of times.  A document of
``STACK_TABLE_MIN_PROCESSES`` processes or more therefore writes each distinct list of frames once,
in a top-level ``"stacks"`` (a list of frame lists, each frame as ``Frame.to_dict`` writes it), and
each thread names its entry: ``"stack": i`` in place of ``"frames"`` (``"python_stack": i`` in
place of ``"python_frames"``).  Smaller documents keep the frames inline, as always.

* ``snapshot_doc(snapshot)``: the document, with the table when the snapshot is that large;
* ``expand_stacks(doc)``: the old shape back (every thread's frames inline), for readers of the
  first version: ``json.load`` then ``expand_stacks``;
* ``attach_stacks(snapshot, doc, stacks)``: reading (``acquire/snapshot_json.py``): each entry
  becomes one list of ``Frame`` objects shared by its threads.

Runs inside gdb: standard library only, Python 3.8.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Dict, List

from . import Frame, Snapshot

#: Processes from which a document references the stack table instead of repeating frames.
STACK_TABLE_MIN_PROCESSES = 64

#: Every field of a frame (two frames with the same values are the same frame).
EXACT = attrgetter("kind", "function", "file", "line", "library", "address", "module", "inlined", "note",
                   "marker", "unwind")


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
