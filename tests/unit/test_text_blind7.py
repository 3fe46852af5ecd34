"""Issue 32, the mechanisms behind sealed round 7's misses, each on the round's real paste (now
open data in tests/data/realworld, manifest-blind7.yaml) and a near miss it must not claim:
Python 2's py-bt lines and PyEval's ``f=Frame`` argument in gdb pastes, terminal-wrapped vLLM
records and ``File`` lines, rich's boxed tracebacks, WinDbg's x64 table, the log lines a hang
leaves (DeepSpeed's init banner, cuda-gdb's NCCL kernel, Ray's object wait, Windows crashes),
multiprocessing pool results, and a Python stack stopped in the rendezvous."""

from __future__ import annotations

import pytest
from helpers import REPO, text_verdict

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text, rich
from hanganalyze.acquire.text.detect import UNRECOGNISED
from hanganalyze.acquire.text.unwrap import join_file_pieces, unwrap
from hanganalyze.errors import InputError

REAL = REPO / "tests" / "data" / "realworld"


def real(path: str) -> str:
    return (REAL / path).read_text()


def analyzed(text: str, db):
    return text_verdict(text, db)


def funcs(t):
    return [f.function for f in t.frames]


# --- gdb pastes of Python 2 ------------------------------------------------------------------

def test_python2_pybt_lines_are_python_frames_one_thread_a_listing(db):
    snap = parse_text(real("cylc/cylc-flow-1823-1.txt"))
    threads = [t for p in snap.processes for t in p.threads if t.frames]
    assert funcs(threads[0]) == ["acquire", "wait", "join", "_exitfunc"]
    assert all(f.kind == "python" for f in threads[0].frames)
    assert threads[0].frames[1].file == "/usr/lib64/python2.6/threading.py"
    assert funcs(threads[1])[:3] == ["acquire", "get", "worker"]  # the numbers restart: another listing
    assert analyzed(real("cylc/cylc-flow-1823-1.txt"), db)[1] == "join"


def test_a_native_frame_named_like_file_is_not_a_python2_line():
    text = "#0  0x00007f in file_read (f=0x1, buf=0x2) at Objects/fileobject.c:10\n#1  0x00007f in main ()\n"
    t = parse_text(text).processes[0].threads[0]
    assert funcs(t) == ["file_read", "main"] and all(f.kind == "native" for f in t.frames)


def test_the_frame_a_pyeval_frame_runs_comes_from_its_argument(db):
    text = real("xpra/xpra-148-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert [(f.kind, f.function) for f in t.frames[:2]] == [("python", "wait"), ("native", "PyEval_EvalFrameEx")]
    assert (t.frames[0].file, t.frames[0].line) == ("/usr/lib/python2.6/threading.py", 239)
    assert analyzed(text, db)[1] == "condition"


def test_a_pyeval_frame_without_a_printed_frame_object_adds_nothing():
    text = "#4  PyEval_EvalFrameEx (f=0x7f4de0ba1730, throwflag=0) at ../Python/ceval.c:2389\n"
    t = parse_text(text).processes[0].threads[0]
    assert [(f.kind, f.function) for f in t.frames] == [("native", "PyEval_EvalFrameEx")]


# --- wrapped pastes --------------------------------------------------------------------------

def test_wrapped_vllm_records_and_cut_file_lines_make_a_traceback(db):
    text = real("spark-vllm-docker/spark-vllm-docker-335-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert funcs(t) == ["init_process_group", "wrapper", "wrapper"]
    assert t.frames[0].file.endswith("torch/distributed/distributed_c10d.py") and t.frames[0].line == 1831
    snap, wait = analyzed(text, db)
    assert wait == "collective"
    found = {f.signature: f.confidence for f in snap.findings}
    assert 0 < found["c10d-store-rendezvous-hang"] < 0.8  # the frames cannot say which peer is missing


def test_file_pieces_are_joined_only_into_a_whole_file_line():
    assert join_file_pieces(["  File", '"/x/y.py",', "line 3, in f"]) == ['  File "/x/y.py", line 3, in f']
    assert join_file_pieces(["File", "not a path at all", "line 3"]) is None
    # a record prefix on a minority of prose lines is kept (only distinctive prefixes go at 40%)
    prose = ["12:00:01 started", "then we saw", "nothing happen", "for a while", "and stopped"]
    assert unwrap(prose) is prose


def test_a_message_after_a_frame_is_no_source_line(db):
    """faulthandler's ``Fatal Python error:`` right after a cut ``File`` line is the crash, not code."""
    snap, wait = analyzed(real("dask/dask-ctl-37-1.txt"), db)
    assert "daemon-thread-stdio-at-shutdown" in [f.signature for f in snap.findings]
    assert wait == "crashed"


def test_an_all_reduce_traceback_is_no_rendezvous(db):
    text = ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    dist.all_reduce(t)\n'
            '  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2050, '
            'in all_reduce\n'
            "    work.wait()\nRuntimeError: NCCL communicator was aborted\n")
    snap, _ = analyzed(text, db)
    assert "c10d-store-rendezvous-hang" not in [f.signature for f in snap.findings]


# --- rich tracebacks -------------------------------------------------------------------------

def test_rich_boxed_traceback_with_wrapped_paths(db):
    text = real("deepdewedge/deepdewedge-20-1.txt")
    proc = parse_text(text).processes[0]
    assert proc.notes[-1] == "parsed as rich traceback (boxed frames)"
    t = proc.threads[0]
    assert funcs(t) == ["_init_dist_connection", "setup_distributed"]
    assert t.frames[1].file.endswith("/site-packages/pytorch_lightning/strategies/ddp.py")  # joined path
    assert t.frames[1].line == 204 and t.frames[1].source.startswith("_init_dist_connection(")
    snap, wait = analyzed(text, db)
    assert wait == "collective" and "c10d-store-rendezvous-hang" in [f.signature for f in snap.findings]


def test_a_location_outside_a_box_is_no_rich_frame():
    assert rich.score(["main.py:12 in main", "train.py:40 in step"]) == 0
    with pytest.raises(InputError) as e:
        parse_text("│ hello there │\n│ nothing here │\n")
    assert str(e.value) == UNRECOGNISED and "\n" not in str(e.value)


# --- WinDbg x64, log lines a hang leaves -----------------------------------------------------

def test_windbg_x64_table_with_wide_columns():
    t = parse_text(real("azure-cli/azure-cli-30792-1.txt")).processes[0].threads[0]
    assert (t.frames[0].library, t.frames[0].function) == ("python312", "PyObject_LookupAttr")
    assert t.frames[1].library == "_ctypes" and t.frames[1].function is None


@pytest.mark.parametrize("path, wait", [
    ("rlhflow/online-rlhf-11-1.txt", "collective"),   # DeepSpeed's init banner, the log stops there
    ("k2/snowfall-pr71-1.txt", "collective"),         # cuda-gdb: the running kernel is NCCL's
    ("ray/ray-59339-1.txt", "future"),                # ray.get's object never local
    ("cpython/cpython-74094-1.txt", "crashed"),       # Windows Application Error + faulthandler
    ("pywin32/pywin32-271-1.txt", "crashed"),         # WinDbg's access violation record
    ("crds/crds-311-1.txt", "future"),                # multiprocessing pool's AsyncResult.wait
])
def test_real_waits(path, wait, db):
    assert analyzed(real(path), db)[1] == wait


@pytest.mark.parametrize("text", [
    # prose about access violations, a Ray line about local objects (a kernel list without NCCL is
    # read as cuda-gdb's listing now: tests/unit/test_cudakernels.py)
    "I think this is an access violation somewhere\nin the windows build, no idea\n",
    "Objects are local now\nall good\n",
])
def test_near_miss_lines_are_still_refused(text):
    with pytest.raises(InputError):
        parse_text(text)


def test_a_pool_workers_task_queue_is_still_a_queue(db):
    text = ('Traceback (most recent call last):\n'
            '  File "/usr/lib/python3.10/multiprocessing/pool.py", line 114, in worker\n    task = get()\n'
            '  File "/usr/lib/python3.10/multiprocessing/queues.py", line 365, in get\n    with self._rlock:\n'
            "KeyboardInterrupt\n")
    assert analyzed(text, db)[1] == "queue"


def test_a_pytest_session_cut_before_any_frame_is_refused_in_one_line():
    """hiredis-py-167 (round 7, not in manifest-blind7.yaml): a session header and a FAILURES banner,
    no frame and no line a hang leaves: refused, and the message says what to capture."""
    with pytest.raises(InputError) as e:
        parse_text(real("hiredis/hiredis-py-167-1.txt"))
    assert str(e.value) == UNRECOGNISED and "\n" not in str(e.value) and "py-spy dump" in str(e.value)


# --- waits from mechanisms: entering a lock, OpenSSL's names ------------------------------------

@pytest.mark.parametrize("path", ["patroni/patroni-pr3413-1.txt", "cpython/cpython-pr3895-1.txt"])
def test_a_queue_call_entering_the_queues_own_lock_waits_for_the_lock(path, db):
    """patroni: a signal handler's log put re-enters Queue.put (threading Condition.__enter__);
    cpython bpo-31699: a weakref callback's put blocks in multiprocessing's Lock.__enter__."""
    assert analyzed(real(path), db)[1] == "lock"


def test_a_queue_get_in_its_conditions_wait_is_still_a_queue(db):
    text = ("Thread 0x7F0C4C8FE100 (idle)\n    wait (threading.py:320)\n    get (queue.py:171)\n"
            "    worker (app/pool.py:40)\n")
    assert analyzed(text, db)[1] == "queue"


def test_openssl_handshake_under_old_method_names_is_network(db):
    assert analyzed(real("pynab/pynab-171-1.txt"), db)[1] == "network"


def test_a_plain_file_read_is_not_network(db):
    text = ("Thread 4 (LWP 69):\n#0  0x1 in __read () from /lib/64/libc.so.1\n"
            "#1  0x2 in read () from /lib/64/libc.so.1\n#2  0x3 in _Py_read () from /opt/lib/libpython3.8.so\n"
            "#3  0x4 in _io_FileIO_readall () from /opt/lib/libpython3.8.so\n")
    assert analyzed(text, db)[1] == "io"


# --- SGLang's logs --------------------------------------------------------------------------

def test_sglang_log_with_its_watchdogs_pyspy_dump(db):
    """sglang-17941 (manifest-formats.yaml): the watchdog line between two py-spy dumps."""
    snap = parse_text(real("sglang/sglang-17941-1.txt"))
    assert [p.pid for p in snap.processes] == [None, 88693]
    main = snap.processes[1].threads[0]
    assert main.name == "MainThread" and "gloo::transport::tcp::UnboundBuffer::waitRecv" in funcs(main)
    snap = pipeline.analyze(snap, db)
    waits = {tuple(f.triage.about or ()): f.triage.wait for f in snap.findings if f.signature == "triage"}
    assert waits[(88693,)] == "collective"  # the receiving scheduler; the other process is helpers only


@pytest.mark.parametrize("line, known", [
    ("[2025-03-09 00:57:15 TP4] Watchdog timeout (self.watchdog_timeout=300)", True),
    ("[2026-01-29 13:12:37 PP1 TP1] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", True),
    ("[2025-03-09 00:57:15 TP4] set --watchdog-timeout to 600 for long prefills", False),
])
def test_sglang_watchdog_line_is_a_known_line_and_its_advice_is_not(line, known):
    text = line + "\n[2025-03-09 00:57:20] Decode batch. #running-req: 3\n"
    if known:
        proc = parse_text(text).processes[0]  # read as a log: not refused, and no frame made of it
        assert proc.messages[0] == line and not proc.threads
    else:
        with pytest.raises(InputError):
            parse_text(text)


def test_line_numbers_on_lines_of_their_own_between_frame_lines():
    """pai-megatron-patch-468: a web log viewer's numbers ('7', '8', ...) between the frame lines."""
    t = parse_text(real("pai-megatron/pai-megatron-patch-468-1.txt")).processes[0].threads[0]
    assert funcs(t) == ["wrapper", "launch_agent", "__call__", "run", "main", "wrapper"]
    assert t.frames[1].source == "result = agent.run()"


def test_an_indented_number_under_a_frame_is_its_source_line():
    text = 'Traceback (most recent call last):\n  File "x.py", line 3, in f\n    0\nValueError: bad\n'
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].source == "0"


def test_pytest_timeout_thread_stacks_real_sample(db):
    """pytest-11174 (manifest-formats.yaml): the pool's result handler reading its pipe."""
    proc = parse_text(real("pytest/pytest-11174-1.txt")).processes[0]
    assert proc.notes[-1] == "parsed as pytest-timeout stacks"
    assert [t.name for t in proc.threads] == ["Thread-6", "Thread-5"]
    assert funcs(proc.threads[0])[:4] == ["_recv", "_recv_bytes", "recv", "_handle_results"]
    assert analyzed(real("pytest/pytest-11174-1.txt"), db)[1] == "queue"


def test_a_timeout_banner_alone_is_no_pytest_timeout_dump():
    with pytest.raises(InputError):
        parse_text("+++++++++++++++ Timeout +++++++++++++++\nthe build took too long\n")


def test_rank_prefixed_lines_one_glued_to_a_progress_bar():
    """llamafactory-2902 (manifest-formats.yaml): '[rank0]:' right after a tqdm bar (redrawn with a
    carriage return, no newline) still starts rank 0's line; the bar stays with the untagged lines."""
    untagged, rank0, rank1 = parse_text(real("llamafactory/llamafactory-2902-1.txt")).processes
    assert untagged.messages[-1].endswith("4.98s/it]")
    assert "SeqNum=1516" in rank0.messages[0] and "SeqNum=1517" in rank1.messages[0]


def test_a_rank_tag_inside_prose_is_no_glued_prefix():
    from hanganalyze.acquire.text.common import split_ranks
    segs = split_ranks(["see the line [rank0]: Watchdog caught collective operation timeout", "[rank1]: ok"])
    assert segs[0].label is None and segs[0].lines[0].startswith("see the line [rank0]:")


@pytest.mark.parametrize("line, wait", [
    ("[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['python', 'main.py'] "
     "exits with return code = -9", "crashed"),
    ("  exitcode  : -9 (pid: 4242)", "crashed"),
])
def test_a_launchers_line_for_a_rank_killed_by_a_signal(line, wait, db):
    assert analyzed(line + "\n", db)[1] == wait


def test_a_launcher_exit_code_zero_is_no_death():
    with pytest.raises(InputError):
        parse_text("[2023-04-14 13:11:27,885] [INFO] [launch.py:351:main] Process 13266 exits successfully.\n"
                   "[2023-04-14 13:11:27,885] [INFO] [launch.py:434:sigkill_handler] exits with return code = 0\n")


def test_vllm_v1_worker_prefix_with_rank_is_undone(db):
    """vllm-18577 (manifest-formats.yaml): '(VllmWorker rank=2 pid=808339) ERROR ... [file.py:487]'."""
    t = parse_text(real("vllm/vllm-18577-1.txt")).processes[0].threads[0]
    assert funcs(t) == ["__init__", "worker_main"] and t.frames[0].source == "self.worker.load_model()"
    assert analyzed(real("vllm/vllm-18577-1.txt"), db)[1] == "crashed"  # 'WorkerProc failed to start.'


def test_a_parenthesised_remark_with_pid_is_no_worker_prefix():
    lines = ["(see the note about pid=3 below) File one", "(and more) text", "plain line"]
    assert unwrap(lines) is lines
