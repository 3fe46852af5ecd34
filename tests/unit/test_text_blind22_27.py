"""The mechanisms behind the misses of rounds 22 and 27 (sealed, scored once, then opened as
manifest-blind22.yaml / manifest-blind27.yaml), each on the round's real paste and a near miss it
must not claim: Python 2's exit join (``threading._MainThread._exitfunc``, the futures backport's
``_python_exit`` polling in ``Condition.wait``), an abort re-raised by a signal handler, and the
C++ personality routine calling ``std::terminate`` itself (a forced unwind)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict


def sigs(snap):
    return [f.signature for f in snap.findings]


# --- Python 2's exit join (its real pastes: test_text_blind16.py's exit-join test) ---------------

def test_a_python2_join_from_the_programs_own_code_is_not_the_exit(db):
    text = ("Traceback (most recent call last):\n"
            '  File "/app/main.py", line 9, in <module>\n    worker.join()\n'
            '  File "/usr/lib/python2.7/threading.py", line 949, in join\n    self.__block.wait()\n'
            '  File "/usr/lib/python2.7/threading.py", line 339, in wait\n    waiter.acquire()\n'
            "KeyboardInterrupt\n")
    snap, wait = text_verdict(text, db)
    assert "python-shutdown-nondaemon-threads" not in sigs(snap) and wait == "join"


# --- an abort re-raised over a signal frame; terminate called by the personality routine -------

def test_an_abort_under_a_reraised_signal_is_a_crash_and_a_forced_unwind(db):
    snap, wait = text_verdict(real_text("mostrobotpy/mostrobotpy-147-1.txt"), db)
    assert wait == "crashed"
    f = [f for f in snap.findings if f.signature == "python-finalization-gil-reacquire"]
    assert f and f[0].confidence <= 0.5  # the unwind's source is cut: pthread_exit/cancel of its own too


def test_an_uncaught_cxx_exception_is_not_a_forced_unwind(db):
    text = ("(gdb) bt\n"
            "#0  __pthread_kill_implementation (threadid=<optimized out>, signo=6) at pthread_kill.c:44\n"
            "#1  0x00007f0c1a096f9e in __GI_raise (sig=sig@entry=6) at ../sysdeps/posix/raise.c:26\n"
            "#2  0x00007f0c1a07e942 in __GI_abort () at abort.c:79\n"
            "#3  0x00007f0c19e09da9 in __gnu_cxx::__verbose_terminate_handler () at vterminate.cc:95\n"
            "#4  0x00007f0c19e1bc2c in __cxxabiv1::__terminate (handler=<optimized out>) at eh_terminate.cc:48\n"
            "#5  0x00007f0c19e09951 in std::terminate () at eh_terminate.cc:58\n"
            "#6  0x00007f0c19e1be88 in __cxa_throw () at eh_throw.cc:98\n"
            "#7  0x000055d0c1a0b1c2 in Worker::run (this=0x55d0c2e4c2a0) at worker.cc:41\n")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed" and "python-finalization-gil-reacquire" not in sigs(snap)


def test_a_forced_unwind_whose_source_is_in_view_without_the_gil_is_not_finalization(db):
    # the same abort, its unwind's frames kept: a pthread_cancel of the program's own thread
    text = real_text("mostrobotpy/mostrobotpy-147-1.txt") + (
        "#12 0x00007fd9eaf91be4 in _Unwind_ForcedUnwind_Phase2 () from /lib/libgcc_s.so.1\n"
        "#13 0x00007fd9eaf92130 in _Unwind_ForcedUnwind () from /lib/libgcc_s.so.1\n"
        "#14 0x00007fd9f9a7e4a6 in __GI___pthread_unwind (buf=<optimized out>) at unwind.c:130\n"
        "#15 0x00007fd9f9a76a8a in __do_cancel () at pthreadP.h:280\n"
        "#16 0x000055d0c1a0b1c2 in Worker::poll (this=0x55d0c2e4c2a0) at worker.cc:77\n")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed" and "python-finalization-gil-reacquire" not in sigs(snap)


def test_a_signal_frame_under_a_wait_does_not_make_the_abort_depth_deeper(db):
    # a profiler's signal over a futex wait: the frames above the signal frame are no raise chain
    text = ("(gdb) bt\n"
            "#0  0x00007f0c1a0e4e2e in __futex_abstimed_wait_common () from /lib/libc.so.6\n"
            "#1  0x00007f0c1a0ef1a8 in __new_sem_wait_slow64.constprop.0 () from /lib/libc.so.6\n"
            "#2  <signal handler called>\n"
            "#3  0x00007f0c1a0e9b2c in do_something () from /app/libwork.so\n"
            "#4  0x00007f0c1a07e942 in __GI_abort () at abort.c:79\n")
    assert text_verdict(text, db)[1] != "crashed"


# --- psycopg2's conn_poll drives libpq: the database server's wait, not a pipe's ----------------

def test_psycopg2s_conn_poll_over_libpq_is_a_network_wait(db):
    assert text_verdict(real_text("psycopg2/psycopg2-194-1.txt"), db)[1] == "network"


def test_multiprocessings_conn_poll_without_libpq_stays_a_queue_wait(db):
    text = ("(gdb) bt\n"
            "#0  0x00007f3b2a8e6e9d in poll () from /lib64/libc.so.6\n"
            "#1  0x00007f3b27d1a1c4 in conn_poll (conn=0x7f3b1c0d1e30, timeout=-1) at socket_connection.c:163\n"
            "#2  0x00007f3b27d1b6a2 in connection_poll (self=0x7f3b1c0d1e30,"
            " args=<optimized out>) at connection.h:268\n"
            "#3  0x00007f3b2b3e1a2c in PyEval_EvalFrameEx () from /lib64/libpython2.7.so.1.0\n")
    assert text_verdict(text, db)[1] == "queue"


# --- Windows' SelectSelector: its _select is the event loop's idle wait -------------------------

def test_windows_selectors_select_wrapper_is_an_idle_event_loop(db):
    assert text_verdict(real_text("pytest/pytest-9466-1.txt"), db)[1] == "idle"


def test_a_program_function_named_select_is_not_the_selector(db):
    text = ("Thread 0x00001558 (most recent call first):\n"
            '  File "C:\\app\\picker.py", line 31 in _select\n'
            '  File "C:\\app\\main.py", line 9 in <module>\n')
    assert text_verdict(text, db)[1] != "idle"


# --- a work's completion query raising a CUDA error, the watchdog loop cut ---------------------

def test_a_completion_query_raising_a_cuda_error_is_the_sticky_error_at_low_confidence(db):
    snap, _ = text_verdict(real_text("verl/verl-316-1.txt"), db)
    f = [f for f in snap.findings if f.signature == "pgnccl-watchdog-sticky-cuda-error"]
    assert f and f[0].confidence < 0.7


def test_a_cuda_error_raised_by_the_allocator_is_not_the_watchdogs(db):
    text = ("terminate called after throwing an instance of 'c10::Error'\n"
            "Exception raised from c10_cuda_check_implementation at c10/cuda/CUDAException.cpp:43"
            " (most recent call first):\n"
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string)"
            " + 0x96 (0x7fae14cabf86 in /opt/torch/lib/libc10.so)\n"
            "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int,"
            " std::string const&) + 0x64 (0x7fae14c5ad10 in /opt/torch/lib/libc10.so)\n"
            "frame #2: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*,"
            " int, bool) + 0x118 (0x7fae14d87f08 in /opt/torch/lib/libc10_cuda.so)\n"
            "frame #3: c10::cuda::CUDACachingAllocator::raw_delete(void*)"
            " + 0x6d0 (0x7fc28ce5fe30 in /opt/torch/lib/libc10_cuda.so)\n"
            "frame #4: c10::TensorImpl::release_resources() + 0x4d (0x7fc28d0926ed in /opt/torch/lib/libc10.so)\n")
    snap, _ = text_verdict(text, db)
    assert "pgnccl-watchdog-sticky-cuda-error" not in sigs(snap)


# --- CPython 3.14's fatal error handler adds the C stack under the Python frames ---------------

def test_a_faulthandler_dump_with_3_14s_c_stack_header_is_a_crash(db):
    assert text_verdict(real_text("home-assistant-os/home-assistant-os-4901-1.txt"), db)[1] == "crashed"


def test_the_same_frames_without_the_c_stack_header_are_the_wait(db):
    text = real_text("home-assistant-os/home-assistant-os-4901-1.txt")
    text = "\n".join(line for line in text.splitlines() if "C stack trace" not in line) + "\n"
    assert text_verdict(text, db)[1] != "crashed"


# --- JVM thread dumps (open round 27's libpython-clj jstack; the JVM's deadlock report) -------

COVERED = ["jvm-java-level-deadlock"]


def test_a_jstack_thread_is_read_with_its_name_lwp_and_java_frames():
    from hanganalyze.acquire.text import parse_text

    proc = parse_text(real_text("pytorch/pytorch-32572-1.txt")).processes[0]
    assert "parsed as JVM thread dump (jstack)" in proc.notes
    t = proc.threads[0]
    assert t.name.startswith("nRepl-session-") and t.tid == 0x3C19  # nid of the wrapped header's second line
    assert t.frames[0].function == "libpython_clj.jna.DirectMapped.PyObject_CallObject"
    assert (t.frames[1].file, t.frames[1].line) == ("object.clj", 305)
    assert not any((f.function or "").startswith("- locked") for f in t.frames)


@pytest.mark.parametrize("path", ["phoebus/phoebus-1310-1.txt", "jython/jython-pr243-1.txt"])
def test_the_jvms_deadlock_report_is_a_java_level_deadlock(db, path):
    snap, wait = text_verdict(real_text(path), db)
    assert "jvm-java-level-deadlock" in sigs(snap) and wait == "lock"


def test_a_java_exception_trace_is_no_thread_dump_and_no_deadlock(db):
    from hanganalyze.acquire.text import jvm

    text = ("py4j.protocol.Py4JJavaError: An error occurred while calling o42.collect.\n"
            ": java.lang.IllegalStateException: SparkContext has been shutdown\n"
            "\tat org.apache.spark.SparkContext.runJob(SparkContext.scala:2217)\n"
            "\tat org.apache.spark.rdd.RDD.collect(RDD.scala:1029)\n"
            "\tat java.lang.Thread.run(Thread.java:750)\n")
    assert jvm.score(text.splitlines()) == 0.0
    assert "jvm-java-level-deadlock" not in sigs(text_verdict(text, db)[0])


def test_a_thread_blocked_on_a_monitor_without_the_jvms_report_is_a_lock_wait_not_the_deadlock(db):
    text = ('"main" #1 prio=5 os_prio=0 tid=0x00007f1c3c02a000 nid=0x5e21 waiting for monitor entry '
            "[0x00007f1c42dfe000]\n"
            "   java.lang.Thread.State: BLOCKED (on object monitor)\n"
            "\tat app.Cache.get(Cache.java:14)\n"
            "\t- waiting to lock <0x0000000711e5a3b8> (a app.Cache)\n"
            "\tat app.Main.main(Main.java:30)\n\n"
            "Found 0 deadlocks.\n")
    snap, wait = text_verdict(text, db)
    assert wait == "lock" and "jvm-java-level-deadlock" not in sigs(snap)


def test_two_jstack_threads_waiting_for_each_others_monitor_are_a_wait_for_cycle(db):
    # jstack's layout (JDK 17); the cycle is found from the lock lines, whatever the report says
    text = ('"main" #1 prio=5 os_prio=0 tid=0x00007f1c3c02a000 nid=0x5e21 waiting for monitor entry [0x7f1c42dfe000]\n'
            "   java.lang.Thread.State: BLOCKED (on object monitor)\n"
            "\tat Bank.transfer(Bank.java:14)\n"
            "\t- waiting to lock <0x0000000711e5a3b8> (a Account)\n"
            "\t- locked <0x0000000711e5a3a0> (a Account)\n"
            "\tat Bank.main(Bank.java:30)\n\n"
            '"worker" #14 prio=5 os_prio=0 tid=0x00007f1c3c1b8800 nid=0x5e3a waiting for monitor entry '
            "[0x7f1c0f9fe000]\n"
            "   java.lang.Thread.State: BLOCKED (on object monitor)\n"
            "\tat Bank.transfer(Bank.java:14)\n"
            "\t- waiting to lock <0x0000000711e5a3a0> (a Account)\n"
            "\t- locked <0x0000000711e5a3b8> (a Account)\n"
            "\tat java.lang.Thread.run(java.base@17.0.8/Thread.java:833)\n")
    snap, wait = text_verdict(text, db)
    cyc = [f for f in snap.findings if f.signature == "deadlock-cycle"]
    assert cyc and sorted(cyc[0].threads) == [0x5E21, 0x5E3A] and wait == "lock"
    # one side only: no cycle
    one = text.split('\n\n"worker"')[0] + "\n"
    assert "deadlock-cycle" not in sigs(text_verdict(one, db)[0])


# --- a paste's later chunk, its header cut: the frame rows speak for their format ---------------

def _tail(path: str, start: int) -> str:
    return "\n".join(real_text(path).splitlines()[start:]) + "\n"


def _parsed(text: str):
    from hanganalyze.acquire.text import parse_text

    return parse_text(text).processes[0]


def test_macos_report_rows_numbered_on_from_a_deep_frame_are_one_cut_thread():
    proc = _parsed(real_text("pyface/pyface-245-1.txt"))  # frames 199-215, no "Thread N:" line
    assert "parsed as macOS crash report" in proc.notes and len(proc.threads) == 1
    t = proc.threads[0]
    assert len(t.frames) == 17 and not t.current and any("header is not in the text" in n for n in t.notes)
    assert t.frames[0].function == "PyEval_EvalFrameEx"


def test_two_numbered_rows_or_rows_out_of_order_are_no_macos_report():
    from hanganalyze.acquire.text import maccrash

    rows = ["199 org.python.python             \t0x00000001000d1d92 PyEval_EvalFrameEx + 27826",
            "200 org.python.python             \t0x00000001000d5215 _PyEval_EvalCodeWithName + 2421",
            "17 org.python.python             \t0x00000001000cb0be PyEval_EvalCodeEx + 78"]
    assert maccrash.score(rows[:2]) == 0.0 and maccrash.score(rows) == 0.0


def test_windbg_kb_rows_without_their_header_and_with_wide_gaps_are_a_call_stack():
    proc = _parsed(_tail("azure-cli/azure-cli-30792-1.txt", 5))
    assert "parsed as WinDbg / Visual Studio call stack" in proc.notes
    assert any(f.function == "PyObject_FastCall" and f.library == "python312" for f in proc.threads[0].frames)


def test_visual_studios_inline_frame_rows_are_frames():
    proc = _parsed(_tail("pytorch/pytorch-20695-1.txt", 9))
    names = [f.function for t in proc.threads for f in t.frames]
    assert any(n and n.startswith("std::_Ref_count_base::_Decref") for n in names)


def test_open_mpis_crash_handler_rows_are_frames_and_the_process_crashed(db):
    text = real_text("nccl/nccl-291-1.txt")
    proc = _parsed(text)
    assert len(proc.threads) == 1 and proc.threads[0].frames[1].library.endswith("libnccl.so.2")
    assert proc.threads[0].frames[1].address == 0x7F8EAB35933C
    assert text_verdict(text, db)[1] == "crashed"
    assert len(_parsed(_tail("nccl/nccl-291-1.txt", 7)).threads[0].frames) == 8  # rows [ 1]-[ 8] only: still read


def test_ucx_rows_without_their_header_need_a_numbered_run():
    from hanganalyze.acquire.text import cxxframes

    proc = _parsed(_tail("pytorch/pytorch-113740-1.txt", 7))  # from frame 5 on
    assert proc.threads and proc.threads[0].frames[0].function == "gpuAssert.constprop.0"
    two = ["5 0x0000000000001403 gpuAssert.constprop.0()  main.c:0", "9 0x0000000000001873 launch()  main.c:0",
           "7 0x000000000013bf90 cfunction_call_varargs()  call.c:758"]
    assert cxxframes.score(two) == 0.0  # numbers that do not follow each other: no run


@pytest.mark.parametrize("path,start,wait", [
    ("olmo-core/olmo-core-829-1.txt", 3, "collective"),  # "ran for N milliseconds before timing out"
    ("ezpz/ezpz-239-1.txt", 4, "collective"),  # the flight recorder's "joined but didn't finish" and PG status
    ("pytorch/pytorch-125990-1.txt", 8, "crashed"),  # gdb's "received signal SIGABRT" over its stop line
    ("rapidgzip/rapidgzip-24-1.txt", 5, "crashed"),  # macOS shell's "Abort trap: 6"
    ("datasets/datasets-7357-1.txt", 5, "crashed"),  # CPython's fatal error lists the extension modules
])
def test_a_later_chunk_of_a_known_report_is_read_not_refused(db, path, start, wait):
    assert text_verdict(_tail(path, start), db)[1] == wait


def test_prose_that_mentions_a_timeout_or_a_module_list_is_still_refused():
    from hanganalyze.acquire.text import parse_text
    from hanganalyze.errors import InputError

    for text in ("The job ran for a while before timing out, then we restarted it.\nNo stack was kept.\n",
                 "We ship these extension modules: numpy, pandas.\nIt hangs anyway.\n"):
        with pytest.raises(InputError):
            parse_text(text)


# --- round 27's refusals: celery's log prefix, Ray's symbolised backtrace, a cut pytest report,
# --- SGLang's watchdog report, a printf log (refused, saying what to capture) -----------------

def test_a_stack_printed_through_celerys_log_prefix_is_read():
    proc = _parsed(real_text("gevent/gevent-1881-1.txt"))  # "[WARNING/MainProcess] " on every line
    assert "parsed as Python traceback" in proc.notes
    assert any(f.function == "_process_task" for t in proc.threads for f in t.frames)


def test_celerys_prefix_is_no_wrapper_on_a_few_lines_of_prose():
    from hanganalyze.acquire.text.unwrap import unwrap_layers

    lines = ["[WARNING/MainProcess] celery@host ready.", "the worker then froze", "and nothing else was logged",
             "we restarted it"]
    assert all(bare[0].startswith("[WARNING/MainProcess] ") for bare, _kept in unwrap_layers(lines))
    # ... while the same prefix on every line is one
    every = ["[WARNING/MainProcess] " + x for x in lines[1:]] + [lines[0]]
    assert any(not bare[0].startswith("[WARNING") for bare, _kept in unwrap_layers(every))


def test_rays_backtrace_rows_with_the_demangled_name_after_the_address_are_frames():
    proc = _parsed(real_text("ray/ray-41477-1.txt"))
    f = proc.threads[0].frames
    assert f[0].function == "ray::core::ActorSchedulingQueue::ScheduleRequests" and f[0].address == 0x7FC41A1B939B
    assert f[3].function == "boost::asio::detail::completion_handler<>::do_complete"


def test_a_row_whose_parentheses_name_the_symbol_keeps_it():
    from hanganalyze.acquire.text import cxxframes

    sb = cxxframes.symbols_body("/x/libc.so.6(abort+0x12) [0x7f0000001234] something else")
    assert sb is not None and cxxframes.parse_frame(sb[1]).function == "abort"


def test_a_pytest_report_cut_above_its_location_line_is_its_failing_line(db):
    text = real_text("pytest-asyncio/pytest-asyncio-40-1.txt")
    t = _parsed(text).threads[0]
    assert t.frames[0].source == "event_list = self._selector.select(timeout)"
    assert text_verdict(text, db)[1] == "idle"  # the event loop's selector


def test_pytests_marker_line_is_the_source_of_its_located_frame():
    f = _parsed(real_text("libjuju/python-libjuju-295-1.txt")).threads[0].frames[0]
    assert (f.file, f.line, f.source) == ("/usr/lib/python3.6/asyncio/base_events.py", 1404,
                                          "event_list = self._selector.select(timeout)")


def test_a_diff_or_a_quote_is_no_cut_pytest_report():
    from hanganalyze.acquire.text import pytest_report

    diff = ["<     x = 1", ">     x = 2", ">     y = 3", "    z = 4", "    w = 5", "    v = 6",
            "    u = 7", "    t = 8"]
    assert pytest_report.score(diff) == 0.0


def test_sglangs_watchdog_report_of_the_stuck_batch_is_the_watchdog(db):
    from helpers import text_or_log_findings

    found = {f.signature for f in text_or_log_findings(real_text("sglang/sglang-33549-1.txt"), db)}
    assert "sglang-scheduler-watchdog-timeout" in found
    near = "logger.info(f\"{self.batch.batch_size()=}\")  # our own debug print\nbatch.batch_size()=8\n"
    assert "sglang-scheduler-watchdog-timeout" not in {f.signature for f in text_or_log_findings(near, db)}


def test_a_text_with_no_frame_and_no_known_line_is_refused_saying_what_to_capture():
    from hanganalyze.acquire.text import parse_text
    from hanganalyze.errors import InputError

    with pytest.raises(InputError) as e:
        parse_text(real_text("psycopg2/psycopg2-703-1.txt"))
    assert "capture its stacks (hanganalyze --pid PID" in str(e.value) and "\n" not in str(e.value)


def test_a_log_read_as_one_with_no_known_line_says_what_to_capture():
    import subprocess
    import sys

    from helpers import REPO

    path = REPO / "tests" / "data" / "realworld" / "psycopg2" / "psycopg2-703-1.txt"
    out = subprocess.run([sys.executable, "-m", "hanganalyze", str(path), "--input-format", "log", "--format", "text"],
                         capture_output=True, text=True, timeout=120).stdout
    assert "holds no stack and no line a hang or crash leaves" in out and "hanganalyze --pid PID" in out
    stacks = REPO / "tests" / "data" / "realworld" / "gevent" / "gevent-1881-1.txt"  # frames, no known bug
    out = subprocess.run([sys.executable, "-m", "hanganalyze", str(stacks), "--format", "text"],
                         capture_output=True, text=True, timeout=120).stdout
    assert "holds no stack" not in out


# --- open round 30: a CUDA check's exception by its header; the illegal access the watchdog reports

def test_a_c10_exception_raised_by_the_cuda_check_is_a_crash_even_with_its_frames_cut(db):
    from hanganalyze import pipeline
    from hanganalyze.acquire.text import parse_text

    snap = pipeline.analyze(parse_text(real_text("vllm/vllm-8177-1.txt")), db)
    sigs_ = {f.signature for f in snap.findings}
    assert {"cuda-illegal-memory-access", "pgnccl-watchdog-sticky-cuda-error"} <= sigs_
    frames_proc = [f for f in snap.findings if f.signature == "triage" and f.triage.wait]
    assert all(f.triage.wait == "crashed" for f in frames_proc)


def test_a_c10_exception_raised_by_the_watchdogs_timeout_check_is_no_cuda_crash(db):
    text = ("Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 "
            "(most recent call first):\n"
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7fd4b596c446 in /x/libc10.so)\n"
            "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
            "std::ratio<1l, 1000l> > >) + 0x1d2 (0x7fd45a4b81a2 in /x/libtorch_cuda.so)\n"
            "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7fd45a4bfc03 in /x/libtorch_cuda.so)\n")
    assert text_verdict(text, db)[1] == "collective"


def test_a_watchdog_reporting_another_cuda_error_is_no_illegal_access(db):
    from helpers import text_or_log_findings

    text = ("[rank0]:[E219 12:14:43.351647859 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 Rank 0] Process group "
            "watchdog thread terminated with exception: CUDA error: unspecified launch failure\n")
    found = {f.signature for f in text_or_log_findings(text, db)}
    assert "cuda-illegal-memory-access" not in found



# --- after the sealed round 29 score: gunicorn's worker is a forked child (arbiter.spawn_worker) ---

def test_a_gunicorn_worker_blocked_in_logging_is_a_forked_child_with_an_inherited_lock(db):
    snap, wait = text_verdict(real_text("prunemate/prunemate-29-1.txt"), db)
    tri = [f for f in snap.findings if f.signature == "triage"][0]
    assert wait == "lock" and "inherited locked" in tri.summary


def test_a_thread_blocked_in_logging_without_a_fork_site_is_a_plain_lock_wait(db):
    text = ('Thread 9 (active): "MainThread"\n'
            "    emit (logging/__init__.py:1163)\n"
            "    handle (logging/__init__.py:1028)\n"
            "    run (app/server.py:88)\n"
            "    <module> (app/main.py:12)\n")
    snap, wait = text_verdict(text, db)
    tri = [f for f in snap.findings if f.signature == "triage"][0]
    assert "inherited" not in tri.summary and "logging-lock-after-fork" not in sigs(snap)
    snap, _ = text_verdict(real_text("prunemate/prunemate-29-1.txt"), db)
    assert "logging-lock-after-fork" in sigs(snap)  # py-spy's Python frames, gunicorn's fork site in view


# --- oslo's Guru Meditation report (round 29's eventlet-662, read after its score) ----------------

def test_a_guru_meditation_green_thread_is_read_innermost_first_with_its_source_lines():
    proc = _parsed(real_text("eventlet/eventlet-662-1.txt"))
    assert "parsed as oslo Guru Meditation report" in proc.notes and len(proc.threads) == 1
    f = proc.threads[0].frames
    assert (f[0].function, f[0].line) == ("heartbeat_check", 307) and f[-1].function == "_bootstrap"
    assert f[0].source == "return self.transport.heartbeat_check(self.connection, rate=rate)"


def test_path_line_in_function_lines_without_their_source_are_no_guru_meditation():
    from hanganalyze.acquire.text import gurumeditation

    lines = ["/x/app.py:12 in main", "/x/lib.py:40 in run", "tests/t.py:3 in test_x"]
    assert gurumeditation.score(lines) == 0.0
    tb = ['Traceback (most recent call last):', '  File "/x/app.py", line 12, in main', "    run()"]
    assert gurumeditation.score(tb) == 0.0
