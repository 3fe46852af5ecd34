"""Issue 32, the mechanisms behind sealed round 8's misses, each on the round's real paste (now open
data in tests/data/realworld, manifest-blind8.yaml) and a near miss it must not claim: macOS crash
reports, IDE debugger thread views, headerless WinDbg ``kb`` rows, localized journald and
``dd-Mon-yyyy`` log prefixes, stacks a logger printed between records, sanitizer reports, gdb's
remarks inside terminal-wrapped pastes, py-bt frame lines without py-bt's header, crash and TPU log
lines, Windows critical sections, paramiko's transport read, the Ctrl-C traceback of the exit join
and c10d's store-connect timeout."""

from __future__ import annotations

import pytest
from helpers import REPO, run_hanganalyze

from hanganalyze import pipeline
from hanganalyze.acquire.text import debugview, maccrash, parse_text, windbg
from hanganalyze.acquire.text.detect import UNRECOGNISED
from hanganalyze.acquire.text.traceback import LOGGED_STACK
from hanganalyze.errors import InputError

REAL = REPO / "tests" / "data" / "realworld"


def real(path: str) -> str:
    return (REAL / path).read_text()


def analyzed(text: str, db, input_format=None):
    snap = pipeline.analyze(parse_text(text, input_format), db)
    tri = [f for f in snap.findings if f.signature == "triage"]
    return snap, (tri[0].triage.wait if tri else None)


def threads_of(text: str):
    return [t for p in parse_text(text).processes for t in p.threads if t.frames]


def funcs(t):
    return [f.function for f in t.frames]


def sigs(snap):
    return [f.signature for f in snap.findings]


def refused(text: str) -> str:
    with pytest.raises(InputError) as e:
        parse_text(text)
    assert "\n" not in str(e.value)
    return str(e.value)


# --- macOS crash reports ---------------------------------------------------------------------

def test_a_macos_crash_report_is_its_crashed_thread_and_signal(db):
    text = real("cpython/cpython-129536-1.txt")
    snap = parse_text(text)
    proc = snap.processes[0]
    assert proc.signal == "SIGABRT" and proc.pid == 45370
    (t,) = [t for t in proc.threads if t.frames]
    assert t.current and funcs(t) == ["__pthread_kill", "pthread_kill"]
    assert t.frames[0].library == "libsystem_kernel.dylib" and t.frames[0].address == 0x19df595d0
    assert analyzed(text, db)[1] == "crashed"


def test_a_crash_report_frame_keeps_its_source_location_and_a_frame_without_symbol():
    text = ("Exception Type:  EXC_BAD_ACCESS (SIGSEGV)\nCrashed Thread:  1\n\nThread 0:\n"
            "0   libsystem_kernel.dylib   0x00007ff80a1b2e1a __psynch_cvwait + 10\n\nThread 1 Crashed:: worker\n"
            "0   Python   0x0000000104a1c6f1 take_gil + 120 (ceval_gil.c:331)\n1   ???   0x0000000000000000 0 + 0\n")
    proc = parse_text(text).processes[0]
    a, b = proc.threads
    assert proc.signal == "SIGSEGV" and not a.current and b.current and b.name == "worker"
    assert (b.frames[0].function, b.frames[0].file, b.frames[0].line) == ("take_gil", "ceval_gil.c", 331)
    assert b.frames[1].function is None and b.frames[1].library is None


def test_a_crash_report_cut_before_its_threads_still_says_it_crashed(db):
    assert analyzed(real("fontbakery/fontbakery-2982-1.txt"), db)[1] == "crashed"


def test_a_process_line_and_a_thread_sentence_are_no_crash_report():
    lines = ["Process:   build [12]", "Thread 0: started the build", "1   step one   0x10 done"]
    assert maccrash.score(lines) == 0
    assert refused("\n".join(lines) + "\n") == UNRECOGNISED


# --- IDE debugger thread views ---------------------------------------------------------------

def test_a_pydev_thread_view_is_python_threads(db):
    text = real("paramiko/paramiko-793-1.txt")
    a, b = threads_of(text)
    assert a.name == "thread0" and funcs(a)[:3] == ["wait_for_response", "auth_password", "_auth"]
    assert b.name == "Thread-218" and funcs(b)[0] == "read_all"
    assert all(f.kind == "python" for f in a.frames + b.frames)
    assert (a.frames[0].file, a.frames[0].line) == ("auth_handler.py", 193)
    assert analyzed(text, db)[1] == "network"  # the transport thread's read, not the auth wait


def test_bracketed_notes_that_are_no_python_location_are_no_thread_view():
    lines = ["see the notes [README.md:12]", "  fixed [CHANGES.txt:3]", "  main [build.sh:4]", "  x [a.py:2]"]
    assert debugview.score(lines) == 0  # one .py row is no view


# --- WinDbg kb rows without their header --------------------------------------------------------

def test_headerless_kb_rows_are_windbg_threads_and_a_critical_section_a_lock(db):
    text = real("pywin32/pywin32-649-1.txt")
    ts = threads_of(text)
    assert len(ts) == 2  # "Callstack:" heads each thread's rows
    assert funcs(ts[0])[:2] == ["RtlEnterCriticalSection", "PyWin_AcquireGlobalLock"]
    assert ts[0].frames[0].library == "ntdll" and ts[1].frames[0].function == "SwitchSTA"
    assert analyzed(text, db)[1] == "lock"


def test_two_hex_words_and_an_exclamation_are_no_kb_row():
    lines = ["deadbeef cafebabe wow! it hangs", "12345678 9abcdef0 hello there!", "00000000 11111111 !bang"]
    assert windbg.score(lines) == 0


# --- log prefixes: a localized journald, a dd-Mon-yyyy date --------------------------------------

def test_a_localized_journald_prefix_is_removed(db):
    text = real("lmcache/lmcache-2106-1.txt")
    ts = threads_of(text)
    assert ts and ts[0].frames[-1].function == "_bootstrap_inner" or any(
        f.function == "run_engine_core" for t in ts for f in t.frames)
    assert any(f.file and f.file.endswith("vllm/v1/engine/core.py") for t in ts for f in t.frames)


def test_a_day_month_year_prefix_is_removed_from_a_faulthandler_dump(db):
    ts = threads_of(real("paramiko/paramiko-779-1.txt"))
    assert len(ts) >= 2 and funcs(ts[0])[:2] == ["read_all", "read_message"]
    assert ts[0].frames[0].file == "/usr/local/lib/python2.7/dist-packages/paramiko/packet.py"


def test_colabs_runtime_log_prefix_is_removed_from_a_traceback():
    pre = "Aug 20, 2023, 5:54:%02d PM | WARNING | "
    body = ["Traceback (most recent call last):", '  File "/content/train.py", line 9, in <module>',
            "    q.get()", '  File "/usr/lib/python3.10/queue.py", line 171, in get',
            "    self.not_empty.wait()", "KeyboardInterrupt"]
    (t,) = threads_of("".join(pre % i + x + "\n" for i, x in enumerate(body)))
    assert funcs(t) == ["get", "<module>"] and t.frames[0].file == "/usr/lib/python3.10/queue.py"
    # the same prefix over prose lines is no dump: a one-line refusal
    with pytest.raises(InputError):
        parse_text("".join(pre % i + "runtime restarted\n" for i in range(4)))


def test_a_prose_log_in_another_locale_is_still_refused():
    text = "".join("déc. 19 02:07:%02d host app[1]: step %d done\n" % (i, i) for i in range(5))
    with pytest.raises(InputError):
        parse_text(text)


# --- stacks a logger printed between records ----------------------------------------------------

def test_stacks_a_logger_printed_are_threads_standing_on_their_innermost_line(db):
    text = real("paramiko-ng/paramiko-ng-148-1.txt")
    ts = threads_of(text)
    assert len(ts) >= 2  # each "Stacktrace of <Transport>:" record heads a stack
    assert funcs(ts[0])[0] == "read_all" and ts[0].frames[0].source == "x = self.__socket.recv(n)"
    assert LOGGED_STACK in ts[0].notes and not any(n.startswith("exception: ") for n in ts[0].notes)
    assert analyzed(text, db)[1] == "network"


def test_a_headed_traceback_cut_before_its_exception_is_not_a_logged_stack():
    text = ("Traceback (most recent call last):\n"
            '  File "/app/main.py", line 3, in <module>\n    sock.recv(10)\n'
            "2024-01-01 12:00:00 ERROR job failed\n")
    (t,) = threads_of(text)
    assert LOGGED_STACK not in t.notes and any(n.startswith("exception: ") for n in t.notes)


# --- sanitizer reports and gdb remarks -------------------------------------------------------------

def test_a_sanitizer_report_is_frames_without_offsets_and_its_signal(db):
    text = real("pytorch/pytorch-150548-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.signal == "SIGSEGV"
    t = proc.threads[0]
    assert funcs(t)[:3] == ["pthread_mutex_lock", "PyThread_release_lock", "release_sentinel"]
    assert t.frames[0].library == "libsystem_pthread.dylib"
    assert analyzed(text, db)[1] == "crashed"


def test_a_linux_sanitizer_frame_keeps_file_and_line_and_a_gdb_frame_is_unchanged():
    text = ("==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020 at pc 0x50b1e8\n"
            "    #0 0x50b1e7 in main /tmp/uaf.c:6:10\n    #1 0x41a2c9 in _start (/tmp/a.out+0x41a2c9)\n")
    (t,) = threads_of(text)
    assert (t.frames[0].function, t.frames[0].file, t.frames[0].line) == ("main", "/tmp/uaf.c", 6)
    assert (t.frames[1].function, t.frames[1].library) == ("_start", "/tmp/a.out")
    (g,) = threads_of("#0  0x00007f in foo (a=0x1+0x2) at x.c:3\n#1  0x00007f in main () at x.c:9\n")
    assert (g.frames[0].function, g.frames[0].file, g.frames[0].line) == ("foo", "x.c", 3)


def test_gdbs_current_thread_remark_is_not_glued_to_a_wrapped_frame(db):
    text = real("grpc/grpc-25861-1.txt")
    (t,) = threads_of(text)  # the stop echo above "bt" is the same thread
    assert t.current and t.frames[0].function.startswith("grpc_core::LockfreeEvent::SetReady")
    assert t.frames[0].library.endswith("cygrpc.cpython-38-x86_64-linux-gnu.so")
    assert analyzed(text, db)[1] == "crashed"


def test_a_segmentation_fault_line_in_either_case_is_a_crash(db):
    assert analyzed(real("grpc/grpc-23796-1.txt"), db)[1] == "crashed"


def test_pybt_frame_lines_without_its_header_are_python_frames(db):
    text = real("paramiko/paramiko-515-1.txt")
    (t,) = threads_of(text)
    assert t.frames[0].kind == "python" and t.frames[0].function == "wait"
    assert t.frames[0].source == "waiter.acquire()"
    assert analyzed(text, db)[1] == "condition"
    # a native eval frame whose argument is a Frame stays a native frame
    (n,) = threads_of("#0  0x00007f in PyEval_EvalFrameEx (f=Frame 0x7f1, for file /a/x.py, line 3, in g (), "
                      "throwflag=0) at Python/ceval.c:10\n#1  0x00007f in main ()\n")
    assert n.frames[0].kind == "python" and any(f.kind == "native" and f.function == "PyEval_EvalFrameEx"
                                                for f in n.frames)


# --- log lines a crash or a hang leaves -----------------------------------------------------------

def test_objc_fork_safety_abort_and_tpu_slowness_lines_are_known(db):
    assert analyzed(real("ki-ntree/ki-ntree-160-1.txt"), db)[1] == "crashed"
    assert analyzed(real("colab/colabtools-3952-1.txt"), db)[1] == "gpu"


def test_a_sanitizer_named_in_prose_is_no_crash():
    assert refused("we built it with AddressSanitizer enabled\nand it hangs anyway\n") == UNRECOGNISED


# --- signatures and waits ------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["nikola/nikola-1893-1.txt", "testdata/testdata-53-1.txt", "track/track-111-1.txt"])
def test_the_ctrl_c_traceback_of_the_exit_join_is_the_nondaemon_thread_hang(db, path):
    assert "python-shutdown-nondaemon-threads" in sigs(analyzed(real(path), db)[0])


def test_an_error_raised_deep_under_threading_shutdown_is_not_the_exit_join(db):
    text = ("Exception ignored in: <module 'threading' from '/usr/lib/python3.8/threading.py'>\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.8/threading.py", line 1388, in _shutdown\n    atexit_call()\n'
            '  File "/app/hooks.py", line 4, in atexit_call\n    cleanup()\n'
            '  File "/app/hooks.py", line 9, in cleanup\n    close_all()\n'
            '  File "/app/db.py", line 20, in close_all\n    conn.close()\n'
            '  File "/app/db.py", line 30, in close\n    raise RuntimeError("closed")\n'
            "RuntimeError: closed\n")
    assert "python-shutdown-nondaemon-threads" not in sigs(analyzed(text, db)[0])
    text = ('Traceback (most recent call last):\n  File "/app/main.py", line 8, in <module>\n    t.join()\n'
            '  File "/usr/lib/python3.8/threading.py", line 1011, in join\n    self._wait_for_tstate_lock()\n'
            "KeyboardInterrupt\n")
    assert "python-shutdown-nondaemon-threads" not in sigs(analyzed(text, db)[0])


def test_c10d_store_connect_timeout_lines_are_the_store_rendezvous(db):
    snap, wait = analyzed(real("cppo/cppo-6-1.txt"), db)
    assert "c10d-store-rendezvous-hang" in sigs(snap) and wait == "collective"
    near = ("[W521 15:43:02.707 socket.cpp:464] [c10d] The server socket has failed to listen on any local "
            "network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE\n"
            "[W521 15:43:03.707 socket.cpp:464] [c10d] The server socket has failed to bind.\n")
    assert "c10d-store-rendezvous-hang" not in sigs(analyzed(near, db, "log")[0])


def test_paramikos_other_packetizer_frames_are_no_network_read(db):
    text = ('Traceback (most recent call first):\n'
            '  File "/usr/lib/python3/dist-packages/paramiko/packet.py", line 400, in send_message\n'
            '  File "/usr/lib/python3/dist-packages/paramiko/transport.py", line 1900, in _send_message\n')
    assert analyzed(text, db)[1] != "network"


def test_garbage_is_one_line_exit_2(tmp_path):
    paste = tmp_path / "paste.txt"
    paste.write_text("Process:  nothing [1]\nThread 0: idle\n  look [notes.md:3]\nwow! 12345678 9abcdef0\n")
    res = run_hanganalyze([paste], timeout=120)
    err = res.stderr.decode().strip()
    assert res.returncode == 2 and err.count("\n") == 0 and "macOS crash report" in err
