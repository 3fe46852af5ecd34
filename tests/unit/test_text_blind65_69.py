"""Fixes made for open rounds 65-71 (manifest-blind65..71.yaml), each on the round's real paste and a
near miss: WinDbg's ``kb`` table without its stack-pointer column; the JVM's fatal error log (a
Python program hosting a JVM); a frame #0 in the null page; the debug C runtime's abort on Windows;
OpenMP's duplicate-runtime line as a web page rewrites it; XLA's out-of-memory line wrapped by the
terminal; NCCL's InfiniBand error and its shared-memory bus error; a profiler's ``file:function:line``
rows; Qt's BlockingQueuedConnection self-deadlock; a handler re-raising a fatal signal; shells' and
kernels' lines for a process a signal ended."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError

#: Signatures added here, each with its real paste and a near miss below (test_signature_coverage.py).
COVERED = ["qt-blocking-queued-connection-same-thread"]


def sigs(snap):
    return [f.signature for f in snap.findings]


def severity(snap, sig):
    return next(f.severity for f in snap.findings if f.signature == sig)


def test_windbg_kb_table_without_the_stack_pointer_column(db):
    text = real_text("nuitka/nuitka-2259-1.txt")
    assert "RetAddr               : Args to Child" in text
    frames = parse_text(text).processes[0].threads[0].frames
    assert (frames[0].library, frames[0].function) == ("ntdll", "NtWriteFile")
    assert text_verdict(text, db)[1] == "io"
    # near miss: the header alone, no rows: no stack, and no known line either
    with pytest.raises(InputError):
        parse_text("0:029> ~35kb\n RetAddr               : Args to Child                : Call Site\n")


def test_jvm_fatal_error_log_banner_and_problematic_frame(db):
    text = real_text("deephaven-core/deephaven-core-6005-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.signal == "SIGSEGV" and proc.pid == 122266
    assert proc.threads[0].frames[0].library == "python"
    assert text_verdict(text, db)[1] == "crashed"


def test_jvm_fatal_error_log_native_frames_and_siginfo(db):
    text = real_text("jpype/jpype-1020-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.signal == "SIGABRT"  # EXCEPTION_UNCAUGHT_CXX_EXCEPTION
    names = [f.function for f in proc.threads[0].frames]
    assert "org.jpype.manager.TypeFactoryNative.newWrapper" in names
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    triage = next(f for f in snap.findings if f.signature == "triage")
    assert "_jpype" in triage.summary  # the blame frame skips KERNELBASE.dll and the C++ runtime


def test_a_jstack_dump_is_no_fatal_error_log(db):
    # near miss: a JVM thread dump (jstack) of a process that runs: no signal, not crashed
    text = real_text("libpython-clj/libpython-clj-43-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.signal is None
    assert text_verdict(text, db)[1] != "crashed"


def test_a_frame_zero_in_the_null_page_is_a_crash(db):
    text = real_text("gevent/gevent-916-1.txt")
    assert "stop reason = signal SIGSTOP" in text and "frame #0: 0x0000000000000000" in text
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    assert "loop_init" in next(f for f in snap.findings if f.signature == "triage").summary
    # near miss: the same stack stopped in a named wait of the system library (lldb's SIGSTOP of a core)
    near = text.replace("  * frame #0: 0x0000000000000000\n",
                        "  * frame #0: 0x00007fff2034a8e2 libsystem_kernel.dylib`__psynch_cvwait + 10\n")
    assert text_verdict(near, db)[1] != "crashed"


def test_the_debug_c_runtimes_abort_on_windows(db):
    text = real_text("pytorch/pytorch-83291-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    assert "IListRefIterator" in next(f for f in snap.findings if f.signature == "triage").summary
    # near miss: the runtime's report frame over a wait, no abort under it
    near = ("\tucrtbased.dll!issue_debug_notification(const wchar_t * const message) Line 28\tC++\n"
            "\tntdll.dll!NtWaitForSingleObject()\tUnknown\n"
            "\tKernelBase.dll!WaitForSingleObjectEx()\tUnknown\n"
            "\tmyapp.exe!worker_loop() Line 40\tC++\n")
    assert text_verdict(near, db)[1] != "crashed"


def test_openmp_duplicate_runtime_as_a_web_page_links_it(db):
    text = real_text("pytorch/pytorch-78490-1.txt")
    assert "Error pytorch/vision#15" in text and "found libomp.dylib" in text
    assert "openmp-runtime-duplicate" in sigs(text_verdict(text, db)[0])
    # near miss: another OMP message (a deprecation notice) names no duplicate runtime
    near = "OMP: Info #276: omp_set_nested routine deprecated, please use omp_set_max_active_levels instead.\n"
    try:
        assert "openmp-runtime-duplicate" not in sigs(text_verdict(near, db)[0])
    except InputError:
        pass  # refused: no known line, which is right too


def test_xla_out_of_memory_wrapped_by_the_terminal(db):
    text = real_text("jax/jax-788-1.txt")
    assert text.splitlines()[0].endswith("Resource exhausted: Out ")
    snap, wait = text_verdict(text, db)
    assert "gpu-out-of-memory" in sigs(snap) and wait == "crashed"
    # near miss: the replica failed for another reason: a crash, not the out-of-memory signature
    near = text.replace("Resource exhausted: Out \nof memory while trying to allocate 5520758552 bytes.",
                        "INTERNAL: Failed to launch CUDA kernel.")
    snap, wait = text_verdict(near, db)
    assert "gpu-out-of-memory" not in sigs(snap) and wait == "crashed"


def test_github_actions_cancelled_job_is_read(db):
    text = real_text("kornia/kornia-4214-1.txt")
    assert text_verdict(text, db)[1] == "runs"  # read, not refused: the log names no wait
    # near miss: the runner's group line alone is no line a hang or crash leaves
    with pytest.raises(InputError):
        parse_text("08:12:40  ##[group]Run pytest -v tests\n")


def test_nccl_infiniband_error_completion_ends_the_rank(db):
    text = real_text("nccl/nccl-426-1.txt")
    snap, wait = text_verdict(text, db)
    assert "nccl-ib-completion-error" in sigs(snap) and wait == "crashed"
    # near miss: NCCL's INFO line choosing the IB device: a healthy start, no crash
    near = "node1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
    assert text_verdict(near, db)[1] != "crashed"


def test_nccl_bus_error_in_its_shared_memory_setup(db):
    text = real_text("jax-toolbox/jax-toolbox-183-1.txt")
    snap = text_verdict(text, db)[0]
    assert "nccl-shm-segment-create-failed" in sigs(snap)
    # near miss: a SIGSEGV (not a bus error) in the same function is not a tmpfs out of space
    near = text.replace("signal SIGBUS, Bus error", "signal SIGSEGV, Segmentation fault")
    assert "nccl-shm-segment-create-failed" not in sigs(text_verdict(near, db)[0])


def test_nccl_bus_error_in_a_missymbolised_nccl_thread(db):
    text = real_text("pipedream/pipedream-76-1.txt")
    snap = text_verdict(text, db)[0]
    f = next(f for f in snap.findings if f.signature == "nccl-shm-segment-create-failed")
    assert f.confidence < 0.8  # no shared-memory function named: a lead
    near = text.replace("Caught signal 7 (Bus error: nonexistent physical address)",
                        "Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)")
    assert "nccl-shm-segment-create-failed" not in sigs(text_verdict(near, db)[0])


def test_a_profilers_file_function_line_rows(db):
    text = real_text("cpython/cpython-116223-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert (frames[0].function, frames[0].line) == ("HTTPResponse.stream", 628)
    assert frames[-1].function == "Session.get"
    assert text_verdict(text, db)[1] == "network"
    # near miss: one such row is no stack
    with pytest.raises(InputError):
        parse_text("c:\\app\\main.py:main:12\n")


def test_qt_blocking_queued_connection_to_its_own_thread(db):
    text = real_text("ilastik/ilastik-1559-1.txt")
    snap, wait = text_verdict(text, db)
    assert "qt-blocking-queued-connection-same-thread" in sigs(snap) and wait == "lock"
    assert severity(snap, "qt-blocking-queued-connection-same-thread") == "deadlock"
    # near miss: another Qt warning
    near = "Qt: Untested Windows version 10.0 detected!\nQObject::connect: No such signal Foo::bar()\n"
    try:
        assert "qt-blocking-queued-connection-same-thread" not in sigs(text_verdict(near, db)[0])
    except InputError:
        pass


def test_a_handler_that_re_raised_a_fatal_signal(db):
    text = real_text("mod_python/mod_python-100-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the handler re-raised over a wait the signal interrupted (a SIGTERM's clean-up)
    near = text.replace("__new_sem_post (sem=0x21) at sem_post.c:36",
                        "__new_sem_wait_slow64 (sem=0x21) at sem_waitcommon.c:184")
    assert text_verdict(near, db)[1] != "crashed"


def test_a_signal_or_a_kernels_kill_in_a_log(db):
    for name in ("ish/ish-377-1.txt", "opennmt-tutorial/opennmt-tutorial-6-2.txt", "jax/jax-3757-1.txt"):
        assert text_verdict(real_text(name), db)[1] == "crashed", name
    # near misses: the words in a sentence; a warning (W) record of the same logger
    for near in ("the build printed Illegal instruction hints\nmore\n",
                 "2020-07-14 12:13:46.715142: W external/org_tensorflow/tensorflow/compiler/xla/service/"
                 "cpu/ir_emitter.cc:3131] could not find emitted value\n"):
        try:
            assert text_verdict(near, db)[1] != "crashed"
        except InputError:
            pass


def test_a_traceback_whose_module_name_a_web_page_ate(db):
    text = real_text("h2o-llmstudio/h2o-llmstudio-529-1.txt")
    assert 'line 106, in\n' in text
    frames = parse_text(text).processes[0].threads[0].frames
    assert frames[-1].function == "<module>" and frames[0].function == "run_train_rlhf"
    assert text_verdict(text, db)[1] == "crashed"


def test_torch_signatures_read_their_lines_without_their_prefixes(db):
    assert "pgnccl-collective-timeout" in sigs(text_verdict(real_text("bergson/bergson-444-1.txt"), db)[0])
    assert "nccl-cuda-out-of-memory" in sigs(text_verdict(real_text("vllm/vllm-19865-1.txt"), db)[0])
    assert "cudnn-handle-init-failed" in sigs(text_verdict(
        real_text("deep-rl-tensorflow/deep-rl-tensorflow-43-1.txt"), db)[0])
    assert "c10d-store-rendezvous-hang" in sigs(text_verdict(real_text("pytorch/pytorch-111805-1.txt"), db)[0])
    # near misses: checkTimeout of another class; CUDA's own out-of-memory error (the framework's, not NCCL's)
    near = "    checkTimeout at MyQueue.cpp:733\n    Watchdog caught collective operation timeout\n"
    assert "pgnccl-collective-timeout" in sigs(text_verdict(near, db)[0])  # the watchdog line alone still is
    near = "    checkTimeout at MyQueue.cpp:733\nRuntimeError: a timeout\n"
    try:
        assert "pgnccl-collective-timeout" not in sigs(text_verdict(near, db)[0])
    except InputError:
        pass
    assert "nccl-cuda-out-of-memory" not in sigs(text_verdict("RuntimeError: CUDA error: out of memory\n", db)[0])


def test_a_forked_childs_lock_read_on_a_crash_is_context(db):
    text = real_text("pytorch/pytorch-31906-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    assert severity(snap, "fork-child-inherited-lock") == "info"


def test_a_thread_state_check_while_the_runtime_finalizes_names_one_cause(db):
    text = real_text("dbzero/dbzero-316-1.txt")
    found = sigs(text_verdict(text, db)[0])
    assert "python-finalization-gil-reacquire" in found and "python-api-without-gil" not in found
    # near miss: the same fatal error with the runtime running: the C API called without the GIL
    near = "\n".join(line for line in text.splitlines() if "runtime state" not in line) + "\n"
    found = sigs(text_verdict(near, db)[0])
    assert "python-api-without-gil" in found and "python-finalization-gil-reacquire" not in found


def test_a_clients_url_fetch_timing_out_in_its_retries(db):
    text = real_text("jax/jax-14600-1.txt")
    assert text_verdict(text, db)[1] == "network"
    # near miss: the same retry line for an answer that came (no timeout): no network wait said
    near = text.replace("Timeout was reached", "HTTP 200").replace("Failed to fetch URL on try", "Fetched URL on try")
    try:
        assert text_verdict(near, db)[1] != "network"
    except InputError:
        pass


@pytest.mark.parametrize("name", ["ing2ofx/ing2ofx-4-1.txt", "pyfa/pyfa-352-1.txt",
                                  "activitywatch/activitywatch-256-1.txt"])
def test_windows_error_reportings_problem_signature(db, name):
    text = real_text(name)
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a problem signature of another event (an update that failed, a window that hung)
    for event in ("WindowsUpdateFailure3", "AppHangB1"):
        near = text.replace("APPCRASH", event).replace("c0000005", "80070005")
        try:
            assert text_verdict(near, db)[1] != "crashed", event
        except InputError:
            assert event != "AppHangB1" or "Event Name" not in near  # AppHang is a known line: read


def test_the_gpus_own_report_of_an_illegal_address(db):
    for name in ("pytorch/pytorch-103683-1.txt", "pytorch/pytorch-158308-1.txt"):
        snap, wait = text_verdict(real_text(name), db)
        assert "cuda-illegal-memory-access" in sigs(snap) and wait == "crashed", name
    # near misses: a warp's assert (a device-side assert, still a crash) and a fault of no GPU agent
    snap, wait = text_verdict(real_text("pytorch/pytorch-103683-1.txt").replace("Warp Illegal Address",
                                                                               "Warp Assert"), db)
    assert "cuda-illegal-memory-access" not in sigs(snap) and wait == "crashed"
    try:
        snap = text_verdict("Memory access fault on address 0x0 in the host's allocator\nretrying\n", db)[0]
        assert "cuda-illegal-memory-access" not in sigs(snap)
    except InputError:
        pass


def test_a_custom_all_reduces_cuda_check(db):
    text = real_text("sglang/sglang-552-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same words in a sentence, not the check's line
    near = "\n".join(line.replace("Failed: Cuda error", "we saw a Cuda error at") for line in text.splitlines())
    assert text_verdict(near + "\n", db)[1] != "crashed"


def test_rays_object_store_short_of_shared_memory_is_read(db):
    text = real_text("gpustack/gpustack-5014-1.txt")
    text_verdict(text, db)  # read, not refused
    with pytest.raises(InputError):  # near miss: another raylet warning
        parse_text("[2026-03-25 05:44:29,435 W 39 39] (raylet) store_runner.cc:40: Starting object store\n")


# --- open round 71 ---------------------------------------------------------------------------------

def test_a_kill_abrt_of_a_hung_process_is_no_crash(db):
    text = real_text("salt/salt-56989-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "idle" and any("came from outside" in n for n in snap.processes[0].notes)
    # near miss: the same report with the thread in abort() (it aborted itself)
    near = text.replace("#0  0x00007f3c8106bbed poll (libc.so.6)", "#0  0x00007f3c8106bbed abort (libc.so.6)")
    assert text_verdict(near, db)[1] == "crashed"


def test_lock_file_retry_loops_in_system_call_traces(db):
    for name in ("pip/pip-2787-1.txt", "pipenv/pipenv-2360-1.txt"):
        assert "stale-file-lock" in sigs(text_verdict(real_text(name), db)[0]), name
    # near miss: a mkdir that found its directory there (not a lock)
    near = real_text("pipenv/pipenv-2360-1.txt").replace(".lock", ".d")
    assert "stale-file-lock" not in sigs(text_verdict(near, db)[0])


def test_a_windows_path_of_a_lock_file_package_is_a_file_lock_wait(db):
    text = real_text("pip/pip-2993-1.txt")
    assert text_verdict(text, db)[1] == "file-lock"
    # near miss: the same frame in a package of another name is a plain acquire (a lock)
    assert text_verdict(text.replace("lockfile", "mylocks"), db)[1] != "file-lock"


def test_core_foundations_fork_check_in_a_crash_summary(db):
    snap, wait = text_verdict(real_text("pyre/pyre-250-1.txt"), db)
    f = next(f for f in snap.findings if f.signature == "macos-objc-fork-safety-abort")
    assert f.confidence < 0.8 and wait == "crashed"
    near = "Exception:  EXC_BAD_ACCESS (SIGSEGV), KERN_INVALID_ADDRESS at 0x110\nThread:     main\n"
    snap, wait = text_verdict(near, db)
    assert "macos-objc-fork-safety-abort" not in sigs(snap) and wait == "crashed"


def test_pyinstallers_unhandled_exception_line(db):
    text = real_text("pyinstaller/pyinstaller-7893-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    near = text.replace("Failed to execute script 'pyi_rth_win32comgenpy' due to unhandled exception!",
                        "Executed script 'pyi_rth_win32comgenpy'").replace("exception: access violation", "an error")
    assert not crash_said(near, db)


# --- open rounds 72-74 -----------------------------------------------------------------------------

def test_xla_status_check_and_nccl_proxy_failure_lines(db):
    for name in ("xla/xla-6700-1.txt", "nccl-tests/nccl-tests-188-1.txt"):
        assert text_verdict(real_text(name), db)[1] == "crashed", name
    # near misses: the status check's words in prose; the proxy's operation that succeeded (retcode 0)
    try:
        assert text_verdict("the log said something like non-OK status for the call\n", db)[1] != "crashed"
    except InputError:
        pass
    near = real_text("nccl-tests/nccl-tests-188-1.txt").replace("retcode 3", "retcode 0")
    near = "\n".join(line for line in near.splitlines() if " -> 3" not in line and "wrong type" not in line)
    assert text_verdict(near + "\n", db)[1] != "crashed"


def test_glibcs_own_backtrace_of_a_heap_check(db):
    text = real_text("pylibinjection/pylibinjection-2-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: backtrace_symbols rows without glibc's header (a program's own backtrace print)
    assert text_verdict(text.replace("======= Backtrace: =========", "Backtrace:"), db)[1] != "crashed"


def test_abseils_lock_order_check_aborts(db):
    text = real_text("grpc/grpc-40390-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same lock taken without the check (no abort above it): a lock wait
    lines = text.splitlines()
    near = "\n".join(["(gdb) bt", "#0  0x00007f7d3365f52c in __lll_lock_wait () from /usr/lib64/libc.so.6"]
                     + [line for line in lines if "Mutex::Lock" in line or line.startswith("#8") or
                        line.startswith("#9")]) + "\n"
    assert text_verdict(near, db)[1] == "lock"


def test_x64dbgs_call_stack_view(db):
    text = real_text("x64dbg/x64dbg-259-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert (frames[0].library, frames[0].function) == ("ntdll", "NtWaitForSingleObject")
    assert frames[1].function is None and frames[1].library == "dbghelp"
    # near miss: the header alone
    with pytest.raises(InputError):
        parse_text("Address           To                From              Comment\n")


def test_gdb_without_thread_debugging_does_not_prove_the_other_threads_absent(db):
    text = real_text("openblas/openblas-660-1.txt")
    assert text.startswith("Thread 1 (process 60961):")
    f = next(f for f in text_verdict(text, db)[0].findings if f.signature == "openblas-fork")
    assert f.confidence <= 0.6  # the BLAS workers' absence is not observed: gdb saw one thread
    # near miss: the same thread under thread debugging's header is the whole (forked, single-threaded) child
    near = text.replace("Thread 1 (process 60961):", "Thread 1 (Thread 0x7fde1e5c4740 (LWP 60961)):")
    f = next(f for f in text_verdict(near, db)[0].findings if f.signature == "openblas-fork")
    assert f.confidence >= 0.8
