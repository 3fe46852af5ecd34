"""The one frame formatter (``hanganalyze.frametext``) and the one thread label
(``hanganalyze_gdbext.model.labels``), style by style, on frames of real captures in tests/data:
a py-spy dump of a PyTorch rank (native frames with and without a symbol, Python frames), an lldb
backtrace with inlined frames, a ``python -m asyncio pstree`` (coroutine frames), a gdb paste with
a frame outside any library."""

from __future__ import annotations

from functools import lru_cache

import pytest
from helpers import REPO

from hanganalyze.acquire.text import parse_text
from hanganalyze.frametext import MAX_LABEL, FrameStyle, clean_label, frame_text
from hanganalyze_gdbext.model import Frame, Snapshot, Thread
from hanganalyze_gdbext.model.labels import ThreadStyle, thread_label

DATA = REPO / "tests" / "data"


@lru_cache(maxsize=None)
def _snap(rel: str) -> Snapshot:
    return parse_text((DATA / rel).read_text())


def _frames(rel: str) -> list:
    """Every frame of a capture: its threads', then its asyncio tasks' coroutine frames."""
    procs = _snap(rel).processes
    return [f for p in procs for t in p.threads for f in t.all_frames()] + \
        [f for p in procs if p.asyncio for task in p.asyncio.all_tasks() for f in task.coroutine_stack]


def _frame(rel: str, pick) -> Frame:
    return next(f for f in _frames(rel) if pick(f))


def _styles(f: Frame, index: int = 0) -> dict:
    return {s.name: frame_text(f, s, index=index) for s in FrameStyle}


PYSPY = "job/fstrag.rank0.pyspy.txt"


def test_native_frame_with_library():
    f = _frame(PYSPY, lambda f: f.function == "cuStreamSynchronize")
    assert f.library == "libcuda.so.580.159.04" and f.file is None
    assert _styles(f, 5) == {
        "REPORT": "#5   cuStreamSynchronize () from libcuda.so.580.159.04",
        "LOCATION": "libcuda.so.580.159.04",
        "PLACE": "cuStreamSynchronize (libcuda.so.580.159.04)",
        "EVIDENCE": "cuStreamSynchronize (libcuda.so.580.159.04)",
        "WAIT": "cuStreamSynchronize",  # a wait names a source line or nothing
        "TASK_WAIT": "cuStreamSynchronize",
        "CALLER": "cuStreamSynchronize (None:None)",  # written for Python frames only
        "COROUTINE": "cuStreamSynchronize",
        "HINT": "cuStreamSynchronize",
        "RANK": "cuStreamSynchronize (libcuda.so.580.159.04)",
        "TRIAGE": "cuStreamSynchronize (libcuda.so)",  # the library without its version
        "TREE": "cuStreamSynchronize",
        "BUCKET": "c:cuStreamSynchronize",  # no library: the same code in another build is the same bucket
        "SAMPLE": "cuStreamSynchronize (libcuda.so.580.159.04)",
    }


def test_unknown_native_frame_with_and_without_library():
    f = _frame(PYSPY, lambda f: f.function is None and f.library)
    assert frame_text(f, FrameStyle.REPORT, index=0) == "#0   0x00007ff64ef51f90 in ?? () from libcuda.so.580.159.04"
    assert frame_text(f, FrameStyle.EVIDENCE) == "?? (libcuda.so.580.159.04)"
    assert frame_text(f, FrameStyle.TRIAGE) == "?? (libcuda.so)"
    assert frame_text(f, FrameStyle.TREE) == "?? (libcuda.so)"
    assert frame_text(f, FrameStyle.BUCKET) == "c:libcuda.so:?"  # a stripped frame still says where it is
    assert frame_text(f, FrameStyle.SAMPLE) == "?? (libcuda.so.580.159.04)"

    bare = _frame("realworld/horovod/horovod-3352-1.txt", lambda f: f.function is None and not f.library)
    assert frame_text(bare, FrameStyle.REPORT, index=1) == "#1   0x000000000061a240 in ?? ()"
    assert frame_text(bare, FrameStyle.LOCATION) == ""
    assert frame_text(bare, FrameStyle.EVIDENCE) == "??"
    assert frame_text(bare, FrameStyle.RANK) == "??"
    assert frame_text(bare, FrameStyle.TRIAGE) == "?? (no library)"
    assert frame_text(bare, FrameStyle.TREE) == "??"
    assert frame_text(bare, FrameStyle.BUCKET) == "c::?"
    assert frame_text(bare, FrameStyle.SAMPLE) == "?? (?)"


def test_inlined_native_frame_with_file_line():
    f = _frame("text/messy/lldb-4.txt", lambda f: f.inlined)
    assert (f.function, f.file, f.line, f.library) == ("__futex_abstimed_wait_common64", "futex-internal.c", 57,
                                                      "libc.so.6")
    # no address for an inlined frame (it has none of its own), the caller it was inlined into kept
    assert frame_text(f, FrameStyle.REPORT, index=0) == (
        "#0   __futex_abstimed_wait_common64 () [inlined] at futex-internal.c:57"
        " [inlined into __GI___futex_abstimed_wait_cancelable64]")
    assert frame_text(f, FrameStyle.EVIDENCE) == "__futex_abstimed_wait_common64 (futex-internal.c:57)"
    assert frame_text(f, FrameStyle.WAIT) == "__futex_abstimed_wait_common64 (futex-internal.c:57)"
    # job tables and the triage name the library, not the source file, of a native frame
    assert frame_text(f, FrameStyle.RANK) == "__futex_abstimed_wait_common64 (libc.so.6)"
    assert frame_text(f, FrameStyle.TRIAGE) == "__futex_abstimed_wait_common64 (libc.so)"
    assert frame_text(f, FrameStyle.SAMPLE) == "__futex_abstimed_wait_common64 (libc.so.6)"


def test_python_frame_with_file_line():
    f = _frame("text/asyncio_pstree_read.txt", lambda f: f.function == "StreamReader.readuntil")
    path = "/root/.cache/hanganalyze/pythons/3.14/lib/python3.14/asyncio/streams.py"
    assert (f.kind, f.file, f.line) == ("python", path, 677)
    assert _styles(f, 12) == {
        "REPORT": "#12  [py] StreamReader.readuntil (%s:677)" % path,
        "LOCATION": "%s:677" % path,
        "PLACE": "StreamReader.readuntil (%s:677)" % path,
        "EVIDENCE": "StreamReader.readuntil (%s:677)" % path,
        "WAIT": "StreamReader.readuntil (%s:677)" % path,
        "TASK_WAIT": "StreamReader.readuntil (%s:677)" % path,
        "CALLER": "StreamReader.readuntil (%s:677)" % path,
        "COROUTINE": "StreamReader.readuntil (streams.py:677)",
        "HINT": "StreamReader.readuntil (streams.py:677)",
        "RANK": "readuntil (streams.py:677)",  # the leaf name: a rank table is narrow
        "TRIAGE": "StreamReader.readuntil (streams.py:677)",
        "TREE": "StreamReader.readuntil (streams.py:677)",  # basename: venvs differ between hosts
        "BUCKET": "py:streams.py:readuntil",  # no line: an edit elsewhere in the file keeps the bucket
        "SAMPLE": "StreamReader.readuntil (%s:677)" % path,  # a moved line is progress
    }
    rank = _frame(PYSPY, lambda f: f.kind == "python")
    assert frame_text(rank, FrameStyle.REPORT, index=18) == "#18  [py] train_step (fr_strag.py:9)"
    assert frame_text(rank, FrameStyle.BUCKET) == "py:fr_strag.py:train_step"


def test_report_lines_like_gdb():
    n = Frame(kind="native", function="pthread_mutex_lock", library="/lib/libc.so.6", address=0x7F00)
    assert frame_text(n, FrameStyle.REPORT, index=3) == \
        "#3   0x0000000000007f00 in pthread_mutex_lock () from /lib/libc.so.6"
    c = Frame(kind="native", function="ncclProxyService(void*)", file="proxy.cc", line=9, address=0x10)
    assert frame_text(c, FrameStyle.REPORT, index=0) == \
        "#0   0x0000000000000010 in ncclProxyService(void*) at proxy.cc:9"
    h = Frame(kind="native", function="poll", library="/lib/libc.so.6", address=0x20, unwind="scan")
    assert frame_text(h, FrameStyle.REPORT, index=2).endswith("from /lib/libc.so.6 (heuristic: stack scan)")
    m = Frame(kind="native", marker=True, note="python frame chain corrupt: cycle")
    assert frame_text(m, FrameStyle.REPORT, index=1) == "#1   -- python frame chain corrupt: cycle --"
    assert frame_text(m, FrameStyle.TREE) == "-- python frame chain corrupt: cycle --"
    with pytest.raises(TypeError):
        frame_text(n, FrameStyle.REPORT)  # a report line without its number would misalign the stack


def _py(func, file, line):
    return Frame(kind="python", function=func, file=file, line=line)


def _nat(func, lib="/usr/lib/libtorch_cpu.so", addr=None):
    return Frame(kind="native", function=func, library=lib, address=addr)


def test_tree_labels():
    tree = FrameStyle.TREE
    assert frame_text(_py("train_step", "/srv/venv/app/train.py", 12), tree) == "train_step (train.py:12)"
    assert frame_text(_py("run", None, None), tree) == "run"
    tmpl = "c10d::ProcessGroupNCCL::WorkNCCL<int, std::vector<long> >::wait(std::chrono::duration<long>) const"
    assert frame_text(_nat(tmpl), tree) == "c10d::ProcessGroupNCCL::WorkNCCL::wait"
    assert frame_text(_nat("ncclProxyProgress.isra.0 [clone .cold]"), tree) == "ncclProxyProgress"
    assert frame_text(_nat(None, "/usr/lib/libcuda.so.580.159.04", 0x7F00), tree) == "?? (libcuda.so)"
    assert frame_text(_nat("??", "/usr/lib/libnccl.so.2.28.9"), tree) == "?? (libnccl.so)"
    assert frame_text(Frame(kind="native"), tree) == "??"
    assert frame_text(_nat("<lambda>"), tree) == "<lambda>"
    hostile = frame_text(_nat("evil\n#0 forged\x1b[2J" + "x" * 500), tree)
    assert "\n" not in hostile and "\x1b" not in hostile and len(hostile) <= MAX_LABEL
    assert clean_label("a\u202eb  c") == "a\\u202eb c"


def test_kept_differences_between_styles():
    """Differences no purpose asks for, kept so that no report, bucket id or sample comparison
    changed when the formatters became one; a change here changes outputs users see."""
    zero = _py("f", "/a/b.py", 0)
    assert frame_text(zero, FrameStyle.LOCATION) == "/a/b.py:0"
    assert frame_text(zero, FrameStyle.EVIDENCE) == "f (/a/b.py)"  # line 0 dropped
    assert frame_text(zero, FrameStyle.TRIAGE) == "f (b.py)"
    assert frame_text(zero, FrameStyle.RANK) == "f (b.py:0)"
    no_line = _py("g", "/a/b.py", None)
    assert frame_text(no_line, FrameStyle.HINT) == "g (b.py)"
    assert frame_text(no_line, FrameStyle.COROUTINE) == "g (b.py:None)"
    assert frame_text(no_line, FrameStyle.WAIT) == "g (/a/b.py:None)"
    nameless = Frame(kind="python")
    assert frame_text(nameless, FrameStyle.WAIT) == "??"
    assert frame_text(nameless, FrameStyle.TASK_WAIT) == "None"
    assert frame_text(nameless, FrameStyle.CALLER) == "None (None:None)"
    windows = _py("h", "C:\\app\\x.py", 3)
    assert frame_text(windows, FrameStyle.TREE) == "h (x.py:3)"
    assert frame_text(windows, FrameStyle.HINT) == "h (C:\\app\\x.py:3)"


def test_every_style_on_every_frame_of_real_captures():
    captures = [PYSPY, "text/messy/lldb-4.txt", "text/asyncio_pstree_read.txt", "realworld/horovod/horovod-3352-1.txt"]
    frames = [f for rel in captures for f in _frames(rel)]
    assert len(frames) > 40
    for f in frames:
        for style, text in _styles(f, 7).items():
            assert isinstance(text, str) and (text or style == "LOCATION"), (style, f)


# ------------------------------------------------------------------------------------ threads


def test_thread_label_styles_on_a_real_thread():
    t = _snap(PYSPY).processes[0].threads[0]
    assert (t.tid, t.name) == (1088, "MainThread")
    assert thread_label(t, ThreadStyle.REPORT) == 'Thread 1088 "MainThread"'
    assert thread_label(t, ThreadStyle.WHO) == "thread 1088 (MainThread)"
    assert thread_label(t, ThreadStyle.TRIAGE) == "thread MainThread LWP 1088"
    assert thread_label(t, ThreadStyle.WAIT) == "MainThread (LWP 1088)"


def test_thread_labels_without_name_or_tid():
    anon, unnumbered = Thread(tid=812), Thread(name="poster")
    assert [thread_label(anon, s) for s in ThreadStyle] == ["Thread 812", "thread 812", "thread LWP 812", "LWP 812"]
    assert [thread_label(unnumbered, s) for s in ThreadStyle] == \
        ['Thread "poster"', "thread poster", "thread poster", "poster (LWP None)"]
    assert thread_label(Thread(), ThreadStyle.WHO) == "a thread"
    assert thread_label(Thread(), ThreadStyle.TRIAGE) == "a thread"
    # a wait-for graph names an owner whose thread the snapshot does not hold by its LWP
    assert thread_label(None, ThreadStyle.WAIT, tid=813) == "LWP 813"
    # ... as evidence naming a thread that was not read, and an event loop's thread, do
    assert thread_label(None, ThreadStyle.REPORT, tid=813) == "Thread 813"
    assert thread_label(None, ThreadStyle.WHO, tid=813) == "thread 813"


def test_report_thread_label_hides_inherited_os_name():
    def label(t: Thread, default=None) -> str:
        return thread_label(t, ThreadStyle.REPORT, default_os_name=default)

    assert label(Thread(tid=5, name="loader", os_name="python3.12"), "python3.12") == 'Thread 5 "loader"'
    assert label(Thread(tid=5, name="loader", os_name="pt_data_0"), "python3.12") == \
        'Thread 5 "loader" (os: pt_data_0)'
    assert label(Thread(tid=None, name="x")) == 'Thread "x"'
    assert label(Thread(tid=7, python_name="Worker", os_name="pt_0")) == 'Thread 7 "Worker" (os: pt_0)'


def test_every_style_is_in_the_table():
    """The module docstrings list each style with its purpose: a new style is documented."""
    import hanganalyze.frametext as ft
    import hanganalyze_gdbext.model.labels as lb

    for style in FrameStyle:
        assert "\n%s " % style.name in ft.__doc__, style
    for tstyle in ThreadStyle:
        assert "\n%s " % tstyle.name in lb.__doc__, tstyle
