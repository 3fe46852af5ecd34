"""Issue 32: macOS ``sample`` call-graph trees (Activity Monitor's "Sample Process") are read, not
refused: each thread's stack is the tree's heaviest path, innermost frame first; on the real paste of
grpc#31885 and near misses that only look like a tree with counts."""

from __future__ import annotations

from helpers import REPO

from hanganalyze.acquire.text import macsample, parse_text
from hanganalyze.acquire.text.detect import UNRECOGNISED
from hanganalyze.errors import InputError

REAL = REPO / "tests" / "data" / "realworld"


def funcs(thread):
    return [f.function for f in thread.frames]


def refused(text: str) -> str:
    try:
        parse_text(text)
    except InputError as e:
        return str(e)[: len(UNRECOGNISED)]
    return "read"


def test_the_real_grpc_sample_is_two_threads_on_their_heaviest_paths():
    snap = parse_text((REAL / "grpc" / "grpc-31885-1.txt").read_text())
    assert "parsed as macOS sample call graph" in snap.processes[0].notes
    a, b = snap.processes[0].threads
    # 2865 of 2866 samples went to __psynch_cvwait, 1 to __gettimeofday: the heavier branch wins
    assert funcs(a)[:4] == ["__psynch_cvwait", "_pthread_cond_wait", "gpr_cv_wait", "timer_thread(void*)"]
    assert funcs(a)[-1] == "thread_start" and len(a.frames) == 7
    assert a.frames[0].library == "libsystem_kernel.dylib" and a.frames[0].address == 0x7fff20767cce
    assert "__gettimeofday" not in funcs(a)
    assert any("2865 of 2866 samples" in n for n in a.notes)
    assert b.tid == 93633372 and funcs(b) == ["_pthread_start", "thread_start"]


def test_the_heavier_child_wins_even_when_printed_second_and_the_queue_names_the_thread():
    text = ("Call graph:\n"
            "    100 Thread_7   DispatchQueue_1: com.apple.main-thread  (serial)\n"
            "    + 100 start  (in libdyld.dylib) + 1  [0x7fff20379f3d]\n"
            "    +   100 main  (in Python) + 20  [0x100003f54]\n"
            "    +     10 poll  (in libsystem_kernel.dylib) + 10  [0x7fff2076a0fe]\n"
            "    +     90 take_gil  (in Python) + 120  [0x1049c6f1c]\n"
            "    +     ! 90 _pthread_cond_wait  (in libsystem_pthread.dylib) + 1298  [0x7fff2079ae49]\n"
            "    100 Thread_8: worker\n"
            "    + 100 ???  (in <unknown binary>)  [0x1234567]\n"
            "\nTotal number in stack (recursive counted multiple, when >=5):\n"
            "        90       _pthread_cond_wait  (in libsystem_pthread.dylib) + 0  [0x7fff2079a93b]\n"
            "Binary Images:\n       0x100000000 -        0x100003fff +Python (0) <UUID> /usr/bin/python3\n")
    main, worker = parse_text(text).processes[0].threads
    assert main.name == "com.apple.main-thread" and main.tid == 7
    assert funcs(main) == ["_pthread_cond_wait", "take_gil", "main", "start"]
    assert worker.name == "worker" and worker.frames[0].function is None and worker.frames[0].library is None


def test_counted_lines_without_in_lib_and_address_are_no_sample():
    # a word-count table and a "+ N item" diff-like list: counts and prefixes, but no '(in X)  [0x..]'
    lines = ["    + 2866 thread_start  (libsystem_pthread.dylib) + 15", "    +   12 items in queue",
             "    ! 3 retries (in total) [see log]", "2866 Thread_1 started"]
    assert macsample.score(lines) == 0
    assert refused("\n".join(lines) + "\n") == UNRECOGNISED


def test_a_crash_report_is_not_taken_for_a_sample():
    text = ("Exception Type:  EXC_CRASH (SIGABRT)\nCrashed Thread:  0\n\nThread 0 Crashed:\n"
            "0   libsystem_kernel.dylib   0x00007ff80a1b2e1a __pthread_kill + 10\n"
            "1   libsystem_c.dylib        0x00007ff80a0e0b19 abort + 123\n")
    assert macsample.score(text.splitlines()) == 0
    assert "parsed as macOS crash report" in parse_text(text).processes[0].notes


def test_a_spindump_tree_is_read_the_same_way():
    text = ("Process:          Python [4242]\n\n"
            'Thread 0x5c2    DispatchQueue "com.apple.main-thread"(1)    1001 samples (1-1001)    priority 31\n'
            "  1001  start + 1 (libdyld.dylib + 89917) [0x7fff6f0c8f3d]\n"
            "    1001  main + 118 (Python + 14950) [0x10c6ba3a6]\n"
            "      1000  __psynch_cvwait + 10 (libsystem_kernel.dylib + 14798) [0x7fff6f20c9ce]\n"
            "       *1000  psynch_cvcontinue + 0 (pthread + 19245) [0xffffff7f8ea0ab2d]\n"
            "      1  ??? (Python + 100) [0x10c6b0064]\n"
            'Thread 0x5c9    Thread name "worker"    1001 samples (1-1001)    priority 31\n'
            "  1001  thread_start + 13 (libsystem_pthread.dylib + 9229) [0x7fff6f2c240d]\n")
    main, worker = parse_text(text).processes[0].threads
    assert main.tid == 0x5c2 and main.name == "com.apple.main-thread"
    assert funcs(main) == ["psynch_cvcontinue", "__psynch_cvwait", "main", "start"]
    assert main.frames[1].library == "libsystem_kernel.dylib" and main.frames[1].address == 0x7fff6f20c9ce
    assert worker.name == "worker" and funcs(worker) == ["thread_start"]


def test_a_numbered_list_with_parenthesised_sums_is_no_spindump():
    lines = ["  12  apples + 3 (basket + 1)", "  7  pears (crate + 2) [note]", "Thread 0x1 started"]
    assert macsample.score(lines) == 0
