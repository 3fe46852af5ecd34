"""Waits told by their mechanism (issue 32), each on a real stack and a near miss.

The stacks are public pastes (tests/data/text/mechanisms/SOURCES.md) and corpus dumps
(tests/data/realworld/); a near miss changes the one thing the mechanism reads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest
from helpers import REPO

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.common import parse_py_file_line
from hanganalyze.acquire.text.gdbwaits import OwnerPrints, mutex_wait
from hanganalyze.analyze import triage
from hanganalyze.analyze.forkchild import forked, inherited_lock_wait
from hanganalyze.analyze.sigmodel import FunctionMatcher
from hanganalyze.analyze.sourcewait import line_category, source_wait
from hanganalyze.analyze.threadchoice import helper_order, in_user_code, is_helper
from hanganalyze.names import basename, glibc_alias, normalize_function, normalize_native_name, wait_name
from hanganalyze_gdbext.model import Frame, Process, Thread

DATA = REPO / "tests" / "data" / "text" / "mechanisms"
CORPUS = REPO / "tests" / "data" / "realworld"


def analyze(text: str, db):
    return pipeline.analyze(parse_text(text), db)


def of(snap, sig: str):
    return [f for f in snap.findings if f.signature == sig]


# --------------------------------------------------------------------------------------------
# Native names: one normaliser, every form
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, exported", [
    ("__GI___dl_iterate_phdr", "dl_iterate_phdr"),
    ("___pthread_mutex_lock", "pthread_mutex_lock"),
    ("__libc_recv", "recv"),
    ("__pthread_join", "pthread_join"),
    ("__GI___poll", "poll"),
    ("__dl_iterate_phdr", "dl_iterate_phdr"),
])
def test_glibc_aliases_are_the_exported_name(raw, exported):
    assert glibc_alias(normalize_function(raw)) == exported
    assert wait_name(normalize_native_name(raw)) == exported


@pytest.mark.parametrize("raw, name", [
    ("pthread_mutex_lock.isra.0", "pthread_mutex_lock"),
    ("ncclProxyProgress.part.3", "ncclProxyProgress"),
    ("take_gil.constprop.12", "take_gil"),
    ("c10::Error::Error(std::string) [clone .cold]", "c10::Error::Error"),
    ("pthread_join@plt", "pthread_join"),
    ("pthread_cond_wait@@GLIBC_2.3.2", "pthread_cond_wait"),
    ("sem_wait@GLIBC_2.2.5", "sem_wait"),
])
def test_clone_suffixes_plt_and_symbol_versions_go(raw, name):
    assert normalize_native_name(raw) == name


def test_near_miss_a_single_underscore_or_a_cxx_name_is_no_alias():
    # _dl_open and _PyEval_EvalFrameDefault are their own functions, not glibc's aliases of others
    assert glibc_alias("_dl_open") == "_dl_open"
    assert glibc_alias("_PyEval_EvalFrameDefault") == "_PyEval_EvalFrameDefault"
    assert glibc_alias("__cxxabiv1::__terminate") == "__cxxabiv1::__terminate"


def test_windows_paths_give_their_basename():
    assert basename(r"C:\Users\me\AppData\Local\Programs\Python\Python310\lib\multiprocessing\spawn.py") == "spawn.py"
    assert basename("/usr/lib/python3.10/threading.py") == "threading.py"


def test_a_signature_naming_dl_iterate_phdr_matches_glibcs_alias_on_a_real_stack(db):
    m = FunctionMatcher.compile(["dl_iterate_phdr"], False)
    assert m.matches("__GI___dl_iterate_phdr") and m.matches("dl_iterate_phdr")
    assert not m.matches("dl_iterate_phdr_callback")  # near miss: another function
    snap = analyze((DATA / "gperftools-1583-dl_iterate_phdr.txt").read_text(), db)
    tri = of(snap, "triage")[0]
    assert tri.triage.wait == "loader-lock", tri.summary
    assert tri.triage.threads[0].waits_in.startswith("__GI___dl_iterate_phdr")


# --------------------------------------------------------------------------------------------
# The innermost Python source line
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line, category", [
    ("with self._lock:", "lock"),                       # sentry-python#3753
    ("with pool_container.lock:", "lock"),              # dd-trace-py#10504
    ("self.lock.acquire()", "lock"),
    ("t.join()", "join"),
    ("item = self.queue.get(timeout=1)", "queue"),
    ("self._started.wait()", "condition"),
    ("r, w, x = select.select(rlist, [], [])", "io"),
    ("conn, _ = self._srv.accept()", "network"),       # connectonion#644
    ("data = sock.recv(4096)", "network"),
    ("time.sleep(5)", "sleep"),
    ("return fut.result()", "future"),
    ("pid, sts = os.waitpid(self.pid, flag)", "child"),  # pytorch#39570
    ("sys.stderr.flush()", "io"),                        # domain-scan#157
    ("torch.distributed.broadcast(_has_data, src=0)", "collective"),
    ("dist.all_reduce(loss, op=dist.ReduceOp.SUM)", "collective"),
    ("dist.barrier()", "collective"),
    ("accelerator.wait_for_everyone()", "collective"),
    ("hvd.allreduce(tensor, name='loss')", "collective"),
    ("mp.spawn(train, args=(world_size,), nprocs=world_size)", "child"),
    ("join=True,", "child"),                             # fairseq#4619: torch's spawn(..., join=True)
])
def test_source_lines_name_their_wait(line, category):
    assert line_category(line) == category


@pytest.mark.parametrize("line", [
    "with open(path) as f:", "with torch.no_grad():", "d.get(key)", '", ".join(parts)',
    "os.path.join(root, name)", "return inner_func(*args, **kwargs)", "# with self._lock:",
    "dist.is_initialized()", "rank = dist.get_rank()", "x = broadcast(a)",  # no wait for peers
    "ctx = mp.get_context('spawn')", "join=False,",
])
def test_near_miss_lines_that_only_look_like_waits(line):
    assert line_category(line) is None


def _printed_stack(path: Path) -> List[Frame]:
    """A "(most recent call first)" dump's frames with their source lines, innermost first."""
    frames: List[Frame] = []
    for raw in path.read_text().splitlines():
        parsed = parse_py_file_line(raw.strip())
        if parsed is not None:
            frames.append(parsed[0])
        elif frames and raw.startswith("    ") and frames[-1].source is None:
            frames[-1].source = raw.strip()
    return frames


def test_a_python_only_stack_on_with_self_lock_waits_for_a_lock():
    frames = _printed_stack(DATA / "sentry-python-3753-with-lock.txt")
    assert source_wait(frames) == ("lock", 2, "with self._lock:")  # through ddtrace's lock proxy
    t = Thread(tid=1, frames=frames)
    r = triage.classify(Process(source="text", threads=[t]), t)
    assert (r.category.id, r.frame, r.how) == ("lock", 2, "source line")


def test_near_miss_the_same_stack_on_another_line_runs():
    frames = _printed_stack(DATA / "sentry-python-3753-with-lock.txt")
    frames[2].source = "self._thread.start()"
    assert source_wait(frames) is None
    t = Thread(tid=1, frames=frames)
    assert triage.classify(Process(source="text", threads=[t]), t).category.id == "runs"
    # a native frame innermost tells the wait itself: the Python line is not read
    native = [Frame(function="epoll_wait")] + _printed_stack(DATA / "sentry-python-3753-with-lock.txt")
    assert source_wait(native) is None


def test_a_traceback_that_raised_or_was_cut_is_not_read_as_a_wait(db):
    # borg#405: the second traceback stops at cache.py:143 (`...acquire()`), cut before its exception line
    tri = of(analyze((CORPUS / "borg/borg-405-1.txt").read_text(), db), "triage")[0]
    assert tri.triage.wait == "file-lock", tri.summary
    ctrl_c = ('Traceback (most recent call last):\n  File "/srv/app/cache.py", line 42, in refresh\n'
              '    with self._lock:\nKeyboardInterrupt\n')
    assert of(analyze(ctrl_c, db), "triage")[0].triage.wait == "lock"
    raised = ctrl_c.replace("KeyboardInterrupt", "AttributeError: '_thread.lock' object has no attribute 'x'")
    assert of(analyze(raised, db), "triage")[0].triage.wait != "lock"


# --------------------------------------------------------------------------------------------
# Fork children
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["kubeless/runtimes-94-1.txt", "domain-scan/domain-scan-157-1.txt"])
def test_a_forked_child_flushing_a_std_stream_waits_for_an_inherited_lock(db, name):
    text = (CORPUS / name).read_text()
    tri = of(analyze(text, db), "triage")[0]
    assert tri.triage.wait == "lock", tri.summary
    assert tri.triage.threads[0].inherited == "forked" and "forked child" in tri.summary


def test_near_miss_the_same_flush_without_the_fork_frames_is_no_inherited_lock(db):
    text = (CORPUS / "domain-scan/domain-scan-157-1.txt").read_text()
    lines = text.splitlines()
    # drop multiprocessing's child path (process.py's _bootstrap, popen_fork.py's _launch) and their lines
    kept, skip = [], False
    for line in lines:
        if re.search(r"multiprocessing/(process|popen_fork)\.py", line):
            skip = True
            continue
        if skip and line.startswith("    "):
            continue
        skip = False
        kept.append(line)
    tri = of(analyze("\n".join(kept) + "\n", db), "triage")[0]
    assert tri.triage.threads[0].inherited is None and tri.triage.wait != "lock", tri.summary


def test_a_spawned_child_is_not_forked():
    boot = Frame(kind="python", function="_bootstrap", file="/usr/lib/python3.10/multiprocessing/process.py")
    lock = Frame(kind="python", function="acquire", file="/usr/lib/python3.10/threading.py")
    launch = Frame(kind="python", function="_launch", file="/usr/lib/python3.10/multiprocessing/popen_fork.py")
    spawn = Frame(kind="python", function="spawn_main", file=r"C:\Python310\lib\multiprocessing\spawn.py")
    assert forked([lock, boot, launch]) == "forked"
    assert forked([lock, boot]) == "likely"
    assert forked([lock, boot, spawn]) is None
    assert inherited_lock_wait([lock, boot, spawn], "lock") is None
    assert inherited_lock_wait([lock], "lock") is None  # near miss: a process that was never forked


def test_the_signature_knows_a_forked_child_on_a_python_lock(db):
    # kubeless's real child stack (runtimes#94), its innermost frame logging's module lock (3.7's
    # _acquireLock, line 219: `_lock.acquire()`) instead of the stream flush
    text = (CORPUS / "kubeless/runtimes-94-1.txt").read_text()
    first = text.splitlines()[0]
    assert "_flush_std_streams" in first
    logging_lock = ('  File "/opt/miniconda3/lib/python3.7/logging/__init__.py", line 219 in _acquireLock\n'
                    '  File "/opt/miniconda3/lib/python3.7/logging/__init__.py", line 1293 in getLogger\n')
    child = text.replace(first + "\n", logging_lock, 1)
    f = of(analyze(child, db), "fork-child-inherited-lock")
    assert f and f[0].confidence == pytest.approx(0.6), [x.signature for x in analyze(child, db).findings]
    # near miss: the same lock wait in a process multiprocessing did not start
    plain = "\n".join(x for x in child.splitlines() if "multiprocessing/" not in x) + "\n"
    assert not of(analyze(plain, db), "fork-child-inherited-lock")
    # the start method cut from the paste: a lead, not a confident answer
    cut = "\n".join(x for x in child.splitlines() if "popen_fork.py" not in x and "context.py" not in x) + "\n"
    g = of(analyze(cut, db), "fork-child-inherited-lock")
    assert g and g[0].confidence < 0.5


# --------------------------------------------------------------------------------------------
# Lock owners and the GIL holder in gdb pastes
# --------------------------------------------------------------------------------------------


def test_gdb_printed_mutex_arguments_are_the_wait_resource():
    text = (DATA / "trafficserver-10129-mutex-arg.txt").read_text()
    t = parse_text(text).processes[0].threads[0]
    assert (t.waits.kind, t.waits.resource, t.waits.frame) == ("mutex", "0x28c29b0", 1)
    # near miss: the GIL's mutex is the GIL's wait, not a mutex wait
    u = Thread(frames=[Frame(function="__lll_lock_wait")])
    mutex_wait(u, "__lll_lock_wait (futex=0x879128 <_PyRuntime+392>, private=0)")
    assert u.waits is None


def test_gdb_printed_owner_joins_the_thread_with_that_lwp():
    prints = OwnerPrints()
    for line in (DATA / "opencog-2354-owner-print.txt").read_text().splitlines():
        prints.line(line.strip())
    assert prints.owners == {"0x7ffff6c296a0": 24352}
    # the printout applied to a paste whose threads wait for that mutex and the owner's LWP is in it
    # (gdb's order: the higher thread number first)
    text = "Thread 25 (Thread 0x7fffcaffd700 (LWP 24352)):\n#0  __lll_lock_wait () at lowlevellock.S:135\n\n"
    text += (DATA / "trafficserver-10129-mutex-arg.txt").read_text().replace("0x28c29b0", "0x7ffff6c296a0")
    text += (DATA / "opencog-2354-owner-print.txt").read_text().split("\n\n")[0] + "\n"
    proc = parse_text(text).processes[0]
    w = proc.thread_by_tid(55858).waits
    assert w.owner_tid == 24352 and "paste" in (w.owner_inferred or "")
    # near miss: an owner not among the paste's threads is no edge
    proc = parse_text(text.replace("LWP 24352", "LWP 24353")).processes[0]
    assert proc.thread_by_tid(55858).waits.owner_tid is None


def test_a_gil_holder_waiting_for_a_lock_the_gil_waiter_holds_is_a_cycle(db):
    snap = analyze((DATA / "cpython-106883-gil-head-lock.txt").read_text(), db)
    cyc = of(snap, "deadlock-cycle")
    assert len(cyc) == 1 and sorted(cyc[0].threads) == [118868, 120217], [f.summary for f in snap.findings]
    assert cyc[0].confidence < 1.0  # a paste is not memory; the lock's owner by elimination
    assert "holds the GIL" in cyc[0].summary and "from a paste" in cyc[0].summary
    gil = snap.processes[0].thread_by_tid(118868).waits
    assert gil.kind == "gil" and gil.owner_tid == 120217


def test_near_miss_a_lock_wait_that_released_the_gil_is_two_waits(db):
    # the same two threads, the head-lock waiter reaching its wait through threading's Lock.acquire
    # (lock_PyThread_acquire_lock releases the GIL around the wait): nobody holds the GIL
    text = (DATA / "cpython-106883-gil-head-lock.txt").read_text().replace(
        "tstate_delete_common (tstate=0x7f8cc417c250, gilstate=0x8791d8 <_PyRuntime+568>)",
        "lock_PyThread_acquire_lock (self=0x7f8cc417c250, args=0x0)")
    snap = analyze(text, db)
    assert not of(snap, "deadlock-cycle")
    w = snap.processes[0].thread_by_tid(118868).waits
    assert w is None or w.owner_tid is None


# --------------------------------------------------------------------------------------------
# The thread that matters
# --------------------------------------------------------------------------------------------


def test_runtime_helper_threads_come_after_the_programs_thread():
    proc = parse_text((REPO / "tests/data/text/cudagdb_attach_host_bt.txt").read_text()).processes[0]
    helpers = [t for t in proc.threads if is_helper(t)]
    program = [t for t in proc.threads if not is_helper(t) and t.frames]
    assert helpers and program
    assert all(helper_order(t, proc) == 2 for t in helpers if not t.current)
    tab = triage.table()
    lock = next(c for c in tab.categories if c.id == "lock")
    gpu = next(c for c in tab.categories if c.id == "gpu")
    # cuda-gdb's helper thread waiting on a lock (rank 1) listed first, the host thread in a GPU wait
    rows = [triage.ThreadTriage(helpers[0], lock), triage.ThreadTriage(program[0], gpu)]
    assert triage.subject(proc, rows)[0].thread is program[0]


def test_near_miss_a_helper_is_the_answer_when_nothing_else_waits():
    proc = parse_text((REPO / "tests/data/text/cudagdb_attach_host_bt.txt").read_text()).processes[0]
    helper = next(t for t in proc.threads if is_helper(t) and not t.current)
    other = Thread(tid=999, frames=[Frame(function="compute_kernel_on_host", library="/opt/app/libwork.so")])
    proc.threads.append(other)
    tab = triage.table()
    lock = next(c for c in tab.categories if c.id == "lock")
    rows = [triage.ThreadTriage(other, tab.runs), triage.ThreadTriage(helper, lock)]
    assert triage.subject(proc, rows)[0].thread is helper  # an unknown thread that runs does not outrank it


def test_user_code_is_a_file_outside_the_library_and_packages():
    own = Thread(frames=[Frame(kind="python", function="main", file="/home/me/train.py")])
    lib = Thread(frames=[Frame(kind="python", function="get", file="/usr/lib/python3.10/queue.py"),
                         Frame(kind="python", function="_pin_memory_loop",
                               file="/venv/lib/python3.10/site-packages/torch/utils/data/_utils/pin_memory.py")])
    assert in_user_code(own) and not in_user_code(lib)
    assert is_helper(lib) and not is_helper(own)
