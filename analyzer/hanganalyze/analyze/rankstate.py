"""Where is each rank: waiting in a collective (which one, called from where), in a device sync
after one, in the rendezvous, or elsewhere (and where).

This is the per-process half of the job view: a pure function of one Process.  The cross-rank
half (``job.py``) compares these states.  The rules, innermost frame first, main thread first:

* **collective**: a Python frame of ``torch/distributed/distributed_c10d.py`` whose function is a
  collective (``all_reduce``, ``broadcast`` ...; the op), or a native frame of a collective wait
  (gloo's ``UnboundBuffer::waitRecv``, ``ProcessGroupNCCL::WorkNCCL::wait``, ``MPI_Allreduce`` ...).
  The *call site* is the first Python frame outwards that is not the framework's (an installed
  package, or one of its own modules: ``framework_files.yaml``; never a bare folder named torch/).
* **rendezvous**: ``init_process_group`` / the store (``TCPStore::wait``/``get``): waiting for
  ranks to join.
* **device-sync**: a CUDA synchronisation (``cudaStreamSynchronize``, ``.item()``'s
  ``_local_scalar_dense_cuda`` ...) in a process of a job: with NCCL, collectives are queued on
  the device, so the host blocks at the next sync: it waits for its peers.
* **ipc-wait**: a ``multiprocessing`` wait: a worker reading its task queue, a parent in
  ``Pool.map`` / ``AsyncResult.get`` / ``Queue.get`` / ``Connection.recv``: it waits for another
  process of the job (a plain multiprocessing job has no collectives, but the same shape).
* **elsewhere**: none of these; *where* is the innermost Python frame of the main thread (else
  its innermost native frame outside libc and the interpreter); a main thread waiting for a
  DataLoader batch is where the user asked for it, and ``waits_for`` names the worker and its
  frame (``childwait.py``).

The names these rules look for (collectives, rendezvous, native waits, device syncs, multiprocessing
waits, the files of c10d, multiprocessing and torch) are data: ``signatures/lists/*.yaml``, read
through ``framelists`` (the README's "Frame lists" names each file).

Flight-recorder facts (``Process.collectives``) add the sequence number and op of the last
collective this rank enqueued and whether it completed.

**Evidence.**  A rank is named at fault only with positive evidence of being elsewhere, so each
state says how it is known (``RankState.evidence``, with ``evidence_reason``): ``waiting`` (a
stack in a wait, or a dump's pending collective), ``elsewhere`` (a main-thread stack outside any
collective) or ``unknown``.  Unknown is: a failed input, no stack, a main thread whose native
frames were not read while the process's other threads have theirs (a real 4-GPU job lost the
native stack of ranks busy-spinning in libcuda.so for that instant), an unwind that stopped early
with no Python frame, and (``judge_against_waiters``) a rank whose only place is the waiters' own
call site: it may be inside that very collective.  The job view lists unknown ranks and lowers
its confidence; it never blames them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

from hanganalyze.analyze.childwait import loader_call_site, worker_text
from hanganalyze.analyze.framelists import is_interpreter_frame, is_runtime_frame, names, pattern
from hanganalyze.analyze.stacks import main_thread  # one definition: the job view and the rank states agree
from hanganalyze.analyze.threadchoice import main_missing
from hanganalyze.frametext import FrameStyle, frame_text
from hanganalyze.names import normalize_native_name
from hanganalyze_gdbext.model import Frame, Process, Thread
from hanganalyze_gdbext.model.collectives import Collectives
from hanganalyze_gdbext.model.job import JobRankState

#: How a rank's place is known (``RankState.evidence``).
EVIDENCE = ("waiting", "elsewhere", "unknown")

#: The op in a native collective wait's name (group 1).  Code, not a list file: a list is entries
#: joined with "|", and this is one pattern whose capture group the op is taken from.
_NATIVE_OP = re.compile(r"(?:ProcessGroup\w*::|ncclAll|ncclReduce|ncclBroad|MPI_)(allreduce|AllReduce|Allreduce|"
                        r"broadcast|Broadcast|Bcast|barrier|Barrier|allgather|AllGather|Allgather|"
                        r"reduce_scatter|ReduceScatter|alltoall|Alltoall)")

#: One process's place in the job: the model's one rank-state record (``model/job.py``), which a
#: node summary stores in its rows and reads back.
RankState = JobRankState


def _threads_main_first(p: Process) -> List[Thread]:
    m = main_thread(p)
    return ([m] if m is not None else []) + [t for t in p.threads if t is not m]


def _call_site(frames: List[Frame], start: int) -> Optional[str]:
    """The first Python frame outwards of ``start`` that is the user's (not torch's)."""
    framework_files = pattern("framework_files")
    for f in frames[start + 1:]:
        if f.kind == "python" and not f.marker and not framework_files.search((f.file or "").replace("\\", "/")):
            return frame_text(f, FrameStyle.RANK)
    return None


@lru_cache(maxsize=65536)
def _normalized(name: str) -> str:
    """A 4,096-rank job repeats the same few hundred native names: normalize each once."""
    return normalize_native_name(name)


def _native_name(f: Frame) -> str:
    return _normalized(f.function) if f.function else ""


def _scan_thread(frames: List[Frame]) -> Optional[Tuple[str, Optional[str], int]]:
    """(state, op, frame index) of the first collective / rendezvous / sync frame, innermost first.

    A Python frame in torch.distributed wins over the native wait below it (it names the op);
    the innermost match decides the state, the outermost torch.distributed frame names the op.
    """
    found: Optional[Tuple[str, Optional[str], int]] = None
    user_seen = False  # a Python frame of the program's own code, inside any multiprocessing wait
    ipc_files, ipc_helpers, ipc_waits = pattern("ipc_files"), pattern("ipc_helper_files"), names("ipc_waits")
    c10d_files, collectives, rendezvous = pattern("c10d_files"), names("collectives"), names("rendezvous")
    native_rendezvous, native_collective = pattern("native_rendezvous_waits"), pattern("native_collective_waits")
    device_syncs = names("device_syncs")
    for i, f in enumerate(frames):
        if f.marker:
            continue
        if f.kind == "python":
            file = (f.file or "").replace("\\", "/")
            func = (f.function or "").rsplit(".", 1)[-1]
            if ipc_files.search(file) and func in ipc_waits and not user_seen and found is None:
                return ("ipc-wait", "multiprocessing %s" % func, i)
            if not ipc_files.search(file) and not ipc_helpers.search(file):
                user_seen = True
            if c10d_files.search(file):
                if func in rendezvous:
                    return ("rendezvous", "init_process_group" if func != "new_group" else "new_group", i)
                if func in collectives:
                    state = found[0] if found and found[0] == "device-sync" else "collective"
                    return (state, func, i)
            continue
        name = _native_name(f)
        if found is None:
            if native_rendezvous.match(name):
                found = ("rendezvous", None, i)
            elif native_collective.match(name):
                m = _NATIVE_OP.search(name)
                op = m.group(1).lower().replace("bcast", "broadcast") if m else None
                if name.startswith("c10d::Reducer::"):  # DDP's gradient sync at the end of backward
                    op = "allreduce"
                found = ("collective", op, i)
            elif name in device_syncs or (f.function or "") in device_syncs:
                found = ("device-sync", None, i)
    return found


def _innermost_where(t: Thread) -> Tuple[Optional[str], Optional[int]]:
    frames = t.all_frames()
    for i, f in enumerate(frames):
        if f.kind == "python" and not f.marker:
            return frame_text(f, FrameStyle.RANK), i
    for i, f in enumerate(frames):
        if f.kind == "native" and f.function and not f.marker and not is_runtime_frame(f) \
                and not is_interpreter_frame(f):
            return frame_text(f, FrameStyle.RANK), i
    return None, None


def _fr_facts(st: RankState, coll: Optional[Collectives]) -> None:
    """Sequence facts from the flight recorder / watchdog lines (typed by their readers)."""
    if coll is None:
        return
    st.fr_source = coll.source
    pg = coll.main_group()
    if pg is not None:
        g = coll.groups[pg]
        st.pg = pg
        st.last_enqueued, st.last_completed = g.last_enqueued, g.last_completed
        if st.last_enqueued is not None and st.last_completed is not None:
            st.fr_completed = st.last_completed >= st.last_enqueued
    pending = [e for e in coll.entries if e.state != "completed" and e.seq is not None
               and (st.pg is None or e.pg == st.pg)]
    if pending:
        last = max(pending, key=lambda e: e.seq or 0)
        st.seq = last.seq
        if st.state == "no-stack":
            # a dump alone: the rank enqueued this collective and it never completed, so it waits in it
            st.state = "collective"
        if last.op is not None and st.op is None and st.waiting:
            st.op = last.op
        if last.user_frame is not None and st.waiting and (st.call_site is None or st.state == "device-sync"):
            # the dump recorded where the collective was called; the stack only where the host syncs
            st.call_site = last.user_frame
    if st.seq is None and st.fr_completed is False:
        st.seq = st.last_enqueued


def _memo_thread(memo: Optional[Dict[tuple, tuple]], what: str, t: Thread, compute):
    """``compute(t)``, once per distinct (interned) frame list of a job: threads that share their
    frame lists (``analyze/intern.py``) share the answer; the entry holds the lists, so an id is
    never reused while its entry lives."""
    if memo is None:
        return compute(t)
    key = (what, id(t.frames), id(t.python_frames))
    e = memo.get(key)
    if e is not None and e[0] is t.frames and e[1] is t.python_frames:
        return e[2]
    r = compute(t)
    memo[key] = (t.frames, t.python_frames, r)
    return r


def _collective_of(t: Thread) -> Optional[tuple]:
    frames = t.all_frames()
    hit = _scan_thread(frames)
    return None if hit is None else (hit, frame_text(frames[hit[2]], FrameStyle.RANK), _call_site(frames, hit[2]))


def rank_state(index: int, p: Process, memo: Optional[Dict[tuple, tuple]] = None) -> RankState:
    """Where process ``index`` of a job is (see the module's rules).  ``memo``: one dict per job
    (see ``_memo_thread``)."""
    st = RankState(process=index, rank=p.rank, state="elsewhere", pid=p.pid, evidence="unknown")
    if p.error:
        st.state = "error"
        return st
    if not p.threads:
        st.state = "no-stack"
        _fr_facts(st, p.collectives)
        return st
    for t in _threads_main_first(p):
        got = _memo_thread(memo, "collective", t, _collective_of)
        if got is None:
            continue
        (st.state, st.op, st.frame), st.where, st.call_site = got
        st.thread = t.tid
        break
    if st.state == "elsewhere":
        m = main_thread(p)
        if m is not None:
            st.thread = m.tid
            st.where, st.frame = _memo_thread(memo, "innermost", m, _innermost_where)
    _own_children(st, p, memo)
    _fr_facts(st, p.collectives)
    _judge(st, p)
    return st


def _own_children(st: RankState, p: Process, memo: Optional[Dict[tuple, tuple]]) -> None:
    """A main thread waiting for a DataLoader batch waits for the rank's own workers, not for its
    peers (even where its innermost frame is a ``multiprocessing`` wait): the rank is elsewhere, at
    the user's line that asked for the batch, and ``waits_for`` says what the worker does."""
    m = main_thread(p)
    if m is None or not (st.state == "elsewhere" or (st.state == "ipc-wait" and st.thread == m.tid)):
        return
    loader = _memo_thread(memo, "loader", m, loader_call_site)
    if loader is None:
        return
    st.state, st.op, st.call_site, st.thread = "elsewhere", None, None, m.tid
    st.where, st.frame = loader
    st.waits_for = worker_text(p)


def _judge(st: RankState, p: Process) -> None:
    """``evidence``/``evidence_reason`` from what this process alone shows (see the module doc)."""
    st.sources = list(p.sources)
    if st.state == "error":
        st.evidence, st.evidence_reason = "unknown", "its input failed: %s" % (p.error or "")[:200]
    elif st.waiting:
        how = "flight recorder: collective #%s enqueued, not completed" % st.seq if not p.threads else \
            "stack in %s" % (st.where or st.op or st.state)
        st.evidence, st.evidence_reason = "waiting", how
    elif st.state == "no-stack":
        st.evidence, st.evidence_reason = "unknown", "no stack in the input"
    else:
        reason = _unknown_main(p, st)
        if reason:
            st.evidence, st.evidence_reason = "unknown", reason
        else:
            st.evidence, st.evidence_reason = "elsewhere", "main thread in %s" % (st.where or "?")


def _unknown_main(p: Process, st: RankState) -> Optional[str]:
    """Why the main thread of a rank that waits nowhere does not prove where it is (None: it does)."""
    m = main_thread(p)
    if m is None or st.where is None:
        return "no readable stack for its main thread"
    frames = m.all_frames()
    native = [f for f in frames if f.kind != "python" and not f.marker]
    python = [f for f in frames if f.kind == "python" and not f.marker]
    others_native = any(f.kind != "python" and not f.marker for t in p.threads if t is not m for f in t.frames)
    if not native and (others_native or p.source in ("core", "live")):
        return "its main thread's native stack was not read (only %s)" % (
            "its Python frame %s" % st.where if python else "markers")
    if not python and any(f.marker for f in m.all_frames()):
        return "its unwind stopped early (%s)" % next(
            (f.note or f.function or "?" for f in m.all_frames() if f.marker), "?")
    if main_missing(p):
        return "its main thread is not in the input (the first thread, %s, was started by threading)" % (
            m.name or "unnamed")
    return None


def judge_against_waiters(states: List[RankState]) -> None:
    """A rank 'elsewhere' at the very line the waiting ranks called their collective from has no
    proof of being elsewhere: that line is the collective, and the wait below it was not read."""
    sites = {s.call_site for s in states if s.waiting and s.call_site}
    for s in states:
        if s.evidence == "elsewhere" and s.where in sites:
            s.evidence = "unknown"
            s.evidence_reason = "its innermost frame is the waiters' own call site %s: it may be inside " \
                                "that collective" % s.where
