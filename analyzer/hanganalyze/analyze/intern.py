"""Work once per distinct stack: interned frames and stacks, and per-process results reused.

A 4,096-rank job of realistic ranks (~10 threads x ~60 frames) holds 2.4 million frames but only a
few hundred distinct stacks: every rank runs the same program.  So:

* ``StackTable`` interns frames and stacks.  Threads whose frames are equal (every field, the
  address included) share one list of shared ``Frame`` objects: the per-thread frames stay in
  memory where existing code reads them (``thread.frames``), at the cost of one list per distinct
  stack.  Each distinct stack also has an *analysis id*: the same stack without the fields no
  analysis reads (addresses, which ASLR makes differ between ranks, notes, modules), so ranks
  whose libraries load at other addresses still share their matching.
* ``match_snapshot``: the signature matching of a process depends only on its threads' analysis
  stacks and names, its messages, libraries, signal and Python version.  Processes with the same
  of those (the ``process_key``) are matched once; the others get a copy of the findings with their
  own tids (``Finding.threads``, evidence threads, "thread N" in the summary) and process index.
  A process whose tids repeat is matched on its own (the tid map would be ambiguous).
* ``snapshot_doc`` / ``expand_stacks`` (``model/stacktable.py``): the JSON of a large job references
  a shared stack table instead of repeating frames (see ``docs/job.md``, "Scale").

Pure functions of the model; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import replace
from operator import attrgetter
from typing import Any, Dict, List, Optional, Tuple

from hanganalyze_gdbext.model import Finding, Frame, Process, Snapshot, Thread
from hanganalyze_gdbext.model.stacktable import EXACT as _EXACT
from hanganalyze_gdbext.model.stacktable import (  # noqa: F401 - the JSON side, named here too
    STACK_TABLE_MIN_PROCESSES,
    attach_stacks,
    expand_stacks,
    snapshot_doc,
)

#: The fields analysis reads: matching (function, library, file, kind, marker), evidence text (line).
_ANALYSIS = attrgetter("kind", "function", "file", "line", "library", "marker")


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
        key = tuple(map(_EXACT, frames))
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
            akey = tuple(map(_ANALYSIS, shared))
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
    """The snapshot's stack table, built (and every thread interned) on first use.  Kept on the
    snapshot object, never serialised; threads added later are interned when first looked up."""
    table = snapshot.__dict__.get("_stack_table")
    if table is None:
        table = StackTable()
        for p in snapshot.processes:
            for t in p.threads:
                table.intern(t)
        snapshot.__dict__["_stack_table"] = table
    return table


def intern_snapshot(snapshot: Snapshot) -> StackTable:
    """Intern every thread of the snapshot (threads with equal stacks share one list of frames)."""
    return table_of(snapshot)


# --------------------------------------------------------------------------------------------
# Matching once per distinct process
# --------------------------------------------------------------------------------------------


def process_key(table: StackTable, p: Process) -> Optional[tuple]:
    """What signature matching reads of a process, tids left out; None when its tids repeat."""
    tids = [t.tid for t in p.threads]
    if len(set(tids)) != len(tids):
        return None
    threads = tuple((table.analysis_id(t), t.name, t.os_name, t.python_name,
                     t.state.gil if t.state is not None else None) for t in p.threads)
    libs = tuple((lib.path, lib.version) for lib in p.libraries)
    return threads, tuple(p.messages), libs, p.signal, (p.python or {}).get("version")


_THREAD_REF = re.compile(r"\bthread (\d+)")


def _remap(f: Finding, index: int, tids: Dict[Any, Any]) -> Finding:
    def tid(x: Any) -> Any:
        return tids.get(x, x)

    summary = _THREAD_REF.sub(lambda m: "thread %s" % tid(int(m.group(1))), f.summary) if f.summary else f.summary
    return replace(f, process=index, threads=[tid(x) for x in f.threads], summary=summary,
                   evidence=[replace(e, thread=tid(e.thread)) if e.thread is not None else replace(e)
                             for e in f.evidence],
                   fix=list(f.fix), references=list(f.references), ranks=list(f.ranks), processes=list(f.processes))


def match_snapshot(snapshot: Snapshot, db) -> List[Finding]:
    """``match.match_snapshot``, with each distinct process (``process_key``) matched once."""
    from hanganalyze.analyze.match import match_process

    table = table_of(snapshot)
    done: Dict[tuple, Tuple[List[Any], List[Finding]]] = {}
    out: List[Finding] = []
    for i, p in enumerate(snapshot.processes):
        key = process_key(table, p) if len(snapshot.processes) > 1 else None
        hit = done.get(key) if key is not None else None
        if hit is None:
            found = match_process(p, i, db)
            if key is not None:
                done[key] = ([t.tid for t in p.threads], found)
            out.extend(found)
            continue
        rep_tids, found = hit
        tids = dict(zip(rep_tids, (t.tid for t in p.threads)))
        out.extend(_remap(f, i, tids) for f in found)
    return out
