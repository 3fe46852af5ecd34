"""The asyncio task tree in the HTML report (under the loop's thread, in a ``<details>``, escaped)
and in the Markdown report (a fenced block), on a hand-made snapshot with hostile task names."""

from __future__ import annotations

import re

from hanganalyze.render.html import render_html
from hanganalyze.render.markdown import render_markdown
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread
from hanganalyze_gdbext.model.asyncio import AsyncAwait, AsyncioState, AsyncLoop, AsyncTask

EVIL = '<script>alert("x")</script>&<img src=x onerror=1>'


def _snapshot(loop_thread=100) -> Snapshot:
    main = AsyncTask(id="0x10", name="Task-1", state="pending",
                     coroutine_stack=[Frame(kind="python", function="main", file="/app/m.py", line=9)],
                     awaits=[AsyncAwait(kind="task", task="0x20")])
    evil = AsyncTask(id="0x20", name=EVIL, state="pending", awaited_by=["0x10"],
                     coroutine_stack=[Frame(kind="python", function="Queue.get", file="/q.py", line=1),
                                      Frame(kind="python", function="worker`` ```", file="/app/m.py", line=3)],
                     awaits=[AsyncAwait(kind="queue-get", detail="asyncio.Queue 0x30")])
    loop = AsyncLoop(thread=loop_thread, id="0x40", type="_UnixSelectorEventLoop", tasks=[main, evil])
    p = Process(pid=100, source="live", threads=[
        Thread(tid=100, name="MainThread", frames=[Frame(kind="native", function="epoll_wait")]),
        Thread(tid=101, name="worker", frames=[Frame(kind="native", function="futex_wait")])],
        asyncio=AsyncioState(loops=[loop]))
    return Snapshot(processes=[p])


def test_html_tree_under_loop_thread_escaped():
    page = render_html(_snapshot())
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&lt;img" in page
    # inside the loop thread's group, before its stack; not under the other thread
    m = re.search(r'<details class="group[^"]*" id="p0-g\d+"[^>]*>\s*<summary><span class="tlabel">Thread 100 .*?'
                  r'<details class="atree" open><summary>asyncio tasks: loop 0x40 \(_UnixSelectorEventLoop\) '
                  r'on thread 100'
                  r'.*?<pre>(.*?)</pre></details>\s*<div class="stack">', page, re.S)
    assert m, page
    tree = m.group(1)
    assert "Task-1 [task]" in tree and "main (m.py:9)" in tree and "[queue-get: asyncio.Queue 0x30]" in tree
    assert "worker`` ``` (m.py:3) &gt; Queue.get (q.py:1)" in tree
    assert page.count('class="atree"') == 1


def test_html_loop_without_thread():
    page = render_html(_snapshot(loop_thread=None))
    assert page.count('class="group atree-loose"') == 1
    assert "asyncio tasks: loop 0x40 (_UnixSelectorEventLoop) on no running thread" in page
    assert "<script>alert" not in page


def test_markdown_tree_fenced():
    text = render_markdown(_snapshot())
    m = re.search(r"### asyncio tasks of .*?\n\nloop 0x40 \(\\_UnixSelectorEventLoop\) on thread 100.*?\n\n"
                  r"(`{4,})text\n(.*?)\n\1\n", text, re.S)
    assert m, text
    assert "worker`` ``` (m.py:3) > Queue.get (q.py:1)" in m.group(2)  # the fence outlasts the backticks
    assert "  └─ Task-1 [task]" in m.group(2)


def test_markdown_tree_cut_to_limit():
    snap = _snapshot()
    lp = snap.processes[0].asyncio.loops[0]
    for i in range(3000):
        lp.tasks.append(AsyncTask(id="0x%x" % (0x1000 + i), name="T%d" % i, state="pending", coroutine_stack=[
            Frame(kind="python", function="f%d" % i, file="/a.py", line=i)], awaits=[AsyncAwait(kind="sleep")]))
    text = render_markdown(snap)
    assert len(text) <= 65536
    assert "### asyncio tasks of" in text
