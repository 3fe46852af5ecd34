"""gdb backtraces captured from real processes (tests/data/text/SOURCES.md) parse to the right threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.gdb import parse_frame_body
from hanganalyze.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "text"


def load(name: str) -> str:
    return (DATA / name).read_text()


def only_process(name: str, fmt=None):
    snap = parse_text(load(name), fmt)
    assert len(snap.processes) == 1
    proc = snap.processes[0]
    assert proc.source == "text"
    return proc


@pytest.mark.parametrize("name", ["gdb_mutex_hang_bt.txt", "gdb_mutex_hang_bt_full.txt"])
def test_core_thread_apply_all_bt(name):
    proc = only_process(name)
    assert [t.tid for t in proc.threads] == [8134, 8133, 8131]
    assert proc.argv == ["/work/main/tests/fixtures/build/txt_mutex_hang"]
    t3, t2, t1 = proc.threads
    assert t1.current and not t2.current and not t3.current
    assert t3.pthread_id == 0x7F13E18306C0
    assert [f.function for f in t3.frames] == [
        "futex_wait", "__GI___lll_lock_wait", "lll_mutex_lock_optimized", "___pthread_mutex_lock",
        "backward", "start_thread", "clone3",
    ]
    back = t3.frames[4]
    assert (back.file, back.line, back.address) == ("tests/fixtures/txt_mutex_hang.c", 24, 0x561001C72229)
    assert t2.frames[4].function == "forward" and t2.frames[4].line == 16
    assert t1.frames[-1].function == "main" and t1.frames[-1].line == 38
    assert all(f.kind == "native" for t in proc.threads for f in t.frames)
    # bt full's locals ("__ret = -512", "No locals.") are neither frames nor messages
    assert proc.messages == []


def test_bt_full_equals_bt():
    a = only_process("gdb_mutex_hang_bt.txt")
    b = only_process("gdb_mutex_hang_bt_full.txt")
    assert [t.to_dict() for t in a.threads] == [t.to_dict() for t in b.threads]


def test_live_stripped_names_and_unknown_frames():
    proc = only_process("gdb_live_stripped_bt.txt")
    assert proc.pid == 8328  # from "[Inferior 1 (process 8328) detached]"
    assert [(t.tid, t.name) for t in proc.threads] == [
        (8331, "bwd-worker"), (8330, "fwd-worker"), (8328, "txt_mutex_hang."),
    ]
    unknown = proc.threads[0].frames[4]
    assert unknown.function is None and unknown.address == 0x558B7A0E2229 and unknown.library is None
    assert proc.threads[2].frames[5].function == "__libc_start_call_main"


def test_single_bt_is_one_current_thread():
    proc = only_process("gdb_live_one_bt.txt")
    assert len(proc.threads) == 1
    t = proc.threads[0]
    assert t.current and t.tid is None
    assert len(t.frames) == 8
    assert t.frames[3].function == "__pthread_clockjoin_ex"


def test_abort_with_cxx_names_and_libraries():
    proc = only_process("gdb_joinable_abort_bt.txt")
    assert proc.signal == "SIGABRT"
    assert "terminate called without an active exception" in proc.messages
    main = proc.threads[2]
    assert main.tid == 8359 and main.current and main.name == "txt_joinable"
    names = [f.function for f in main.frames]
    assert names[:4] == ["__pthread_kill_implementation", "__pthread_kill_internal", "__GI_raise", "__GI_abort"]
    assert main.frames[4].function is None
    assert main.frames[4].library == "/lib/x86_64-linux-gnu/libstdc++.so.6"
    assert main.frames[6].function == "std::terminate()"
    assert main.frames[6].library == "/lib/x86_64-linux-gnu/libstdc++.so.6"
    assert main.frames[8].function == "std::thread::~thread"
    assert main.frames[8].file == "/usr/include/c++/12/bits/std_thread.h" and main.frames[8].line == 151
    assert main.frames[9].function == "start_and_forget"
    worker = proc.threads[1]
    assert worker.frames[11].function == "std::thread::_Invoker<std::tuple<void (*)()> >::operator()"


def test_stripped_abort():
    proc = only_process("gdb_joinable_stripped_bt.txt")
    assert proc.signal == "SIGABRT"
    assert [t.tid for t in proc.threads] == [8464, 8463, 8458]
    main = proc.threads[2]
    assert [f.function for f in main.frames[4:7]] == [None, None, "std::terminate()"]


@pytest.mark.parametrize(
    "body, expect",
    [
        ("0x00007f in ?? () from /usr/lib/libcuda.so.1", (None, None, None, "/usr/lib/libcuda.so.1", 0x7F)),
        ("<signal handler called>", ("<signal handler called>", None, None, None, None)),
        (
            "0x1 in std::terminate() () from /lib/libstdc++.so.6",
            ("std::terminate()", None, None, "/lib/libstdc++.so.6", 1),
        ),
        ("foo (s=0x1 \"look at x.c:3\") at a.c:9", ("foo", "a.c", 9, None, None)),
        ("0x2 in k<<<(1,1,1),(32,1,1)>>> (x=0x7) at k.cu:12", ("k<<<(1,1,1),(32,1,1)>>>", "k.cu", 12, None, 2)),
        ("0x3 in ncclProxyService(void*) ()", ("ncclProxyService(void*)", None, None, None, 3)),
        ("0x4 in operator() (this=0x1) at x.cpp:1", ("operator()", "x.cpp", 1, None, 4)),
    ],
)
def test_frame_bodies(body, expect):
    f = parse_frame_body(body)
    assert (f.function, f.file, f.line, f.library, f.address) == expect


def test_wrapped_frame_lines_and_crlf():
    text = (
        "Thread 2 (Thread 0x7f00 (LWP 77) \"pt_nccl_watchdg\"):\r\n"
        "#0  0x00007f1 in __futex_abstimed_wait_common64 (private=128, cancel=true, abstime=0x0, \r\n"
        "    op=265, expected=0, futex_word=0x1) at ./nptl/futex-internal.c:57\r\n"
        "#1  0x00007f2 in c10d::ProcessGroupNCCL::ncclCommWatchdog() ()\r\n"
        "    from /opt/torch/lib/libtorch_cuda.so\r\n"
        "\x1b[1;32m#2\x1b[0m  0x00007f3 in ?? () from /lib/libstdc++.so.6\r\n"
    )
    proc = parse_text(text).processes[0]
    (t,) = proc.threads
    assert t.tid == 77 and t.name == "pt_nccl_watchdg"
    assert t.frames[0].function == "__futex_abstimed_wait_common64" and t.frames[0].line == 57
    assert t.frames[1].function == "c10d::ProcessGroupNCCL::ncclCommWatchdog()"
    assert t.frames[1].library == "/opt/torch/lib/libtorch_cuda.so"
    assert t.frames[2].function is None and t.frames[2].library == "/lib/libstdc++.so.6"
    assert proc.messages == []


def test_cuda_gdb_extra_lines_and_rank_prefixes():
    text = "\n".join([
        "[rank0]: NVIDIA (R) CUDA Debugger",
        "[rank0]: [New Thread 0x7fff (LWP 11)]",
        "[rank0]: CUDA Exception: Warp Illegal Address",
        "[rank0]: Thread 1 (Thread 0x7f (LWP 10) \"python\"):",
        "[rank0]: #0  0x00007f in cuStreamSynchronize () from /usr/lib/libcuda.so.1",
        "[rank1]: Thread 1 (Thread 0x7f (LWP 20) \"python\"):",
        "[rank1]: #0  0x00007f in ?? () from /usr/lib/libcuda.so.1",
        "[rank1]: #1  0x00007e in ncclCommAbort () from /usr/lib/libnccl.so.2",
    ])
    snap = parse_text(text)
    assert [p.label for p in snap.processes] == ["rank0", "rank1"]
    assert snap.processes[0].messages == ["CUDA Exception: Warp Illegal Address"]
    assert snap.processes[0].threads[0].frames[0].function == "cuStreamSynchronize"
    assert snap.processes[1].threads[0].tid == 20
    assert snap.processes[1].threads[0].frames[1].function == "ncclCommAbort"


def test_forced_format_and_unknown_text():
    with pytest.raises(InputError, match="could not recognise the text"):
        parse_text("hello\nworld\n")
    with pytest.raises(InputError, match="unknown --input-format"):
        parse_text(load("gdb_live_one_bt.txt"), "dtrace")
    proc = only_process("gdb_live_one_bt.txt", "gdb")
    assert len(proc.threads) == 1


def test_terminal_wrapped_copy_equals_batch_output():
    """gdb in a 90-column tmux window, copied from the pane: lines cut mid-word at column 90."""
    wrapped = only_process("gdb_tmux_width90_bt.txt")
    batch = only_process("gdb_mutex_hang_bt.txt")
    assert [t.to_dict() for t in wrapped.threads] == [t.to_dict() for t in batch.threads]
    assert wrapped.messages == []  # banner, prompts and the source echo are gdb's own lines
    assert wrapped.threads[0].frames[0].file == "../sysdeps/nptl/futex-internal.h"
    assert wrapped.threads[0].frames[5].line == 442  # "...pthread_create.c:44" + "2"


def test_unwrap_leaves_unwrapped_text_alone():
    from hanganalyze.acquire.text.common import terminal_width, unwrap_terminal

    lines = load("gdb_joinable_abort_bt.txt").splitlines()
    assert terminal_width(lines) is None
    assert unwrap_terminal(lines) is lines
    cut = [x for i in range(3)  # three different lines at the width: one line repeated is no cut
           for x in ("#0  0x1 in f (a=1, b=2) at x%d.c:1" % i + "y" * 40, "2", "#1  0x2 in g () at y.c:3")]
    width = len(cut[0])
    assert terminal_width(cut) == width
    assert unwrap_terminal(cut)[:2] == [cut[0] + "2", cut[2]]


# ---- cuda-gdb 12.x on an H100 (tests/fixtures/txt_cuda_spin.cu; SOURCES.md) ----------------


def test_cudagdb_gpu_only_hang_host_threads():
    proc = only_process("cudagdb_attach_host_bt.txt")
    assert proc.pid == 651
    assert [(t.tid, t.name) for t in proc.threads] == [
        (700, "spin"), (654, "cuda-EvtHandlr"), (653, "cuda00001400006"), (651, "spin"),
    ]
    main = proc.threads[3]
    libcuda = "/usr/local/nvidia/lib64/libcuda.so.1"
    assert all(f.function is None and f.library == libcuda for f in main.frames[:9])
    assert [f.function for f in main.frames[9:]] == [
        "cuCtxSynchronize_v2", "libcudart_static_ff466e58390a44a174cd1b2084ede65f6033356c",
        "cudaDeviceSynchronize", "main",
    ]
    assert main.frames[-1].file == "tests/fixtures/txt_cuda_spin.cu" and main.frames[-1].line == 27
    assert proc.messages == ['Thread 1 "spin" stopped.']


def test_cudagdb_device_focus_becomes_a_device_thread():
    proc = only_process("cudagdb_attach_device_bt.txt")
    assert len(proc.threads) == 5
    dev = proc.threads[-1]
    assert dev.tid is None and dev.name == "CUDA kernel 0, grid 1, block (0,0,0), thread (0,0,0)"
    (f,) = dev.frames
    assert f.function == "spin_until<<<(1,1,1),(32,1,1)>>>"
    assert (f.file, f.line, f.address) == ("tests/fixtures/txt_cuda_spin.cu", 8, 0x7FEFBF7AC310)
    assert any(m.startswith("Kernel Parent Dev Grid Status") for m in proc.messages)  # info cuda kernels


def test_cudagdb_illegal_address():
    proc = only_process("cudagdb_illegal_address.txt")
    assert proc.signal == "CUDA_EXCEPTION_14"
    assert "CUDA Exception: Warp Illegal Address" in proc.messages
    host = next(t for t in proc.threads if t.tid == 802)
    assert host.current and host.frames[-1].function == "main" and host.frames[-1].line == 17
    dev = proc.threads[-1]
    assert dev.frames[0].function == "write_bad<<<(1,1,1),(32,1,1)>>>" and dev.frames[0].line == 12


def test_cudagdb_without_device_debug_info():
    proc = only_process("cudagdb_attach_host_nodebug_bt.txt")
    assert [t.tid for t in proc.threads] == [869, 824, 822, 820]
    assert proc.threads[3].frames[-2].function == "cudaDeviceSynchronize"
    assert proc.messages == ['Thread 1 "spin_nodebug" stopped.']  # the stop echo is gdb's own


def test_two_gdb_sessions_pasted_one_after_the_other_are_two_processes():
    text = load("gdb_live_stripped_bt.txt") + load("gdb_joinable_abort_bt.txt")
    first, second = parse_text(text).processes
    assert first.pid == 8328 and [t.tid for t in first.threads] == [8331, 8330, 8328]
    assert second.signal == "SIGABRT" and [t.tid for t in second.threads] == [8363, 8362, 8359]
    assert first.signal is None and "terminate called without an active exception" in second.messages


def test_files_concatenated_by_tail_are_labelled_by_file():
    """``tail -n +1 rank0.txt rank1.txt``: a gdb paste and a py-spy dump, one per rank."""
    r0, r1 = parse_text(load("tail_two_files.txt")).processes
    assert (r0.label, r0.pid, r0.notes) == ("rank0", 8328, ["parsed as gdb backtrace"])
    assert (r1.label, r1.pid, r1.notes) == ("rank1", 10719, ["parsed as py-spy dump"])
    assert [t.name for t in r1.threads] == ["MainThread", "loader-a", "loader-b", "heartbeat"]


# -- gdbext's frame filter: "[py]" frames in place in plain ``bt`` ---------------------------------
def _py_frames(t):
    return [(f.function, f.file.rsplit("/", 1)[-1], f.line) for f in t.frames if f.kind == "python"]


@pytest.mark.parametrize("name, lib", [("gdbext_bt_py312.txt", "3.12"), ("gdbext_bt_sys311.txt", "3.11")])
def test_frame_filter_python_frames_in_place(name, lib):
    """``bt`` then ``thread apply all bt`` with gdbext loaded: the selected thread's ``bt`` is not
    a fifth thread; every "[py]" line is a Python frame above the eval frame that runs it."""
    proc = only_process(name)
    assert len(proc.threads) == 4 and not proc.messages
    main, = [t for t in proc.threads if t.current]
    assert main is proc.threads[-1] and all(t.merge == "merged" for t in proc.threads)
    assert _py_frames(main)[2:] == [("main", "txt_deadlock.py", 49), ("<module>", "txt_deadlock.py", 53)]
    assert [f[0] for f in _py_frames(main)[:2]] == ["Thread._wait_for_tstate_lock", "Thread.join"]
    assert all(f.file.endswith("/python%s/threading.py" % lib) for f in main.frames[:40]
               if f.kind == "python" and f.function.startswith("Thread."))
    i = max(i for i, f in enumerate(main.frames) if f.kind == "python")
    assert main.frames[i + 1].function == "_PyEval_EvalFrameDefault" and main.frames[i + 1].kind == "native"
    assert all(f.address is None for f in main.frames if f.kind == "python")
    by_fn = {_py_frames(t)[0][0]: t for t in proc.threads[:3]}
    assert set(by_fn) == {"sleeper", "take_b_then_a", "take_a_then_b"}
    assert _py_frames(by_fn["take_a_then_b"])[0] == ("take_a_then_b", "txt_deadlock.py", 21)
    assert [f[0] for f in _py_frames(by_fn["sleeper"])] == [
        "sleeper", "Thread.run", "Thread._bootstrap_inner", "Thread._bootstrap"]
    # one native frame per gdb frame ("#0".."#12": the eval frame's line carries no number)
    natives = [f for f in by_fn["sleeper"].frames if f.kind == "native"]
    evals = [f for f in natives if f.function == "_PyEval_EvalFrameDefault"]
    assert natives[-1].function == "clone3" and len(evals) == (1 if lib == "3.12" else 2)
    assert len(natives) == 13


def test_frame_filter_unplaced_frames_stay_apart():
    """"[py?]" lines (frames the merge could not place) follow the last frame: kept apart, as
    python_frames of an "unmerged" thread, never interleaved with the native frames."""
    proc = only_process("gdbext_bt_unplaced_py39.txt")
    t, = proc.threads
    assert t.merge == "unmerged" and t.current
    assert not [f for f in t.frames if f.kind == "python"] and t.frames[-1].function == "clone3"
    assert len(t.frames) == 56
    assert [(f.function, f.line) for f in t.python_frames] == [
        ("level3", 42), ("level1", 50), ("waiter_main", 54), ("run", 917), ("_bootstrap_inner", 980),
        ("_bootstrap", 937)]


@pytest.mark.parametrize("body, expect", [
    ("0x00007f..12 in [py] main () at /a/b.py:49", None),  # not hex: not a pc, not the filter
    ("0x00007faedd510812 in [py] Foo.<locals>.<lambda> () at /a dir/b c.py:7",
     ("Foo.<locals>.<lambda>", "/a dir/b c.py", 7, True)),
    ("[py?] <module> () at x.py:3", ("<module>", "x.py", 3, False)),
    ("[py] run ()", ("run", None, None, True)),
    ("[python] run () at x.py:1", None),
])
def test_frame_filter_line_bodies(body, expect):
    from hanganalyze.acquire.text.gdb import filter_python_frame

    got = filter_python_frame(body)
    if expect is None:
        assert got is None
    else:
        f, placed = got
        assert (f.function, f.file, f.line, placed) == expect and f.kind == "python"


FATAL_BT = (
    "#4  0x00007f11e4ac47f3 in __GI_abort () at ./stdlib/abort.c:79\n"
    "#5  0x0000000000625f20 in fatal_error_exit (status=status@entry=-1) at ../Python/pylifecycle.c:2624\n"
    "#6  0x000000000062c18f in fatal_error (fd=<optimized out>, header=header@entry=1,\n"
    '    prefix=prefix@entry=0x78b030 <__func__.13.lto_priv.1> "PyThreadState_Get",\n'
    '    msg=msg@entry=0x78a8d0 "the function must be called with the GIL held", status=status@entry=-1) at x.c:1\n'
    '#7  0x000000000062c2b4 in _Py_FatalErrorFunc (func=0x78b030 <__func__.13.lto_priv.1> "PyThreadState_Get", '
    'msg=0x78a8d0 "the function must be called with the GIL held") at ../Python/pylifecycle.c:2821\n'
)


def test_cpythons_fatal_error_message_from_the_frames_arguments():
    """fatal_error / _Py_FatalErrorFunc carry the message as string arguments: the log line it prints."""
    proc = parse_text(FATAL_BT).processes[0]
    line = "Fatal Python error: PyThreadState_Get: the function must be called with the GIL held"
    assert proc.messages.count(line) == 1
    # another function's string arguments are not a fatal error
    other = FATAL_BT.replace("fatal_error (", "report_error (").replace("_Py_FatalErrorFunc (", "log_it (")
    assert not any(m.startswith("Fatal Python error") for m in parse_text(other).processes[0].messages)


def test_a_wait_on_the_gils_condition_variable_records_a_gil_wait():
    text = ("#0  futex_wait_cancelable (private=0, expected=0, futex_word=0x8a6bfc <_PyRuntime+1340>) at f.h:88\n"
            "#1  __pthread_cond_wait_common (abstime=0x0, mutex=0x8a6c00 <_PyRuntime+1344>, cond=0x8a6bd0 "
            "<_PyRuntime+1296>) at pthread_cond_wait.c:502\n")
    (t,) = parse_text(text).processes[0].threads
    assert t.waits is not None and t.waits.kind == "gil" and t.waits.frame == 0
    # a runtime field that is not a wait's condition variable or mutex (gilstate=) is no GIL wait
    text = ("#0  0x00007f8ce83afc6b in sem_wait () from /lib64/libpthread.so.0\n"
            "#1  0x00000000005f7266 in tstate_delete_common (tstate=0x7f8c, gilstate=0x8791d8 <_PyRuntime+568>)"
            " at p.c:1\n")
    (t,) = parse_text(text).processes[0].threads
    assert t.waits is None
