"""Identical-stack groups, the idle rule, and the size bound of the Markdown report."""

from __future__ import annotations

import json
import re

from hanganalyze.analyze.grouping import group_threads, is_idle_stack
from hanganalyze.render import render
from hanganalyze.render.markdown import LIMIT, render_markdown
from hanganalyze_gdbext.model import Evidence, Finding, Frame, Process, Snapshot, Thread


def nat(name, lib="/lib/x86_64-linux-gnu/libc.so.6"):
    return Frame(kind="native", function=name, library=lib, address=0x1000 + len(name))


def py(name, file, line=1):
    return Frame(kind="python", function=name, file=file, line=line)


def worker_frames():
    return [nat("pthread_cond_wait"), nat("c10::ThreadPool::main_loop(unsigned long)", "/x/libc10.so"),
            nat("start_thread")]


def trainer_snapshot(workers=37, with_finding=True):
    main = Thread(tid=100, name="MainThread", current=True,
                  frames=[nat("pthread_mutex_lock"), nat("ncclCommDestroy", "/x/libnccl.so.2"), nat("main", None)])
    stuck = Thread(tid=101, name="stuck", frames=[nat("__lll_lock_wait"), nat("foo", "/x/libfoo.so")])
    pool = [Thread(tid=200 + i, name="pool", frames=worker_frames()) for i in range(workers)]
    qframes = [nat("sem_clockwait"), py("wait", "/usr/lib/python3.11/threading.py"),
               py("get", "/usr/lib/python3.11/queue.py"), py("_worker", "/x/concurrent/futures/thread.py")]
    qthreads = [Thread(tid=400 + i, name="q", frames=list(qframes)) for i in range(5)]
    p = Process(source="core", pid=100, threads=[main, stuck] + pool + qthreads)
    findings = []
    if with_finding:
        findings = [Finding(signature="s", title="stuck in foo", severity="hang", process=0, threads=[101],
                            evidence=[Evidence(thread=101, frame=1, rule="frame", text="foo")])]
    return Snapshot(processes=[p], findings=findings)


def test_identical_stacks_group_and_order():
    s = trainer_snapshot()
    groups = group_threads(s, 0)
    assert [g.size for g in groups] == [1, 1, 37, 5]
    assert groups[0].first.tid == 101 and groups[0].in_finding
    assert groups[1].has_current and not groups[1].idle
    assert groups[2].idle and groups[3].idle


def test_idle_rule():
    assert is_idle_stack(Thread(frames=worker_frames()))
    assert not is_idle_stack(Thread(frames=[nat("pthread_cond_wait"), nat("my_consumer", "/x/libapp.so")]))
    assert is_idle_stack(Thread(frames=[nat("epoll_wait"), nat("uv_run", "/x/libuv.so")]))
    # glibc aliases as gdb prints them with debug info
    assert is_idle_stack(Thread(frames=[nat("__GI___poll"), nat("cuda_event_loop", "/x/libcuda.so.1")]))
    assert is_idle_stack(Thread(frames=[nat("__GI___futex_abstimed_wait_cancelable64"), nat("___pthread_cond_wait"),
                                        nat("std::condition_variable::wait(std::unique_lock<std::mutex>&)"),
                                        nat("c10::ThreadPool::main_loop(unsigned long)", "/x/libc10.so")]))
    # a Python thread blocked on a plain Lock is how a deadlock looks: never idle
    lock = Thread(frames=[nat("sem_clockwait"), py("worker", "/app/deadlock.py"), py("run", "/x/threading.py")])
    assert not is_idle_stack(lock)
    q = Thread(frames=[nat("sem_clockwait"), py("wait", "/x/threading.py"), py("get", "/x/queue.py")])
    assert is_idle_stack(q)


def test_idle_thread_named_by_a_finding_is_not_idle():
    s = trainer_snapshot()
    s.findings[0].threads.append(205)
    groups = group_threads(s, 0)
    pool = next(g for g in groups if g.size == 37)
    assert pool.in_finding and not pool.idle


def test_every_format_says_how_many_threads_are_alike():
    s = trainer_snapshot()
    assert "37 threads like this" in render(s, "html")
    assert "37 threads like this" in render(s, "md")
    assert "+ 36 more threads like this" in render(s, "text")
    assert json.loads(render(s, "json"))["schema"] == "hanganalyze/1"


def test_matched_frame_is_marked():
    s = trainer_snapshot()
    text = render(s, "text")
    assert re.search(r"^>>#1 .*foo", text, re.M)
    html = render(s, "html")
    assert re.search(r"<div class=\"f hit\"><i>#1</i>[^\n]*<b>foo</b>", html)


def test_markdown_stays_under_limit_and_cuts_whole_groups():
    threads = []
    for i in range(3000):
        frames = [nat("pthread_cond_wait"), nat("distinct_%d" % i, "/x/libapp.so")] + [
            py("f%d_%d" % (i, k), "/very/long/path/to/some/module_%d.py" % k, k) for k in range(20)]
        threads.append(Thread(tid=10000 + i, name="t%d" % i, frames=frames))
    s = Snapshot(processes=[Process(source="core", pid=1, threads=threads)],
                 findings=[Finding(signature="s", title="x", severity="hang", process=0, threads=[10000])])
    out = render_markdown(s)
    assert len(out) < LIMIT
    assert out.count("<details") == out.count("</details>") > 10
    m = re.search(r"\*\*(\d+) more thread groups \((\d+) threads\) omitted\*\*", out)
    assert m and int(m.group(1)) + out.count("<details") == 3000
    # a group is either entirely in or entirely out
    assert out.count("<details") == len(re.findall(r"^`{3,}text$", out, re.M))


def test_markdown_many_processes_and_findings_stay_whole_and_bounded():
    procs = []
    for r in range(64):
        threads = [Thread(tid=r * 1000 + i, name="rank%d-%d" % (r, i),
                          frames=[nat("f_%d_%d" % (r, i), "/x/libapp.so"), py("g", "/app/train.py", i)])
                   for i in range(50)]
        procs.append(Process(source="text", label="rank%d" % r, pid=r + 10, threads=threads))
    findings = [Finding(signature="s%d" % k, title="finding %d " % k + "x" * 300, severity="hang", process=k % 64,
                        summary="y" * 1500, fix=["z" * 800] * 3, threads=[(k % 64) * 1000])
                for k in range(200)]
    out = render_markdown(Snapshot(processes=procs, findings=findings))
    assert len(out) < LIMIT
    assert out.count("<details") == out.count("</details>")
    assert re.search(r"> \d+ more findings omitted", out)
    assert "### 1. finding 0 " in out  # the top finding is always there
    # no block was cut: every finding heading that made it in is followed by its fix list
    for m in re.finditer(r"^### (\d+)\. finding", out, re.M):
        assert "**Fix:**" in out[m.end():m.end() + 4000]
    assert len(re.findall(r"^- rank\d+ · ", out, re.M)) > 0  # compact one-line process summaries
