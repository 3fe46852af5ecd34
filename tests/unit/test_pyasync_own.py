"""asyncio tasks read from real interpreter memory, no gdb: each installed CPython runs a loop
with tasks parked on an Event, a Queue, a sleep, another task, a gather and run_in_executor, and
reads its *own* tasks through ``pyasync`` (``/proc/self/mem``): names, states, coroutine stacks
(innermost first) and what each awaits, checked against what the program built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from helpers import OWN_LAYOUT_PROBE, own_memory_pythons  # noqa: E402

PROBE = OWN_LAYOUT_PROBE + r'''
import asyncio, os, threading
build = importlib.import_module("g.pyasync.build")
target_mod = importlib.import_module("g.pyframes.target")

class Self(target_mod.ProcessTarget):
    """This process as a ProcessTarget: /proc/self/mem, symbols through ctypes."""
    def read_memory(self, addr, size):
        return read(addr, size)
    def symbol_address(self, name):
        libs = [ctypes.pythonapi]
        if name == "_AsyncioDebug":
            import _asyncio
            libs = [ctypes.CDLL(_asyncio.__file__)] if hasattr(_asyncio, "__file__") else []
        for lib in libs:
            try:
                return ctypes.addressof(ctypes.c_char.in_dll(lib, name))
            except ValueError:
                pass
        return None
    def object_files(self):
        return sorted({l.split()[-1] for l in open("/proc/self/maps") if "/" in l})
    def lwps(self):
        return [int(x) for x in os.listdir("/proc/self/task")]

gate = threading.Lock(); gate.acquire()

async def leaf(ev):
    await ev.wait()

async def mid(ev):
    await leaf(ev)

async def await_task(t):
    await t

async def in_executor(loop):
    return await loop.run_in_executor(None, gate.acquire)

async def wait_gather(*aws):
    await asyncio.gather(*aws)

async def main():
    loop = asyncio.get_running_loop()
    ev, q = asyncio.Event(), asyncio.Queue()
    t_ev = asyncio.create_task(mid(ev), name="waiter")
    t_q = asyncio.create_task(q.get(), name="getter")
    t_sl = asyncio.create_task(asyncio.sleep(100), name="sleeper")
    t_aw = asyncio.create_task(await_task(t_sl), name="awaits-sleeper")
    t_g = asyncio.create_task(wait_gather(t_ev, t_q), name="gatherer")
    t_ex = asyncio.create_task(in_executor(loop), name="exec")
    try:
        await check(loop, ev, q, t_ev, t_q, t_sl, t_aw, t_g, t_ex)
    finally:
        gate.release()  # asyncio.run joins the executor's thread on the way out
    for t in (t_ev, t_q, t_sl, t_aw, t_g):
        t.cancel()
    await asyncio.gather(t_ev, t_q, t_sl, t_aw, t_g, t_ex, return_exceptions=True)

async def check(loop, ev, q, t_ev, t_q, t_sl, t_aw, t_g, t_ex):
    for _ in range(20):
        await asyncio.sleep(0.01)
    st = build.describe_asyncio(walker.describe_target(Self()))
    assert st is not None and len(st.loops) == 1, st
    lp = st.loops[0]
    assert lp.thread == threading.get_native_id(), (lp.thread, st.notes)
    tasks = {t.name: t for t in lp.tasks}
    want = {"waiter", "getter", "sleeper", "awaits-sleeper", "gatherer", "exec"}
    assert set(tasks) >= want, (sorted(tasks), st.notes)
    me = [t for t in lp.tasks if t.awaits and t.awaits[0].kind == "running"]
    assert len(me) == 1 and me[0].coroutine_stack[0].function == "main", [(t.name, t.awaits) for t in lp.tasks]
    fn = lambda name: [f.function for f in tasks[name].coroutine_stack]
    kinds = lambda name: [a.kind for a in tasks[name].awaits]
    assert fn("waiter") == ["Event.wait", "leaf", "mid"], fn("waiter")
    assert tasks["waiter"].coroutine_stack[1].line == leaf.__code__.co_firstlineno + 1
    assert kinds("waiter") == ["event"] and tasks["waiter"].awaits[0].resource == hex(id(ev))
    assert fn("getter") == ["Queue.get"] and kinds("getter") == ["queue-get"], (fn("getter"), kinds("getter"))
    assert tasks["getter"].awaits[0].resource == hex(id(q))
    assert fn("sleeper") == ["sleep"] and kinds("sleeper") == ["sleep"]
    assert kinds("awaits-sleeper") == ["task"] and tasks["awaits-sleeper"].awaits[0].task == hex(id(t_sl))
    assert tasks["sleeper"].awaited_by == [hex(id(t_aw))]
    assert kinds("gatherer") == ["gather", "gather"], tasks["gatherer"].awaits
    assert {a.task for a in tasks["gatherer"].awaits} == {hex(id(t_ev)), hex(id(t_q))}
    assert tasks["waiter"].awaited_by == [hex(id(t_g))]
    assert fn("exec") == ["in_executor"], fn("exec")
    workers = [t for t in threading.enumerate() if t is not threading.current_thread()]
    ex = tasks["exec"].awaits
    assert [a.kind for a in ex] == ["executor"] and ex[0].thread == workers[0].native_id, (ex, st.notes)
    assert all(t.state == "pending" for t in lp.tasks)
    print("OK", len(lp.tasks), sys.version_info[:2])

try:
    asyncio.run(main())
except BaseException:
    import traceback
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(1)  # the executor thread still waits on the gate: never join it
'''

PYTHONS = own_memory_pythons()


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_asyncio_tasks_on_own_memory(version):
    res = subprocess.run([str(PYTHONS[version]), "-c", PROBE, str(REPO / "gdbext" / "hanganalyze_gdbext")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "OK" in res.stdout, (res.stdout[-2000:] + res.stderr[-3000:]).splitlines()
