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
from typing import Any, Dict, List, Optional, Tuple

from hanganalyze.analyze.match import match_process
from hanganalyze.analyze.ruledecl import rule
from hanganalyze_gdbext.model import Finding, Process, Snapshot
from hanganalyze_gdbext.model.stacktable import (  # noqa: F401 - the model's side, named here too
    STACK_TABLE_MIN_PROCESSES,
    StackTable,
    attach_stacks,
    expand_stacks,
    snapshot_doc,
    table_of,
)


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
    # pending asyncio tasks (signatures with ``scope: [tasks]``), by name and stack: ids differ
    tasks = tuple((t.name, tuple((f.function, f.file, f.line) for f in t.coroutine_stack))
                  for t in p.asyncio.all_tasks() if t.state == "pending") if p.asyncio is not None else ()
    return threads, tuple(p.messages), libs, p.signal, p.python.version if p.python is not None else None, tasks


_THREAD_REF = re.compile(r"\bthread (\d+)")


def _clone(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` for the model's plain dataclasses (no ``__post_init__``, no slots),
    without its per-call field walk: a 131,072-rank job copies every finding and its evidence."""
    c = object.__new__(type(obj))
    d = c.__dict__
    d.update(obj.__dict__)
    d.update(changes)
    return c


def _remap(f: Finding, index: int, tids: Dict[Any, Any]) -> Finding:
    def tid(x: Any) -> Any:
        return tids.get(x, x)

    summary = _THREAD_REF.sub(lambda m: "thread %s" % tid(int(m.group(1))), f.summary) \
        if f.summary and "thread " in f.summary else f.summary
    return _clone(f, process=index, threads=[tid(x) for x in f.threads], summary=summary,
                  evidence=[_clone(e, thread=tids.get(e.thread, e.thread)) if e.thread is not None else _clone(e)
                            for e in f.evidence],
                  fix=list(f.fix), references=list(f.references), ranks=list(f.ranks), processes=list(f.processes))


def _names_tasks(db, f: Finding) -> bool:
    sig = db.by_id(f.signature) if db is not None else None
    return sig is not None and sig.uses_tasks()


@rule("signatures", stage="process",
      reads="every thread's frames, the log, libraries and signal (signatures/*.yaml)")
def match_snapshot(snapshot: Snapshot, db) -> List[Finding]:
    """``match.match_snapshot``, with each distinct process (``process_key``) matched once."""
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
        if any(_names_tasks(db, f) for f in found):  # evidence names task ids: this process's own
            out.extend(match_process(p, i, db))
            continue
        tids = dict(zip(rep_tids, (t.tid for t in p.threads)))
        out.extend(_remap(f, i, tids) for f in found)
    return out
