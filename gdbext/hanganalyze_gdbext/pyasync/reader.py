"""asyncio tasks, their coroutine stacks and what they await, read from memory (no code runs).

A serving process that hangs in asyncio shows an idle loop thread in ``epoll_wait``: the stuck
work is in suspended coroutines, on no thread's stack.  This reader finds every task from the
registries asyncio keeps (3.8-3.11 ``asyncio.tasks._all_tasks``; 3.12+ ``_scheduled_tasks`` and
``_eager_tasks``; 3.14 native tasks on per-thread linked lists, whose offsets ``_AsyncioDebug``
confirms) and reads each task's coroutine chain (``cr_await`` is the top of a suspended frame's
value stack) with the walker's code and line readers, so a task frame looks like a thread frame.

Everything is bounded (tasks, chain depth, set sizes) and every unreadable object becomes a note.
"""

import struct
from typing import Dict, Iterator, List, Optional, Tuple

from ..model import Frame
from ..pyframes.framewalk import FrameWalker
from ..pyframes.objects import ReadError, i32_at, u64_at
from ..pyframes.walker import PyProcess
from ..pylocks import PyLocks
from . import layout

MAX_TASKS = 200000
MAX_AWAIT_DEPTH = 256
MAX_SET = 1 << 22
MAX_BASES = 16

STATES = {0: "pending", 1: "cancelled", 2: "finished"}
_PY_STATES = {"PENDING": "pending", "CANCELLED": "cancelled", "FINISHED": "finished"}
GENERATORS = ("coroutine", "generator", "async_generator")


class CoroFrame:
    """One frame of a coroutine chain: the model ``Frame`` and where its fast locals are."""

    __slots__ = ("frame", "addr", "code")

    def __init__(self, frame: Frame, addr: int, code: int):
        self.frame, self.addr, self.code = frame, addr, code


class TaskInfo:
    """What memory says about one task (``reader.AsyncReader.read_task``)."""

    def __init__(self, addr: int):
        self.addr = addr
        self.name: Optional[str] = None
        self.state: Optional[str] = None
        self.coro = 0
        self.waiter = 0
        self.loop = 0
        self.chain: List[CoroFrame] = []  # innermost first
        self.leaf = 0  # what the innermost coroutine awaits when not a coroutine (a future...)
        self.notes: List[str] = []

    @property
    def id(self) -> str:
        return "0x%x" % self.addr


class AsyncReader:
    """asyncio readers over a walker ``PyProcess``; never raises on bad memory."""

    def __init__(self, proc: PyProcess):
        self.p = proc
        self.mem = proc.mem
        self.o = proc.objects
        self.t = proc.offsets
        self.locks = PyLocks(proc)
        self.a = layout.layout_for(proc.version_info, proc.free_threading, self.t.get("ob.head", 32)) or {}
        self.w = FrameWalker(proc)  # the walker's code-object and line-number caches
        self.notes: List[str] = []
        self._bases: Dict[int, Tuple[str, ...]] = {}
        self._debug_checked = False
        self._modules: Optional[Dict[str, int]] = None
        self._module_items: Iterator[Tuple[int, int]] = iter(())

    # --- primitives ---------------------------------------------------------------------------
    def u64(self, addr: int) -> int:
        try:
            return self.mem.u64(addr)
        except (ReadError, struct.error):
            return 0

    def type_name(self, obj: int) -> Optional[str]:
        return self.locks.type_name(obj)

    def type_chain(self, obj: int) -> Tuple[str, ...]:
        """tp_name of an object's type and of its bases (``tp_base``), most derived first."""
        tp = self.u64(obj + self.t.get("ob.type", 8)) if obj and not obj & 7 else 0
        if not tp:
            return ()
        hit = self._bases.get(tp)
        if hit is None:
            names: List[str] = []
            cur = tp
            while cur and len(names) < MAX_BASES:
                n = self.o.type_name(cur)
                if n is None:
                    break
                names.append(n)
                cur = self.u64(cur + self.a.get("tp.base", 256))
            hit = self._bases[tp] = tuple(names)
        return hit

    def is_c_task(self, obj: int) -> bool:
        return "_asyncio.Task" in self.type_chain(obj)

    def is_task(self, obj: int) -> bool:
        chain = self.type_chain(obj)
        return "_asyncio.Task" in chain or "Task" in chain

    def is_future(self, obj: int) -> bool:
        chain = self.type_chain(obj)
        return any(n in ("_asyncio.Future", "Future", "_asyncio.Task", "Task") for n in chain)

    def attr(self, obj: int, name: str) -> int:
        try:
            return self.o.instance_attr(obj, name) or 0
        except (ReadError, struct.error):
            return 0

    def _module(self, module: str) -> int:
        """``sys.modules[module]`` of the main interpreter, 0 when absent.  The table's entries are
        read once per reader and their names only as far as a lookup needs (a PyTorch process has
        ~2,000 modules: each lookup read the whole table again, and reading every name costs more
        than the lookups need)."""
        if self._modules is None:
            interp = self.p.interpreters[0]
            addr = self.mem.u64(interp + self.t["is.modules"])
            self._module_items = iter(self.o.dict_items(addr) if addr else ())
            self._modules = {}
        mods = self._modules
        got = mods.get(module)
        if got is not None:
            return got
        for k, v in self._module_items:
            name = self.o.str(k)
            if name is not None and name not in mods:
                mods[name] = v
                if name == module:
                    return v
        return 0

    def module_global(self, module: str, name: str) -> int:
        """A global of an imported module (``sys.modules[module].name``) of the main interpreter."""
        try:
            mod = self._module(module)
            md = self.mem.u64(mod + self.t["mod.md_dict"]) if mod else 0
            return (self.o.dict_get_str(md, name) or 0) if md else 0
        except (ReadError, struct.error, IndexError, KeyError):
            return 0

    def asyncio_imported(self) -> bool:
        try:
            return bool(self._module("asyncio.tasks"))
        except (ReadError, struct.error, IndexError, KeyError):
            return False

    def set_items(self, s: int) -> List[int]:
        """Keys of a ``set`` (table of (key, hash) entries; dummies have hash -1)."""
        try:
            mask = self.mem.u64(s + self.a["set.mask"])
            table = self.mem.u64(s + self.a["set.table"])
            if mask >= MAX_SET or not table:
                self.notes.append("set 0x%x: implausible size %d (not read)" % (s, mask + 1))
                return []
            raw = self.mem.read(table, 16 * (mask + 1))
        except (ReadError, struct.error, KeyError) as e:
            self.notes.append("set 0x%x unreadable: %s" % (s, e))
            return []
        out = []
        for i in range(mask + 1):
            key = u64_at(raw, 16 * i)
            if key and struct.unpack_from("<q", raw, 16 * i + 8)[0] != -1:
                out.append(key)
        return out

    def weakset_items(self, ws: int) -> List[int]:
        """Live referents of a ``weakref.WeakSet`` (its ``data`` set of weak references)."""
        data = self.attr(ws, "data")
        if not data:
            return []
        out = []
        for ref in self.set_items(data):
            obj = self.u64(ref + self.t.get("weakref.object", 16))
            if obj and self.type_name(obj) != "NoneType":
                out.append(obj)
        return out

    # --- where the tasks are --------------------------------------------------------------------
    def task_addresses(self) -> List[int]:
        """Every task asyncio's registries know, each once, in registry order."""
        found: List[int] = []
        seen = set()

        def add(objs: List[int]) -> None:
            for x in objs:
                if x not in seen and len(found) < MAX_TASKS:
                    seen.add(x)
                    found.append(x)

        for name in ("_all_tasks", "_scheduled_tasks"):
            ws = self.module_global("asyncio.tasks", name)
            if ws:
                add(self.weakset_items(ws))
        eager = self.module_global("asyncio.tasks", "_eager_tasks")
        if eager and self.type_name(eager) == "set":
            add(self.set_items(eager))
        if "ts.asyncio_tasks_head" in self.a:
            self._check_asyncio_debug()
            for th in self.p.threads.values():
                add(self.llist_tasks(th.tstate + self.a["ts.asyncio_tasks_head"]))
            for interp in self.p.interpreters[:1]:
                add(self.llist_tasks(interp + self.a["is.asyncio_tasks_head"]))
        if len(found) >= MAX_TASKS:
            self.notes.append("more than %d tasks: the rest were not read" % MAX_TASKS)
        return [x for x in found if self.is_task(x)]

    def llist_tasks(self, head: int) -> List[int]:
        """3.14: the tasks on one circular ``llist_node`` list (each task's ``task_node``)."""
        out: List[int] = []
        node = self.u64(head)
        seen = set()
        while node and node != head and len(out) < MAX_TASKS:
            if node in seen:
                self.notes.append("task list at 0x%x has a cycle" % head)
                break
            seen.add(node)
            out.append(node - self.a["task.node"])
            node = self.u64(node)
        return out

    def _check_asyncio_debug(self) -> None:
        """3.14: take ``_AsyncioDebug`` (the ``_asyncio`` module's own offsets) over the table
        where it can be read, saying where they differ."""
        if self._debug_checked:
            return
        self._debug_checked = True
        target = self.p.target
        addr = target.symbol_address("_AsyncioDebug") if target is not None else None
        if not addr:
            return
        try:
            raw = self.mem.read(addr, 8 * len(layout.ASYNCIO_DEBUG_FIELDS))
        except ReadError:
            return
        vals = struct.unpack("<%dQ" % len(layout.ASYNCIO_DEBUG_FIELDS), raw)
        if vals[0] > 4096 or vals[10] > 1 << 20:
            self.notes.append("_AsyncioDebug at 0x%x is implausible: using the built-in table" % addr)
            return
        for key, v in zip(layout.ASYNCIO_DEBUG_FIELDS, vals):
            if key and self.a.get(key) != v:
                self.notes.append("_AsyncioDebug %s=%d differs from the table (%s): using _AsyncioDebug"
                                  % (key, v, self.a.get(key)))
                self.a[key] = v

    # --- one task -------------------------------------------------------------------------------
    def read_task(self, addr: int) -> TaskInfo:
        ti = TaskInfo(addr)
        a = self.a
        try:
            if self.is_c_task(addr):
                buf = self.mem.read(addr, a["task.name"] + 8)
                ti.state = STATES.get(i32_at(buf, a["task.state"]), "unknown")
                ti.waiter = u64_at(buf, a["task.fut_waiter"])
                ti.coro = u64_at(buf, a["task.coro"])
                ti.loop = u64_at(buf, a["task.loop"])
                name = u64_at(buf, a["task.name"])
            else:  # a pure-Python Task (asyncio.tasks._PyTask, or a loop's own task class)
                ti.state = _PY_STATES.get(self.o.str(self.attr(addr, "_state")) or "", "unknown")
                ti.waiter = self.attr(addr, "_fut_waiter")
                ti.coro = self.attr(addr, "_coro")
                ti.loop = self.attr(addr, "_loop")
                name = self.attr(addr, "_name")
            ti.name = self.name_of(name)
        except (ReadError, struct.error, KeyError) as e:
            ti.notes.append("task 0x%x unreadable: %s" % (addr, e))
            return ti
        if self.type_name(ti.waiter) in (None, "NoneType"):
            ti.waiter = 0
        if ti.coro:
            ti.chain, ti.leaf = self.coro_chain(ti.coro, ti.notes)
        return ti

    def name_of(self, obj: int) -> Optional[str]:
        """A task's name: a str, or (3.13+) the int of a lazily named "Task-N"."""
        tn = self.type_name(obj)
        if tn == "str":
            return self.o.str(obj)
        if tn == "int":
            n = self.o.int(obj)
            return "Task-%d" % n if n is not None else None
        return None

    # --- coroutine chains -----------------------------------------------------------------------
    def coro_chain(self, coro: int, notes: List[str]) -> Tuple[List[CoroFrame], int]:
        """(frames innermost first, the non-coroutine object the innermost one awaits or 0),
        from the task's coroutine down ``cr_await``/``gi_yieldfrom``."""
        chain: List[CoroFrame] = []
        obj, seen = coro, set()
        while obj:
            if obj in seen:
                notes.append("await chain has a cycle at 0x%x" % obj)
                break
            if len(seen) >= MAX_AWAIT_DEPTH:
                notes.append("await chain deeper than %d: cut" % MAX_AWAIT_DEPTH)
                break
            seen.add(obj)
            tn = self.type_name(obj)
            if tn == "async_generator_asend":
                obj = self.u64(obj + self.a["asend.gen"])
                tn = self.type_name(obj)
            if tn == "_asyncio.FutureIter":
                return chain[::-1], self.u64(obj + self.a["futiter.future"])
            if tn not in GENERATORS:
                return chain[::-1], obj
            try:
                step = self.gen_step(obj)
            except (ReadError, struct.error) as e:
                notes.append("coroutine 0x%x unreadable: %s" % (obj, e))
                break
            if step is None:
                break
            cf, obj = step
            chain.append(cf)
        return chain[::-1], 0

    def gen_step(self, gen: int) -> Optional[Tuple[CoroFrame, int]]:
        """(the frame of a generator/coroutine, what it awaits or 0); None when it finished."""
        a, t = self.a, self.t
        if "gen.frame" in a:  # 3.8-3.10: a PyFrameObject
            f = self.mem.u64(gen + a["gen.frame"])
            if not f:
                return None
            buf = self.mem.read(f, max(t["fo.f_lasti"], a.get("fo.state", 0)) + 8)
            code = u64_at(buf, t["fo.f_code"])
            frame = self._frame(code, i32_at(buf, t["fo.f_lasti"]))
            qual = self.o.str(self.mem.u64(gen + a["gen.qualname"]))  # no co_qualname before 3.11
            if qual and frame.function != "??":
                frame.function = qual
            top = 0
            if "fo.stacktop" in a:
                stacktop, base = u64_at(buf, a["fo.stacktop"]), u64_at(buf, a["fo.valuestack"])
                if stacktop and base and base < stacktop <= base + 8 * 4096:
                    top = self.mem.u64(stacktop - 8)
            elif struct.unpack_from("b", buf, a["fo.state"])[0] == a["state.suspended"]:
                depth = i32_at(buf, a["fo.stackdepth"])
                if 0 < depth <= 4096:
                    top = self.mem.u64(u64_at(buf, a["fo.valuestack"]) + 8 * (depth - 1))
            return CoroFrame(frame, f, code), self._awaitable(top, exact=False)
        state = struct.unpack("b", self.mem.read(gen + a["gen.frame_state"], 1))[0]
        if state >= 1:  # completed or cleared
            return None
        f = gen + a["gen.iframe"]
        buf = self.mem.read(f, self.w.ifr_span)
        code = u64_at(buf, t["ifr.code"]) & (~3 if self.w.tagged else ~0)
        instr = u64_at(buf, t["ifr.instr"])
        base = code + t["co.code_adaptive"]
        if self.w.tlbc:
            base = self.w._bytecode_base(code, i32_at(buf, t["ifr.tlbc_index"])) or base
        unit = (instr - base) // 2
        frame = self._frame(code, unit if -1 <= unit < 1 << 24 else -1)
        exact = "state.yield_from" in a
        top = 0
        if state == a.get("state.yield_from", a.get("state.suspended")):
            nlocals = self.mem.i32(code + t["co.nlocalsplus"])
            if 0 <= nlocals < 1 << 16:
                bottom = f + t["ifr.localsplus"] + 8 * nlocals
                if "ifr.stackpointer" in a:
                    sp = u64_at(buf, a["ifr.stackpointer"])
                    if bottom < sp <= bottom + 8 * 4096:
                        top = self.mem.u64(sp - 8) & ~3
                else:
                    stacktop = i32_at(buf, a["ifr.stacktop"])
                    if nlocals < stacktop <= nlocals + 4096:
                        top = self.mem.u64(f + t["ifr.localsplus"] + 8 * (stacktop - 1))
        return CoroFrame(frame, f, code), self._awaitable(top, exact)

    def _awaitable(self, obj: int, exact: bool) -> int:
        """The awaited object on a suspended frame's stack top.  Where the frame state does not
        say it suspended in ``await`` (3.8-3.12), only objects that can be awaited count."""
        if not obj:
            return 0
        tn = self.type_name(obj)
        if tn is None:
            return 0
        if exact or tn in GENERATORS or tn in ("async_generator_asend", "_asyncio.FutureIter") \
                or self.is_future(obj):
            return obj
        return 0

    def _frame(self, code: int, pos: int) -> Frame:
        info = self.w.code_info(code)
        if info is None:
            return Frame(kind="python", function="??", note="code object 0x%x unreadable" % code)
        return Frame(kind="python", function=info[0], file=info[1], line=self.w.line(code, info, pos))

    # --- loops ----------------------------------------------------------------------------------
    def loop_thread(self, loop: int) -> Optional[int]:
        """LWP running a loop: ``BaseEventLoop._thread_id`` (set while it runs), or 3.14's
        per-thread ``asyncio_running_loop``."""
        off = self.a.get("ts.asyncio_running_loop")
        if off is not None:
            for lwp, th in self.p.threads.items():
                if self.u64(th.tstate + off) == loop:
                    return lwp
        ident_obj = self.attr(loop, "_thread_id")
        if ident_obj and self.type_name(ident_obj) == "int":
            ident = self.o.int(ident_obj)
            if ident:
                return self.p.lwp_for_pthread(ident)
        return None

    def current_tasks(self) -> Dict[int, int]:
        """{loop: the task it is running now}: ``asyncio.tasks._current_tasks`` (3.8-3.13) and
        3.14's per-thread ``asyncio_running_task``."""
        out: Dict[int, int] = {}
        cur = self.module_global("asyncio.tasks", "_current_tasks")
        if cur and self.type_name(cur) == "dict":
            try:
                out.update(self.o.dict_items(cur))
            except (ReadError, struct.error):
                pass
        loop_off = self.a.get("ts.asyncio_running_loop")
        if loop_off is not None:
            for th in self.p.threads.values():
                loop, task = self.u64(th.tstate + loop_off), self.u64(th.tstate + loop_off + 8)
                if loop and task and self.type_name(task) not in (None, "NoneType"):
                    out[loop] = task
        return out

    # --- locals ---------------------------------------------------------------------------------
    def first_local(self, cf: CoroFrame) -> int:
        """The first fast local of a coroutine frame (``self`` of a method), or 0."""
        k = self.p.frame_keys
        off = k["localsplus"]
        if off is None:
            return 0
        v = self.u64(cf.addr + off)
        return v & ~3 if self.p.features.tagged_executable else v

    def frame_locals(self, cf: CoroFrame) -> List[Tuple[Optional[str], int]]:
        return self.locks.frame_locals(cf.addr)
