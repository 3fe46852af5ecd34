"""Signatures by bug class (issue 22 item 3): each class's signature matches real stacks of its
class in any spelling (mangled, demangled, unnamed driver frames), and a near miss (the same paste
without the frame or line the class needs) does not.  Texts: tests/data/classtext/ (real pastes,
source URL in each header) and the real-world corpus (tests/data/realworld/)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple

import pytest
from helpers import text_or_log_findings

from hanganalyze_gdbext.model import Finding

DATA = Path(__file__).resolve().parents[1] / "data"
CLASSTEXT = DATA / "classtext"
REALWORLD = DATA / "realworld"


def _body(path: Path) -> Tuple[str, List[str]]:
    lines = path.read_text().splitlines()
    expect = [w for line in lines if line.startswith("# expect:") for w in line.split(":", 1)[1].split()]
    return "\n".join(line for line in lines if not line.startswith("# ")) + "\n", expect


def findings(text: str, db) -> List[Finding]:
    return text_or_log_findings(text, db)


def ids(text: str, db) -> List[str]:
    return [f.signature for f in findings(text, db)]


def drop(text: str, pattern: str) -> str:
    kept = "\n".join(line for line in text.splitlines() if not re.search(pattern, line)) + "\n"
    assert kept != text
    return kept


# (file, the line(s) a near miss lacks)
CLASSTEXTS = [
    ("network_read_requests_5433.txt", r"http/client\.py"),
    ("stale_lock_hfhub_2543.txt", r"waiting to acquire lock"),
    ("daemon_stderr_sentry_877.txt", r"Fatal Python error"),
    ("fork_child_malloc_eio_593.txt", r"__libc_calloc"),
    ("terminate_message_only.txt", r"terminate called"),
]


#: Signatures this module tests with a real stack (or line) and a near miss (test_signature_coverage).
COVERED = ["network-read-no-timeout", "stale-file-lock", "daemon-thread-stdio-at-shutdown", "fork-child-inherited-lock",
           "std-thread-joinable-terminate", "python-finalization-gil-reacquire", "pgnccl-collective-timeout",
           "cuda-host-waits-for-device", "cuda-driver-lock-lazy-loading-race", "loader-lock-gil-inversion",
           "tf-resourcemgr-clear-cleanup-deadlock"]


def test_every_classtext_file_is_listed():
    assert {p.name for p in CLASSTEXT.glob("*.txt")} == {c[0] for c in CLASSTEXTS}
    for p in CLASSTEXT.glob("*.txt"):
        assert p.read_text().startswith("# source: https://"), p.name


@pytest.mark.parametrize("name,key", CLASSTEXTS)
def test_class_signature_matches_a_real_paste(db, name, key):
    text, expect = _body(CLASSTEXT / name)
    found = ids(text, db)
    assert expect and all(e in found for e in expect), (name, found)


@pytest.mark.parametrize("name,key", CLASSTEXTS)
def test_class_signature_near_miss(db, name, key):
    text, expect = _body(CLASSTEXT / name)
    found = ids(drop(text, key), db)
    assert not any(e in found for e in expect), (name, found)


def test_terminate_message_names_both_causes_at_lower_confidence(db):
    text, _ = _body(CLASSTEXT / "terminate_message_only.txt")
    both = {f.signature: f for f in findings(text, db)
            if f.signature in ("std-thread-joinable-terminate", "python-finalization-gil-reacquire")}
    assert set(both) == {"std-thread-joinable-terminate", "python-finalization-gil-reacquire"}
    for f in both.values():
        assert f.confidence < 0.8
        # each names the other cause and the frames that tell them apart
        rules = " ".join(e.rule or "" for e in f.evidence)
        assert "std::thread::~thread" in rules and "take_gil" in rules


# --- GPU / NCCL classes on the corpus's real pastes -------------------------------------------


def _corpus(name: str) -> str:
    return (REALWORLD / name).read_text()


def test_watchdog_stack_alone_is_a_collective_timeout(db):
    text = _corpus("particleflow/particleflow-390-1.txt")
    assert "Watchdog caught" not in text
    assert "pgnccl-collective-timeout" in ids(text, db)
    # near miss: the watchdog thread without checkTimeout (it polls isCompleted: a CUDA error, not a timeout)
    miss = text.replace("WorkNCCL::checkTimeout", "WorkNCCL::isCompleted")
    assert "pgnccl-collective-timeout" not in ids(miss, db)


def test_watchdog_stack_mangled(db):
    text = _corpus("particleflow/particleflow-390-1.txt")
    mangled = re.sub(r"c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout\([^+]*\)",
                     "_ZN4c10d16ProcessGroupNCCL8WorkNCCL12checkTimeoutESt8optionalINSt6chrono8duration"
                     "IlSt5ratioILl1ELl1000EEEEE", text)
    mangled = mangled.replace("c10d::ProcessGroupNCCL::watchdogHandler()",
                              "_ZN4c10d16ProcessGroupNCCL15watchdogHandlerEv")
    assert mangled != text and "_ZN4c10d16ProcessGroupNCCL8WorkNCCL12checkTimeout" in mangled
    assert "pgnccl-collective-timeout" in ids(mangled, db)


def test_watchdog_message_broken_over_two_lines(db):
    # (a "[rank3]:" prefix on the first half only splits the halves into two ranks: not covered yet)
    msg = ("[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=25, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600093 "
           "milliseconds before timing out.")
    for cut in (msg.index("caught") + 6, msg.index("WorkNCCL("), msg.index("timeout:") + 3):
        text = msg[:cut].rstrip() + "\n" + msg[cut:].lstrip() + "\n"
        assert "pgnccl-collective-timeout" in ids(text, db), cut
    assert "pgnccl-collective-timeout" not in ids(msg.replace("collective operation timeout", "collective") + "\n", db)


def test_gpu_sync_over_unnamed_driver_frames(db):
    text = _corpus("pytorch/pytorch-95944-1.txt")
    f = [x for x in findings(text, db) if x.signature == "cuda-host-waits-for-device"]
    assert f and f[0].confidence < 0.8
    # other addresses, same class
    shifted = re.sub(r"0x000014cd95[0-9a-f]{6}", "0x00007f0011223344", text)
    assert "cuda-host-waits-for-device" in ids(shifted, db)
    # near miss: the driver frames without the blocking CUDA call above them
    assert "cuda-host-waits-for-device" not in ids(drop(text, r"cudaMemcpyAsync|_local_scalar_dense"), db)


def test_cuda_driver_loading_lock_race(db):
    text = _corpus("xla/xla-pr38932-1.txt")
    f = [x for x in findings(text, db) if x.signature == "cuda-driver-lock-lazy-loading-race"]
    assert f and f[0].confidence < 0.8  # one side only
    assert "cuda-driver-lock-lazy-loading-race" not in ids(drop(text, r"cuKernelSetAttribute"), db)


def test_loader_lock_against_the_gil_one_side(db):
    text = _corpus("threadpoolctl/threadpoolctl-239-1.txt")
    f = [x for x in findings(text, db) if x.signature == "loader-lock-gil-inversion"]
    assert f and f[0].confidence < 0.8
    assert "loader-lock-gil-inversion" not in ids(drop(text, r"dl_iterate_phdr"), db)


def test_daemon_thread_stdout_corpus(db):
    for name in ("cpython/riotkit-do-52-1.txt", "cpython/pyeds-11-1.txt", "cpython/dispy-177-1.txt"):
        text = _corpus(name)
        assert "daemon-thread-stdio-at-shutdown" in ids(text, db), name
        assert "daemon-thread-stdio-at-shutdown" not in ids(drop(text, r"could not acquire lock"), db), name


def test_wait_aliases_are_one_family(db):
    """glibc's and libstdc++'s spellings of a wait all count as a wait (the fragment 'blocked')."""
    base = ("#1  0x00007f0000001000 in {w} () from /lib/x86_64-linux-gnu/libc.so.6\n"
            "#2  0x00007f0000002000 in __kmp_lock_suspend_mx () from /usr/lib/libiomp5.so\n"
            "#3  0x00007f0000003000 in __kmp_free_thread () from /usr/lib/libiomp5.so\n"
            "#4  0x00007f0000004000 in __kmp_set_num_threads () from /usr/lib/libiomp5.so\n")
    for w in ("__GI___pthread_mutex_lock", "pthread_cond_wait@@GLIBC_2.3.2", "__futex_abstimed_wait_common64",
              "___pthread_cond_timedwait64", "__lll_lock_wait_private",
              "std::condition_variable::wait(std::unique_lock<std::mutex>&)",
              "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE", "futex_wait"):
        assert "intel-omp-set-num-threads-in-worker" in ids(base.format(w=w), db), w
    assert "intel-omp-set-num-threads-in-worker" not in ids(base.format(w="memcpy"), db)


# mp-queue-join-before-drain from Python frames only, in a Windows faulthandler paste (pytest#13137)
MP_QUEUE_WINDOWS = (Path(__file__).resolve().parents[1] / "data" / "realworld" / "pytest"
                    / "pytest-13137-1.txt").read_text()


def test_mp_queue_join_before_drain_from_python_frames_and_windows_paths(db):
    assert "mp-queue-join-before-drain" in ids(MP_QUEUE_WINDOWS, db)


def test_mp_queue_near_miss_feeder_idle_is_not_a_join_deadlock(db):
    # the same process with its feeder idle (waiting for items, not writing the pipe): nothing to drain
    idle = MP_QUEUE_WINDOWS.replace('connection.py", line 293 in _send_bytes', 'threading.py", line 331 in wait')
    idle = idle.replace('connection.py", line 200 in send_bytes', 'queues.py", line 251 in _feed')
    assert "mp-queue-join-before-drain" not in ids(idle, db)


def test_tf_resourcemgr_cleanup_from_a_data_function_without_clear(db):
    """tensorflow#29695's paste, cut before ResourceMgr::Clear: the tf.data function's step-container
    cleanup blocked on the ResourceMgr mutex is the one-side shape, at lower confidence."""
    text = _corpus("tensorflow/tf-29695-1.txt")
    assert "ResourceMgr::Clear" not in text
    f = [x for x in findings(text, db) if x.signature == "tf-resourcemgr-clear-cleanup-deadlock"]
    assert f and f[0].confidence < 0.8
    # near misses: the same wait under a session step's own cleanup (not a tf.data function), or no Cleanup
    step = text.replace("tensorflow::data::CapturedFunction::RunInstantiated", "tensorflow::DirectSession::RunInternal")
    assert "tf-resourcemgr-clear-cleanup-deadlock" not in ids(step, db)
    assert "tf-resourcemgr-clear-cleanup-deadlock" not in ids(drop(text, r"ResourceMgr::Cleanup"), db)


def test_fatal_error_wrapped_over_lines_is_one_message(db):
    """The fatal error of a daemon thread holding a std stream's lock, as pastes wrap it (over two or
    three lines, before the object's repr): connectonion#644 (stderr), ha-mcp#2027 (stdin)."""
    for name in ("connectonion/connectonion-pr644-1.txt", "ha-mcp/ha-mcp-2027-1.txt",
                 "proxmoxmcp/proxmoxmcp-pr113-1.txt"):
        text = _corpus(name)
        assert "could not acquire lock for\n<_io." in text
        assert "daemon-thread-stdio-at-shutdown" in ids(text, db), name
        # near miss: the same lines without the lock clause are another fatal error
        other = text.replace("could not acquire lock for", "failed for")
        assert "daemon-thread-stdio-at-shutdown" not in ids(other, db)


def test_fatal_error_message_read_from_gdbs_arguments(db):
    """A gdb backtrace of CPython's fatal-error path carries the message only as fatal_error's and
    _Py_FatalErrorFunc's string arguments (greenlet#325, or-tools#3329)."""
    for name in ("greenlet/greenlet-325-1.txt", "or-tools/or-tools-3329-1.txt"):
        text = _corpus(name)
        assert "Fatal Python error" not in text
        f = [x for x in findings(text, db) if x.signature == "python-api-without-gil"]
        assert f, name
        # near miss: the same frames with another fatal error's message
        other = text.replace("Python memory allocator called without holding the GIL", "object already freed")
        assert "python-api-without-gil" not in ids(other, db), name


def test_forked_child_flushing_a_std_stream_python_frames_only(db):
    """A forked child stuck in multiprocessing's flush of stdout/stderr, Python frames only
    (kubeless runtimes#94: faulthandler; domain-scan#157: py-bt without its header)."""
    for name in ("kubeless/runtimes-94-1.txt", "domain-scan/domain-scan-157-1.txt"):
        text = _corpus(name)
        f = [x for x in findings(text, db) if x.signature == "fork-child-inherited-lock"]
        assert f and f[0].confidence < 0.8, name
        # near miss: not a forked child (no popen_fork._launch): a spawned or plain process flushing
        assert "fork-child-inherited-lock" not in ids(drop(text, r"popen_fork\.py"), db), name
    # near miss: a flush inside the child's target (Process.run) is the program's own
    text = _corpus("kubeless/runtimes-94-1.txt")
    proc_py = '  File "/opt/miniconda3/lib/python3.7/multiprocessing/process.py", '
    in_target = text.replace(proc_py + "line 317 in _bootstrap\n",
                             proc_py + "line 99 in run\n" + proc_py + "line 297 in _bootstrap\n")
    assert in_target != text and "fork-child-inherited-lock" not in ids(in_target, db)


def test_single_thread_waiting_for_a_streams_buffer_lock(db):
    """cpython#91776: a forked worker's only thread waits in _enter_buffered_busy (one side, 0.5)."""
    text = _corpus("cpython/cpython-91776-1.txt")
    f = [x for x in findings(text, db) if x.signature == "fork-child-inherited-lock"]
    assert f and f[0].confidence < 0.8
    assert "fork-child-inherited-lock" not in ids(drop(text, r"_enter_buffered_busy"), db)
    # near miss: another thread in the dump (it may hold the lock, writing to a full pipe)
    two = text + ("Thread 2 (Thread 0x7f87cb000700 (LWP 329030)):\n"
                  "#0  0x00007f87cc3a1234 in write () from /lib/x86_64-linux-gnu/libpthread.so.0\n")
    assert "fork-child-inherited-lock" not in ids(two, db)
