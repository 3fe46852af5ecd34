"""Real pastes from GitHub issues (tests/data/text/messy/SOURCES.md): lldb, py-spy < 0.3,
``ray stack``, pytest-timeout, abseil's deadlock report and PyTorch's C++ frame lists, and the
wrappers around real pastes (quotes, indentation, ``<details>``, prose, cuts).  Each parses to the
right threads and frames; only text with no frame in it is refused, with the one-line error."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hanganalyze.acquire.text import DESCRIPTIONS, FORMAT_NAMES, parse_text
from hanganalyze.acquire.text.detect import UNRECOGNISED
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import PythonFacts

MESSY = Path(__file__).resolve().parents[1] / "data" / "text" / "messy"
SAMPLES = sorted(p.name for p in MESSY.glob("*.txt"))
PARSED = [n for n in SAMPLES if "noframes" not in n]

#: sample -> the format detection must pick
FORMAT = {
    "lldb": "lldb-bt", "pyspy-old": "pyspy", "ray-stack": "pyspy", "pytest-timeout": "pytest-timeout",
    "abseil": "abseil", "cxxframes": "cxxframes", "gdb-tmux": "gdb", "gdb-pager": "gdb",
}


def fmt_of(name: str) -> str:
    return FORMAT[name.rsplit("-", 1)[0]]


def text_of(name: str) -> str:
    return (MESSY / name).read_text()


def parse(name: str, fmt=None):
    return parse_text(text_of(name), fmt)


def only(name: str):
    snap = parse(name)
    assert len(snap.processes) == 1, [p.notes for p in snap.processes]
    return snap.processes[0]


def funcs(thread) -> List:
    return [f.function for f in thread.frames]


def shape(snap):
    """What a wrapper must not change: per process with threads, its pid and each thread's frames."""
    return [
        (p.pid, [[(f.kind, f.function, f.file, f.line, f.library, f.address) for f in t.frames] for t in p.threads])
        for p in snap.processes if p.threads
    ]


def n_frames(snap) -> int:
    return sum(len(t.frames) for p in snap.processes for t in p.threads)


def test_every_sample_is_listed_in_sources():
    sources = (MESSY / "SOURCES.md").read_text()
    for name in SAMPLES:
        assert "`%s`" % name in sources, name
    assert re.findall(r"\| `([\w.-]+\.txt)` \| https://github\.com/", sources) == [
        n for n in re.findall(r"\| `([\w.-]+\.txt)` \|", sources)
    ]
    for fmt in ("lldb", "pyspy-old", "ray-stack", "pytest-timeout", "abseil", "cxxframes"):
        assert sum(1 for n in SAMPLES if n.startswith(fmt + "-") and "noframes" not in n) >= 2, fmt


@pytest.mark.parametrize("name", PARSED)
def test_detection_picks_the_format(name):
    snap = parse(name)
    want = "parsed as %s" % DESCRIPTIONS[fmt_of(name)]
    assert all(want in p.notes for p in snap.processes if p.threads), [p.notes for p in snap.processes]
    forced = parse(name, fmt_of(name))
    # forced, the format's own threads only (no second pass for other formats in the lines left)
    own = parse(name)
    for p in own.processes:
        p.threads = [t for t in p.threads if not any("from the lines around" in n for n in t.notes)]
    assert shape(forced) == shape(own)


# ---- lldb -------------------------------------------------------------------------------------


def test_lldb_bt_all_with_debug_info():
    proc = only("lldb-1.txt")
    (t,) = proc.threads
    assert t.current and "lldb thread #1" in t.notes and "queue com.apple.main-thread" in t.notes
    assert len(t.frames) == 9  # 8 whole frames, the 9th cut in its symbol
    f0 = t.frames[0]
    assert (f0.function, f0.file, f0.line, f0.library, f0.address) == (
        "ggml_barrier", "ggml.c", 3050, "llama-bench", 0x00000001023900F8,
    )
    assert (t.frames[7].function, t.frames[7].file, t.frames[7].line) == ("llama_graph_compute", "llama.cpp", 14425)
    assert funcs(t)[1:3] == ["ggml_graph_compute_thread", "ggml_graph_compute"]
    assert proc.signal is None  # SIGSTOP: lldb attached, nothing happened to the process
    assert proc.messages == []  # "(lldb) bt all" and the fence are no messages


def test_lldb_cpp_signatures_kept_as_gdb_keeps_them():
    (t,) = only("lldb-2.txt").threads
    assert len(t.frames) == 9
    assert t.frames[0].function.startswith(
        "_INTERNAL_25_______src_kmp_barrier_cpp_a115b87c::__kmp_hyper_barrier_gather("
    )
    assert t.frames[0].function.endswith("void (*)(void*, void*), void*)")
    assert funcs(t)[1:4] == ["__kmp_join_barrier(int)", "__kmp_join_call", "__kmpc_fork_call"]
    assert t.frames[4].library == "libtorch_cpu.dylib"
    assert t.frames[4].function == (
        "at::TensorIterator::for_each(c10::function_ref<void (char**, long long const*, long long, long long)>, "
        "long long)"
    )
    assert t.frames[6].function.endswith("::$_1::operator()() const")


def test_lldb_bt_objc_and_python_frames():
    (t,) = only("lldb-3.txt").threads
    assert len(t.frames) == 16
    assert (t.frames[0].function, t.frames[0].library) == ("pthread_cond_wait", "Metal")
    assert t.frames[1].function == "-[_MTLCommandBuffer waitUntilCompleted]"
    assert t.frames[2].function == "torch::mps::MPSModule_deviceSynchronize(_object*, _object*)"
    assert t.frames[2].library == "libtorch_python.dylib"
    assert (t.frames[5].function, t.frames[5].library) == ("_PyEval_EvalFrameDefault", "Python")
    assert t.frames[14].function == "Py_RunMain"


def test_lldb_inlined_frames():
    (t,) = only("lldb-4.txt").threads
    assert (t.name, t.os_name, t.current) == ("lldb-dap", "lldb-dap", True)
    assert len(t.frames) == 5
    f0, f1, f2, f3 = t.frames[:4]
    assert (f0.function, f0.inlined, f0.file, f0.line) == (
        "__futex_abstimed_wait_common64", True, "futex-internal.c", 57,
    )
    assert f0.note == "inlined into __GI___futex_abstimed_wait_cancelable64" and f0.library == "libc.so.6"
    assert (f1.function, f1.inlined, f1.line) == ("__futex_abstimed_wait_common", True, 87)
    assert (f2.function, f2.inlined, f2.line) == ("__GI___futex_abstimed_wait_cancelable64", False, 139)
    assert f1.address == f2.address  # an inlined frame and its caller share the pc
    assert (f3.function, f3.file, f3.line, f3.inlined) == (
        "__pthread_cond_wait_common", "pthread_cond_wait.c", 504, True,
    )


def test_lldb_stop_echo_and_disassembly_then_backtrace_all():
    proc = only("lldb-5.txt")
    (t,) = proc.threads  # the stop echo (thread #1, frame #0) and the backtrace: one thread
    assert len(t.frames) == 9 and t.current
    assert (t.frames[0].function, t.frames[0].library) == ("__read_nocancel", "libsystem_kernel.dylib")
    assert funcs(t)[5:8] == ["file_read", "PyEval_EvalFrameEx", "fast_function"]
    assert not any("<+" in m or "jae" in m or "Executable module" in m for m in proc.messages), proc.messages


def test_lldb_bare_thread_header():
    (t,) = only("lldb-6.txt").threads
    assert "lldb thread #4" in t.notes and not t.current
    assert len(t.frames) == 19  # "frame #19:" with nothing after it is no frame
    assert funcs(t)[:4] == [
        "__psynch_cvwait", "_pthread_cond_wait", "PyThread_acquire_lock", "lock_PyThread_acquire_lock",
    ]
    assert t.frames[18].function == "function_call"


def test_lldb_html_entity_after_hash_and_headless_frames():
    proc = only("lldb-7.txt")
    assert [len(t.frames) for t in proc.threads] == [6, 5, 1]
    head, t3, t4 = proc.threads
    assert "no thread header" in head.notes[0]
    assert head.frames[0].function.startswith("lldb_private::Listener::GetEvent(")
    assert (head.frames[5].function, head.frames[5].library) == ("__clone", "libc.so.6")
    assert (t3.name, t4.name) == ("ait4(pid=1832)>", "b-remote.async>")
    assert (t3.frames[0].function, t3.frames[0].address) == ("wait4", 0x00007FBCCF3E9DFF)


# ---- py-spy < 0.3 and ray stack ---------------------------------------------------------------


def test_old_pyspy_tab_form():
    first, second = parse("pyspy-old-1.txt").processes
    assert first.pid is None and second.pid == 2826
    assert [len(t.frames) for t in first.threads] == [4, 12, 3]
    assert [len(t.frames) for t in second.threads] == [4, 4]  # the last frame line is cut: not a frame
    t = first.threads[0]
    assert t.pthread_id == 0x7FF6C08A4700 and t.tid is None and "py-spy: active" in t.notes
    assert all(f.kind == "python" for f in t.frames) and t.merge == "python-only"
    assert (t.frames[0].function, t.frames[0].file, t.frames[0].line) == (
        "_periodically_flush_profile_events", "ray/profiling.py", 97,
    )
    main = first.threads[2]
    assert funcs(main) == ["_get_next_task_from_local_scheduler", "main_loop", "<module>"]
    assert main.frames[2].file == "ray/workers/default_worker.py"


def test_old_pyspy_under_ray_stack_headers():
    a, b = parse("pyspy-old-2.txt").processes
    assert (a.pid, a.argv, b.pid) == (20768, ["ray_worker"], 20769)
    assert [len(t.frames) for t in a.threads] == [4, 12, 3] and [len(t.frames) for t in b.threads] == [4, 3]
    assert funcs(a.threads[1])[:2] == ["recv", "_read_from_socket"]
    assert (a.threads[1].frames[0].file, a.threads[1].frames[0].line) == ("redis/_compat.py", 79)


def test_ray_stack_prompt_stays_with_the_first_worker():
    a, b = parse("ray-stack-1.txt").processes
    assert (a.pid, b.pid) == (2787, 2788)
    assert a.messages == ["(tensorflow_p36) ubuntu@ip-172-XX-XX-XXX:~/rl_cpu$ ray stack"]
    assert [len(t.frames) for t in a.threads] == [4, 12, 3] and [len(t.frames) for t in b.threads] == [3]
    assert a.executable == "ray_worker"


def test_ray_stack_new_format_with_native_frames():
    a, b = parse("ray-stack-2.txt").processes
    assert (a.pid, a.argv, a.python.version) == (56364, ["ray::IDLE"], "3.8.6")
    assert a.executable == "/home/iamhatesz/.pyenv/versions/3.8.6/bin/python3.8"
    assert [(t.tid, t.name) for t in a.threads] == [(56364, "MainThread"), (56473, "ray_import_thread")]
    main = a.threads[0]
    assert main.merge == "merged" and len(main.frames) == 8
    assert (main.frames[0].kind, main.frames[0].function, main.frames[0].library) == (
        "native", "pthread_cond_wait@@GLIBC_2.3.2", "libpthread-2.31.so",
    )
    assert (main.frames[6].kind, main.frames[6].function, main.frames[6].file, main.frames[6].line) == (
        "python", "main_loop", "ray/worker.py", 382,
    )
    assert len(a.threads[1].frames) == 11 and a.threads[1].frames[-1].function == "clone"
    # the second worker is cut inside its thread header: a process with no thread, its lines kept
    assert b.pid == 56365 and not b.threads and "Process 56365: ray::IDLE" in b.messages


def test_ray_stack_with_no_frame_is_refused():
    with pytest.raises(InputError) as e:
        parse("ray-stack-noframes.txt")
    assert str(e.value) == UNRECOGNISED


# ---- pytest-timeout ---------------------------------------------------------------------------


def test_pytest_timeout_in_details_block():
    proc = only("pytest-timeout-1.txt")
    t6, t5 = proc.threads
    assert (t6.name, t6.python_name, t6.pthread_id, t6.tid) == ("Thread-6", "Thread-6", 139742417913600, None)
    assert t5.name == "Thread-5" and len(t5.frames) == 1  # cut after its first frame
    assert funcs(t6) == ["_recv", "_recv_bytes", "recv", "_handle_results", "run", "_bootstrap_inner", "_bootstrap"]
    assert (t6.frames[0].file, t6.frames[0].line) == ("/usr/lib/python3.8/multiprocessing/connection.py", 379)
    assert t6.merge == "python-only" and t6.frames[0].kind == "python"
    assert "Timeout" in proc.messages
    assert not any("details" in m or "summary" in m or "```" in m for m in proc.messages), proc.messages
    assert proc.python == PythonFacts(version="3.8", from_="file paths")
    assert proc.to_dict()["python"] == {"version": "3.8", "from": "file paths"}


def test_pytest_timeout_cut_at_the_top():
    proc = only("pytest-timeout-2.txt")
    head, t26, main = proc.threads
    assert head.name is None and "header is not in the text" in head.notes[0]
    assert funcs(head) == ["_handle_tasks", "run", "_bootstrap_inner"]
    assert (t26.name, t26.pthread_id, len(t26.frames)) == ("Thread-26", 139951743956544, 7)
    top = t26.frames[0]
    assert (top.function, top.file, top.line) == ("select", "/usr/lib64/python3.9/selectors.py", 416)
    assert (main.name, funcs(main)) == ("MainThread", ["_run_module_as_main"])


def test_pytest_timeout_thread_names_with_brackets_and_spaces():
    proc = only("pytest-timeout-3.txt")
    assert [len(t.frames) for t in proc.threads] == [2, 6, 1]
    assert [t.name for t in proc.threads] == [None, "Timeline-Session[1] recorder", "Timeline-Session[1] recorder"]
    rec = proc.threads[1]
    assert funcs(rec)[:3] == ["wait", "get", "_recorder_worker"]
    assert rec.frames[2].file == "/Users/runner/runners/2.160.1/work/1/s/tests/timeline.py"


# ---- abseil -----------------------------------------------------------------------------------


def test_abseil_potential_deadlock_with_symbols():
    proc = only("abseil-1.txt")
    (t,) = proc.threads
    assert t.current and "detected a potential deadlock" in t.notes[0]
    assert len(t.frames) == 16 and all(f.kind == "native" for f in t.frames)
    assert funcs(t)[:3] == [
        "absl::lts_2020_09_23::DebugOnlyDeadlockCheck()", "absl::lts_2020_09_23::Mutex::Lock()", "get_fd_pollable()",
    ]
    assert t.frames[0].address == 0x7F9786A4BC6F
    assert t.frames[12].function == "grpc_server_start"
    assert "[mutex.cc : 1359] RAW: Potential Mutex deadlock:" in proc.messages


def test_abseil_windows_addresses_and_cycle():
    proc = only("abseil-2.txt")
    det, held = proc.threads
    assert [len(det.frames), len(held.frames)] == [12, 5]
    assert all(f.function is None for f in det.frames + held.frames)
    assert det.frames[0].address == 0x00007FFF10C00260 and det.frames[-1].address == 0x00007FF8500EC53C
    assert "mutex@0000023425BC70E0" in held.notes[0] and not held.current
    assert any("a cycle in the historical lock ordering graph" in m for m in proc.messages)


def test_abseil_cut_at_the_top():
    proc = only("abseil-3.txt")
    head, held = proc.threads
    assert len(head.frames) == 6 and head.frames[0].function == "grpc_completion_queue_pluck"
    assert len(held.frames) == 11
    assert funcs(held)[:2] == ["absl::lts_20240116::DebugOnlyDeadlockCheck()", "absl::lts_20240116::Mutex::Lock()"]
    assert "mutex@0x7f939834bb70" in held.notes[0]


# ---- PyTorch C++ frames -----------------------------------------------------------------------

LIBC10 = "/home/groups/mignot/miniconda3/envs/nml/lib/python3.7/site-packages/torch/lib/libc10.so"


def test_c10_error_frames():
    proc = only("cxxframes-1.txt")
    (t,) = proc.threads
    assert len(t.frames) == 3 and "c10 exception: Exception raised from insert_events" in t.notes[0]
    f0 = t.frames[0]
    assert (f0.function, f0.library, f0.address) == (
        "c10::Error::Error(c10::SourceLocation, std::string)", LIBC10, 0x7FCC65F5177D,
    )
    assert t.frames[1].function == "c10::cuda::CUDACachingAllocator::raw_delete(void*)"
    assert t.frames[1].library.endswith("/libc10_cuda.so")
    cut = t.frames[2]
    assert (cut.function, cut.library, cut.address) == ("c10::TensorImpl::release_resources()", None, 0x7FCC65F3DB1D)
    assert cut.note and "cut" in cut.note
    assert "terminate called after throwing an instance of 'c10::Error'" in proc.messages
    assert "what():  CUDA error: initialization error" in proc.messages


def test_c10_unknown_functions_and_backtrace_symbols_form():
    (t,) = only("cxxframes-2.txt").threads
    assert len(t.frames) == 17
    assert t.frames[0].function is None and t.frames[0].library.endswith("/torch/lib/libc10_cuda.so")
    py = t.frames[5]  # frame #8: /home/user/.venv/bin/python() [0x510ceb]
    assert (py.function, py.library, py.address) == (None, "/home/user/.venv/bin/python", 0x510CEB)
    assert (t.frames[13].function, t.frames[13].address) == ("PyObject_GetIter", 0x50F36F)


def test_c10_markdown_mangled_frame_numbers():
    (t,) = only("cxxframes-3.txt").threads
    assert len(t.frames) == 9
    assert t.frames[0].function == "c10::Error::Error(c10::SourceLocation, std::string)"
    assert t.frames[6].function == "_PyObject_GC_Malloc"


def test_c10_fatal_signal_handler_threads():
    proc = only("cxxframes-4.txt")
    assert (proc.pid, proc.signal) == (3154296, "SIGABRT")
    assert [(t.tid, len(t.frames)) for t in proc.threads] == [(None, 3), (3154392, 8), (3154395, 1)]
    t = proc.threads[1]
    assert funcs(t)[2:5] == [
        "pthread_cond_wait",
        "std::condition_variable::wait(std::unique_lock<std::mutex>&)",
        "c10d::ProcessGroupGloo::runLoop(int)",
    ]
    assert t.frames[7].function == "clone" and t.frames[7].library == "/lib/x86_64-linux-gnu/libc.so.6"


def test_c10_terminal_wrapped_lines_are_joined():
    proc = only("cxxframes-5.txt")
    (t,) = proc.threads
    assert len(t.frames) == 3
    lib = "/home/tanhuajie/miniconda3/envs/openr1/lib/python3.11/site-packages/torch/lib/libc10.so"
    assert t.frames[0].library == lib  # "...lib/python" + "3.11/site-packages/..." joined
    assert t.frames[1].address == 0x7F5A4441BC74
    assert t.frames[1].function.startswith("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(")
    assert any("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4" in m for m in proc.messages)


def test_abseil_failure_handler_printed_twice_then_faulthandler():
    """One paste, two kinds of dump: abseil's failure signal handler (raw, then again through ray's
    logger: one thread) and faulthandler's Python stacks, found in the lines left over."""
    proc = only("abseil-4.txt")
    assert proc.signal == "SIGSEGV"
    handler, t1, t2 = proc.threads
    assert handler.current and "failure signal handler" in handler.notes[0]
    assert [f.address for f in handler.frames] == [0x7F75332BA350, 0x7F7586283630, 0x557B52E14870]
    assert all(f.function is None for f in handler.frames)  # "(unknown)" and "140480  (unknown)"
    assert t1.pthread_id == 0x00007F74511EF700 and t1.merge == "python-only"
    assert [(f.function, f.line) for f in t1.frames] == [
        ("print_logs", 869), ("run", 910), ("_bootstrap_inner", 973), ("_bootstrap", 930),
    ]
    assert "parsed as faulthandler dump, from the lines around the main dump" in t1.notes
    assert t2.frames[0].line == 2111  # its name cut ("lis")


def test_abseil_lines_under_two_log_prefixes():
    proc = only("abseil-5.txt")
    head, handler = proc.threads
    assert [f.function for f in head.frames] == [None, None]
    assert handler.current and handler.notes == ["abseil failure signal handler: SIGSEGV"]
    assert handler.frames[0].function == "absl::lts_20211102::Mutex::Lock()"  # the PC
    assert handler.frames[1].function is None  # "3504  (unknown)": a frame size, no symbol
    assert handler.frames[2].function == "ray::gcs::NodeInfoAccessor::HandleNotification()"
    assert handler.frames[5].function == "ray::rpc::GcsRpcClient::GetAllNodeInfo()::{lambda()#2}::operator()()"


def test_ucx_backtrace_symbols():
    proc = only("cxxframes-6.txt")
    assert proc.signal == "SIGSEGV"
    (t,) = proc.threads
    assert "UCX backtrace" in t.notes and len(t.frames) == 15
    f0 = t.frames[0]
    assert (f0.function, f0.library, f0.address) == (None, "/lib64/libucs.so.0", 0x7F0B015BF4A3)
    assert (t.frames[6].function, t.frames[6].library) == ("_dl_catch_exception", "/lib64/libc.so.6")
    assert t.frames[12].function == "dlopen"


def test_tmux_scroll_position_marker_is_no_part_of_the_frame():
    (t,) = only("gdb-tmux-1.txt").threads
    f3 = t.frames[3]
    assert f3.function == "__kmp_free_thread"
    lib = "/home/foo/anaconda3/envs/python/lib/python3.8/site-packages/numpy/core/../../../../libiomp5.so"
    assert f3.library == lib
    assert [f.function for f in t.frames[4:6]] == ["__kmp_set_num_threads", "at::set_num_threads(int)"]


@pytest.mark.parametrize("name", ["gdb-pager-1.txt", "gdb-pager-2.txt"])
def test_gdb_pager_prompt_inside_a_frame_line(name):
    proc = only(name)
    frames = [f for t in proc.threads for f in t.frames]
    assert not any("--Type" in (f.function or "") + (f.file or "") for f in frames)
    assert not any("Type <RET>" in m for m in proc.messages)
    if name == "gdb-pager-1.txt":
        f = next(f for f in frames if f.line == 139)
        assert (f.function, f.file) == ("__GI___futex_abstimed_wait_cancelable64", "./nptl/futex-internal.c")
        assert proc.messages == []
    else:
        f = next(f for f in frames if f.function == "gomp_thread_start")
        assert f.file.endswith("/libgomp/team.c") and f.line == 124


# ---- wrappers: quoting, indentation, <details>, prose, cuts -----------------------------------


def quoted(text: str) -> str:
    return "\n".join("> " + line if line.strip() else ">" for line in text.splitlines()) + "\n"


def indented(text: str) -> str:
    return "\n".join("    " + line if line.strip() else "" for line in text.splitlines()) + "\n"


def in_details(text: str) -> str:
    return "<details>\n<summary>Stack dump (click)</summary>\n\n```\n" + text + "```\n\n</details>\n"


def with_prose(text: str) -> str:
    return "The job hangs at the end of the epoch. Here is what I got:\n\n" + text + "\nAny idea what is going on?\n"


WRAPPERS = {
    "quoted": quoted,
    "indented": indented,
    "details": in_details,
    "prose": with_prose,
    "quoted+indented": lambda t: quoted(indented(t)),
    "prose+details+quoted": lambda t: quoted(with_prose(in_details(t))),
    "crlf+tabs": lambda t: "\r\n".join("\t" + line for line in t.splitlines()) + "\r\n",
}


@pytest.mark.parametrize("how", sorted(WRAPPERS))
@pytest.mark.parametrize("name", PARSED)
def test_wrapped_paste_parses_the_same(name, how):
    plain = parse(name)
    wrapped = parse_text(WRAPPERS[how](text_of(name)))
    assert shape(wrapped) == shape(plain)


@pytest.mark.parametrize("name", PARSED)
def test_indented_code_block_under_prose_still_parses(name):
    """A Markdown code block (4 spaces) below an unindented sentence: the indent cannot be
    removed, and every frame must still be found."""
    text = "Stack of the hung worker:\n\n" + indented(text_of(name))
    snap = parse_text(text)
    assert n_frames(snap) == n_frames(parse(name))


def _frame_line_indexes(lines: List[str]) -> List[int]:
    marks = ("frame #", "frame_#_", "@ ", 'File "', ") [0x")
    return [
        i for i, line in enumerate(lines)
        if any(m in line for m in marks) or (line[:1] in (" ", "\t") and line.rstrip().endswith(")") and " (" in line)
        or (line[:1] == "#" and line[1:2].isdigit())
    ]


@pytest.mark.parametrize("name", PARSED)
def test_cut_in_the_middle_of_a_frame_list(name):
    text = text_of(name)
    lines = text.splitlines()
    full = n_frames(parse(name))
    idx = _frame_line_indexes(lines)
    mid = idx[len(idx) // 2]
    half = len(lines[mid]) // 2
    # cut at the bottom, inside a frame line
    bottom = "\n".join(lines[:mid] + [lines[mid][:half]])
    n = n_frames(parse_text(bottom))
    assert 1 <= n <= full
    # cut at the top, inside the same frame line
    top = "\n".join([lines[mid][half:]] + lines[mid + 1:])
    n = n_frames(parse_text(top))
    assert 1 <= n <= full
    # both: a window of frames from the middle
    window = "\n".join(lines[idx[1]:idx[-2] + 1]) if len(idx) > 3 else "\n".join(lines[mid:mid + 1])
    assert n_frames(parse_text(window)) >= 1


PROSE = [
    "The training froze again after 3 epochs.\nI attached lldb and typed bt all, the thread #1 looked stuck.\n",
    "<details>\n<summary>Environment</summary>\n\n```\nPyTorch 2.3, CUDA 12.1\n"
    "ray 2.9, pytest-timeout 2.2\n```\n</details>\n",
    "> Stack of the main thread, see frame #0 above\n> we wait on the mutex @ line 12\n",
    "    Stack dump for the job attached below\n    (it never arrived)\n",
    "[mutex.cc : 1359] RAW: Potential Mutex deadlock:\n\n(the stack was not printed)\n",
    "~~~~~~~~~~~~~~~~ Stack of MainThread (140123) ~~~~~~~~~~~~~~~~\n",
    "&#8203;\u200b\n\n>\n",
    "The training deadlocked again after 3 epochs.\nWe think a lock is held somewhere.\n",
]


@pytest.mark.parametrize("text", [
    # a Horovod stall report's later lines only: the horovod-stall signature's own log line
    "Stalled ops:\nmodel/HorovodAllreduce_grads_0 [ready ranks: 1],\n"
    "model/HorovodAllreduce_grads_1 [ready ranks: 1],\n",
    # Lightning's rendezvous banner, old and new spelling
    "initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8\ninitializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8\n",
    "SIGSEGV in getenv\n  -> grpc_core::GetEnv()\n",
])
def test_a_log_line_a_signature_or_the_list_names_is_read_as_a_log(text):
    """Issue 22.2: no frame, but a line a known bug's signature (or the known-line list) names: a log."""
    assert parse_text(text).processes[0].messages


def test_a_known_crash_line_without_a_frame_is_read_as_a_log():
    """Issue 22.2: a line only a crash writes is an input (a triage says it crashed), not refused."""
    text = ("terminate called after throwing an instance of 'c10::Error'\n"
            "  what():  CUDA error: an illegal memory access\n")
    assert any("terminate called" in m for m in parse_text(text).processes[0].messages)


@pytest.mark.parametrize("text", PROSE)
def test_text_without_a_frame_is_refused_in_one_line(text):
    with pytest.raises(InputError) as e:
        parse_text(text)
    msg = str(e.value)
    assert msg == UNRECOGNISED and "\n" not in msg


def test_prose_only_gives_the_fuzz_tests_message():
    with pytest.raises(InputError, match=r"could not recognise the text .*--input-format log for a plain log$"):
        parse_text(PROSE[0])


# ---- hostile input: linear time, no exception but InputError ---------------------------------


def _parse_or_input_error(text, fmt=None):
    try:
        snap = parse_text(text, fmt)
    except InputError as e:
        assert "\n" not in str(e) and str(e)
        return None
    snap.to_dict()
    return snap


#: Hostile shapes as functions of a scale (1.0: about a megabyte), parsed at two sizes below.
HOSTILE = {
    "lldb parens": lambda k: "* frame #0: 0x1 m`f" + "(" * int(1_000_000 * k),
    "lldb at": lambda k: "frame #0: 0x1 m`f" + " at x:1" * int(140_000 * k),
    "lldb inlined": lambda k: "frame #0: 0x1 m`f" + " [inlined] g" * int(80_000 * k),
    "lldb plus": lambda k: "frame #0: 0x1 m`f" + " + 1" * int(250_000 * k),
    "lldb quotes": lambda k: "* thread #1, name = '" + "', " * int(330_000 * k),
    "lldb threads": lambda k: "thread #1\nframe #0: 0x1 m`f\n" * int(30_000 * k),
    "tildes": lambda k: "~" * int(1_000_000 * k),
    "stack of": lambda k: "~ Stack of " + " (1) ~" * int(160_000 * k),
    "at signs": lambda k: "@ " * int(500_000 * k),
    "at hex": lambda k: "@ 0x" + "f" * int(1_000_000 * k),
    "frame hash": lambda k: "frame #" * int(140_000 * k),
    "frame wrap": lambda k: ("frame #0: f + 0x1 (0x1 in /lib" + "(" * 50 + "\n") * int(15_000 * k),
    "c10 parens": lambda k: "frame #1: " + " (0x" * int(250_000 * k),
    "c10 brackets": lambda k: "frame #1: x(" + " [0x" * int(250_000 * k) + "]",
    "stack dump": lambda k: "Stack dump for u 1 a b c d e f g h ray\n" * int(25_000 * k),
    "quotes": lambda k: "> " * int(500_000 * k),
    "quoted lines": lambda k: "> \n" * int(300_000 * k),
    "details": lambda k: "<details " * int(110_000 * k),
    "details attrs": lambda k: "<details" + ' a="b"' * int(160_000 * k) + ">",
    "fences": lambda k: "```\n" * int(250_000 * k),
    "entities": lambda k: "&#8203;" * int(140_000 * k),
    "indents": lambda k: "\n".join(" " * i + "x" for i in range(1, int(1400 * k))),
    "pager prompts": lambda k: ("#1 f (x=--Type <RET> for more, q to quit, c to continue without paging--\n"
                                * int(14_000 * k)),
    "pager mid-line": lambda k: (("a" * 300 + "--Type <RET> for more, q to quit, c to continue without paging--\n")
                                 * int(2_700 * k)),
    "scroll markers": lambda k: "#1 0x1 in f () from /lib/x.so   [1/2]\n" * int(25_000 * k),
    "ucx": lambda k: ("==== backtrace (tid: 1) ====\n" + " 0  /lib/a.so(f+0x1) [0x1]\n" * 5) * int(5_000 * k),
    "mixed indents": lambda k: "\n".join((" \t" * 50) + "x" for _ in range(int(9000 * k))),
}


def _sized(text: str, size: int) -> str:
    return ((text + "\n") * (size // (len(text) + 1) + 1))[:size]


def _parse_time(text: str) -> float:
    t0 = time.perf_counter()
    _parse_or_input_error(text)
    return time.perf_counter() - t0


def test_each_messy_sample_parses_in_linear_time():
    """A guard against super-linear parsing (a regex that backtracks, a quadratic join), which on 1 MB
    takes minutes; not a speed goal (bench/ has those).  Each sample is parsed at 64 KB and at 256 KB:
    linear work takes 4 times as long, quadratic 16 times; 8 times plus half a second of slack (a
    loaded 2-core machine's noise) tells them apart at a quarter of the 1 MB run's cost."""
    report, bad = [], []
    for name in SAMPLES:
        small, big = _parse_time(_sized(text_of(name), 64_000)), _parse_time(_sized(text_of(name), 256_000))
        report.append("%s %.3fs/%.3fs" % (name, small, big))
        if big > 8 * small + 0.5:
            bad.append(report[-1])
    print("64 KB / 256 KB parse times: " + ", ".join(report))
    assert not bad, bad


def test_hostile_shapes_parse_in_linear_time():
    """The hostile shapes (a million parentheses, a 300 KB line of quotes) at a sixteenth and a quarter
    of a megabyte: the time may grow with the text's length, not with its square (see above)."""
    report, bad = [], []
    for name, shape in HOSTILE.items():
        small_text, big_text = shape(1 / 16), shape(1 / 4)
        small, big = _parse_time(small_text), _parse_time(big_text)
        ratio = max(1.0, len(big_text) / max(1, len(small_text)))
        report.append("%s %.3fs/%.3fs" % (name, small, big))
        if big > 2 * ratio * small + 0.5:
            bad.append(report[-1])
    print("hostile shapes at 1/16 and 1/4 MB: " + ", ".join(report))
    assert not bad, bad


FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXTS = [text_of(n) for n in SAMPLES]


@FUZZ
@given(
    st.sampled_from(range(len(TEXTS))),
    st.sampled_from(sorted(WRAPPERS) + ["none"]),
    st.sampled_from(["truncate", "shuffle", "delete", "insert", "none"]),
    st.randoms(use_true_random=False),
    st.sampled_from([None] + list(FORMAT_NAMES)),
)
def test_mutated_messy_samples(idx, wrap, how, rnd, fmt):
    text = TEXTS[idx] if wrap == "none" else WRAPPERS[wrap](TEXTS[idx])
    lines = text.splitlines(keepends=True)
    if how == "truncate":
        text = text[rnd.randrange(len(text) + 1):][: rnd.randrange(len(text) + 1)]
    elif how == "shuffle":
        rnd.shuffle(lines)
        text = "".join(lines)
    elif how == "delete":
        text = "".join(x for x in lines if rnd.random() > 0.3)
    elif how == "insert":
        for _ in range(rnd.randrange(1, 10)):
            i = rnd.randrange(len(text) + 1)
            junk = rnd.choice(["`", "~~~", "> ", "<details>", "frame #", "@ 0x", "\t", "&#8203;", "(", ")", "\x00"])
            text = text[:i] + junk + text[i:]
    _parse_or_input_error(text, fmt)
