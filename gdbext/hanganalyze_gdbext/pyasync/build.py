"""``describe_asyncio(pyproc)``: the ``AsyncioState`` of a process -- loops, tasks, who awaits whom.

What a pending task awaits comes from its ``fut_waiter`` (the future its coroutine yielded) and
from where its innermost coroutine frame stopped: ``Queue.get`` names the queue (its ``self``),
``Event.wait`` the event, and so on; a gather's children come from the ``_GatheringFuture``'s
``_children``; a future chained to a ``concurrent.futures.Future`` (``run_in_executor``) is joined
to the worker thread whose ``_WorkItem`` holds that future.  ``awaited_by`` is the reverse of the
task edges.
"""

import struct
from typing import Dict, List, Optional, Tuple

from ..model.asyncio import AsyncAwait, AsyncioState, AsyncLoop, AsyncTask
from ..pyframes.objects import ReadError
from ..pyframes.walker import PyProcess
from .names import Holders
from .reader import AsyncReader, TaskInfo

#: Innermost coroutine frame (qualified name, file ending) -> await kind; ``self`` is the resource.
_FRAME_KINDS: Tuple[Tuple[str, str, str], ...] = (
    ("Queue.get", "queues.py", "queue-get"),
    ("Queue.put", "queues.py", "queue-put"),
    ("Event.wait", "locks.py", "event"),
    ("Lock.acquire", "locks.py", "lock"),
    ("Semaphore.acquire", "locks.py", "semaphore"),
    ("Condition.wait", "locks.py", "condition"),
    ("sleep", "tasks.py", "sleep"),
)
MAX_CHILDREN = 4096
WORKER_FRAMES = 64


def describe_asyncio(proc: PyProcess) -> Optional[AsyncioState]:
    """None when the process has not imported asyncio; else every loop with its tasks."""
    r = AsyncReader(proc)
    if not r.a or not r.asyncio_imported():
        return None
    state = AsyncioState()
    infos = [r.read_task(x) for x in r.task_addresses()]
    by_addr = {ti.addr: ti for ti in infos}
    current = r.current_tasks()
    workers = _executor_work(r)
    holders = Holders(r, infos)
    loops: Dict[int, AsyncLoop] = {}
    for ti in infos:
        lp = loops.get(ti.loop)
        if lp is None:
            lp = loops[ti.loop] = AsyncLoop(id="0x%x" % ti.loop if ti.loop else None,
                                            type=r.type_name(ti.loop) if ti.loop else None,
                                            thread=r.loop_thread(ti.loop) if ti.loop else None)
            cur = current.get(ti.loop)
            lp.current = "0x%x" % cur if cur else None
        task = AsyncTask(id=ti.id, name=ti.name, state=ti.state, notes=ti.notes,
                         coroutine_stack=[cf.frame for cf in ti.chain])
        if ti.state == "pending":
            task.awaits = _awaits(r, ti, by_addr, workers, running=lp.current == ti.id, holders=holders)
        lp.tasks.append(task)
    for lp in loops.values():
        ids = {t.id: t for t in lp.tasks}
        for t in lp.tasks:
            for w in t.awaits:
                target = ids.get(w.task) if w.task else None
                if target is not None and t.id not in target.awaited_by:
                    target.awaited_by.append(t.id)
    state.loops = sorted(loops.values(), key=lambda lp: (lp.thread is None, lp.thread or 0, lp.id or ""))
    state.tasks_total = len(infos)
    state.notes = r.notes
    return state


def _awaits(r: AsyncReader, ti: TaskInfo, by_addr: Dict[int, TaskInfo], workers: Dict[int, int],
            running: bool, holders: Optional[Holders] = None) -> List[AsyncAwait]:
    w = ti.waiter
    if not w:
        if running:
            return [AsyncAwait(kind="running", detail="its step is running on the loop's thread now")]
        return [AsyncAwait(kind="scheduled", detail="awaits nothing: ready to run when the loop gets to it")]
    if w in by_addr or r.is_task(w):
        return [AsyncAwait(kind="task", task="0x%x" % w, resource="0x%x" % w,
                           detail="awaits task %s" % (by_addr[w].name if w in by_addr else "0x%x" % w))]
    tname = r.type_name(w) or "?"
    if tname.endswith("_GatheringFuture"):
        return _gather(r, w, by_addr)
    inner = ti.chain[0] if ti.chain else None
    if inner is not None:
        fn, file_ = inner.frame.function or "", inner.frame.file or ""
        for qual, fname, kind in _FRAME_KINDS:
            if fn == qual and file_.endswith("asyncio/" + fname):
                res = r.first_local(inner) if kind != "sleep" else w
                rtype = r.type_name(res) if res else None
                named = holders.name(ti, res) if holders is not None and res and kind != "sleep" else None
                detail = "%s on %s 0x%x" % (qual, rtype, res) if res and kind != "sleep" else "asyncio.sleep()"
                if named:  # named as pylocks names a lock: from the code that holds it
                    detail = "%s on %s %s (0x%x)" % (qual, rtype, named, res)
                refs = holders.referrers(ti, res) if holders is not None and res and kind != "sleep" else []
                return [AsyncAwait(kind=kind, resource="0x%x" % res if res else None, detail=detail, name=named,
                                   referenced_by=refs)]
    cf = _chained_concurrent(r, w)
    if cf:
        lwp = workers.get(cf)
        detail = "run_in_executor: concurrent.futures.Future 0x%x" % cf
        detail += (", being run by thread %d" % lwp) if lwp is not None else ", no worker thread is running it"
        return [AsyncAwait(kind="executor", resource="0x%x" % w, thread=lwp, detail=detail)]
    if r.is_future(w):
        return [AsyncAwait(kind="future", resource="0x%x" % w, detail="a %s nothing in memory is known to complete"
                           % tname)]
    return [AsyncAwait(kind="other", resource="0x%x" % w, detail="awaits a %s" % tname)]


def _gather(r: AsyncReader, g: int, by_addr: Dict[int, TaskInfo]) -> List[AsyncAwait]:
    out: List[AsyncAwait] = []
    children = r.attr(g, "_children")
    try:
        items = r.o.list_items(children, MAX_CHILDREN) if children else []
    except (ReadError, struct.error):
        items = []
    for c in items:
        if c in by_addr or r.is_task(c):
            name = by_addr[c].name if c in by_addr else None
            if c in by_addr and by_addr[c].state != "pending":
                continue  # a finished child no longer holds the gather
            out.append(AsyncAwait(kind="gather", task="0x%x" % c, resource="0x%x" % g,
                                  detail="gather() child task %s" % (name or "0x%x" % c)))
        else:
            out.append(AsyncAwait(kind="gather", resource="0x%x" % c,
                                  detail="gather() child %s 0x%x" % (r.type_name(c), c)))
    if not out:
        out.append(AsyncAwait(kind="gather", resource="0x%x" % g, detail="gather() whose children are unreadable"))
    return out


def _chained_concurrent(r: AsyncReader, fut: int) -> int:
    """The ``concurrent.futures.Future`` an asyncio future is chained to (``wrap_future``: its
    ``_call_check_cancel`` done-callback closes over ``source``), or 0."""
    a = r.a
    cbs: List[int] = []
    if "_asyncio.Future" in r.type_chain(fut):
        cb0 = r.u64(fut + a["task.callback0"])
        if cb0:
            cbs.append(cb0)
        more = r.u64(fut + a["task.callbacks"])
        if more and r.type_name(more) == "list":
            try:  # [(callback, context), ...]
                cbs += [x for pair in r.o.list_items(more, 16) for x in r.o.tuple_items(pair, 1)]
            except (ReadError, struct.error):
                pass
    for fn in cbs:
        if r.type_name(fn) != "function":
            continue
        if "_chain_future" not in (r.o.str(r.u64(fn + a["func.qualname"])) or ""):
            continue
        closure = r.u64(fn + a["func.closure"])
        try:
            cells = r.o.tuple_items(closure, 8) if closure and r.type_name(closure) == "tuple" else []
        except (ReadError, struct.error):
            cells = []
        for cell in cells:
            v = r.u64(cell + r.t.get("cell.ref", 16))
            if v and "Future" in r.type_chain(v) and "_asyncio.Future" not in r.type_chain(v):
                return v
    return 0


def _executor_work(r: AsyncReader) -> Dict[int, int]:
    """{concurrent.futures.Future: LWP} for every thread running a ``_WorkItem`` (a
    ThreadPoolExecutor worker inside ``_WorkItem.run``, whose ``self.future`` it is)."""
    out: Dict[int, int] = {}
    code_off = r.p.frame_keys["code"]
    if code_off is None:
        return out
    for lwp in r.p.threads:
        for fr in r.p.innermost_frames(lwp, WORKER_FRAMES):
            try:
                code = r.p.frame_code(fr)
            except (ReadError, struct.error):
                break
            info = r.w.code_info(code) if code else None
            # co_qualname (3.11+) "_WorkItem.run", co_name "run" before
            if info is None or info[0] not in ("_WorkItem.run", "run") or not info[1].endswith("futures/thread.py"):
                continue
            k = r.p.frame_keys["localsplus"]
            me = r.u64(fr + k) if k is not None else 0
            if r.p.features.tagged_executable:
                me &= ~3
            fut = r.attr(me, "future") if me else 0
            if fut:
                out[fut] = lwp
            break
    return out


def attach(process, pyproc: Optional[PyProcess]) -> None:
    """Set ``process.asyncio`` (a model ``Process``) from the walker's answer; a failure is a note,
    never a lost snapshot.  The seam both collectors (gdbext and the direct reader) call."""
    if pyproc is None or not pyproc.version:
        return
    try:
        process.asyncio = describe_asyncio(pyproc)
    except Exception as e:  # noqa: BLE001 - corrupt asyncio state must not cost the thread stacks
        process.notes.append("asyncio tasks could not be read: %s" % e)
