"""py-bt, py-spy, pystack, faulthandler and traceback samples captured from real runs
(tests/data/text/SOURCES.md) parse to the expected threads, frames and messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import PythonFacts

DATA = Path(__file__).resolve().parents[1] / "data" / "text"
FIX = "/work/main/tests/fixtures/"
THREADING_311 = "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py"


def parse(name, fmt=None):
    return parse_text((DATA / name).read_text(), fmt)


def only(name, fmt=None):
    snap = parse(name, fmt)
    assert len(snap.processes) == 1, [p.notes for p in snap.processes]
    assert snap.processes[0].source == "text"
    return snap.processes[0]


def funcs(thread, kind=None):
    return [f.function for f in thread.frames if kind is None or f.kind == kind]


# The deadlock fixture's threads, innermost Python function first, whatever tool printed them.
DEADLOCK = {
    "MainThread": ["_wait_for_tstate_lock", "join", "main", "<module>"],
    "loader-a": ["take_a_then_b", "run", "_bootstrap_inner", "_bootstrap"],
    "loader-b": ["take_b_then_a", "run", "_bootstrap_inner", "_bootstrap"],
    "heartbeat": ["sleeper", "run", "_bootstrap_inner", "_bootstrap"],
}


def short(name):
    return name.rsplit(".", 1)[-1]  # py-spy prints qualified names: Thread.join


def test_pyspy_dump():
    proc = only("pyspy_dump.txt")
    assert proc.pid == 10719
    assert proc.python == PythonFacts(version="3.11.7")
    assert proc.executable == "/root/.pyenv/versions/3.11.7/bin/python3.11"
    assert proc.argv[-1] == FIX + "txt_deadlock.py"
    assert [(t.tid, t.name) for t in proc.threads] == [
        (10719, "MainThread"), (10721, "loader-a"), (10722, "loader-b"), (10723, "heartbeat"),
    ]
    for t in proc.threads:
        assert [short(f) for f in funcs(t)] == DEADLOCK[t.name]
        assert all(f.kind == "python" for f in t.frames)
    main = proc.threads[0]
    assert main.frames[0].function == "Thread._wait_for_tstate_lock"
    assert (main.frames[0].file, main.frames[0].line) == ("threading.py", 1139)
    assert (proc.threads[1].frames[0].file, proc.threads[1].frames[0].line) == ("txt_deadlock.py", 21)


def test_pyspy_dump_native():
    proc = only("pyspy_dump_native.txt")
    main = proc.threads[0]
    assert main.merge == "merged"
    assert main.frames[0].function is None and main.frames[0].library == "libc.so.6"
    assert main.frames[0].address == 0x7F76FAAA3F16
    assert [f.function for f in main.frames[2:5]] == [
        "PyThread_acquire_lock_timed", "lock_PyThread_acquire_lock", "Thread._wait_for_tstate_lock",
    ]
    assert main.frames[2].kind == "native" and main.frames[2].library == "libpython3.11.so.1.0"
    assert main.frames[4].kind == "python"
    hb = proc.threads[3]
    assert funcs(hb)[:3] == ["clock_nanosleep", "time_sleep", "sleeper"]


@pytest.mark.parametrize("name", ["pyspy_dump.json", "pyspy_dump.json.crlf"])
def test_pyspy_json(name):
    if name.endswith(".crlf"):
        text = (DATA / "pyspy_dump.json").read_text().replace("\n", "\r\n")
        snap = parse_text("$ py-spy dump --json --pid 10719\n" + text)
    else:
        snap = parse(name)
    (proc,) = snap.processes
    assert proc.pid == 10719
    by_name = {t.name: t for t in proc.threads}
    assert set(by_name) == set(DEADLOCK)
    assert by_name["heartbeat"].tid == 10723 and by_name["heartbeat"].pthread_id == 140148964255424
    for name, t in by_name.items():
        assert [short(f) for f in funcs(t)] == DEADLOCK[name]
    f = by_name["loader-b"].frames[0]
    assert (f.file, f.line) == (FIX + "txt_deadlock.py", 28)


def test_pyspy_several_processes_text_and_json():
    txt = parse("pyspy_two_processes.txt").processes
    js = parse("pyspy_two_processes.json").processes
    for procs in (txt, js):
        assert [p.pid for p in procs] == [17665, 17667]
        assert sorted(t.name for t in procs[1].threads) == ["MainThread", "waiter"]
        assert len(procs[0].threads) == 4
    assert txt[1].argv[-2:] == [FIX + "txt_pyerrors.py", "usr1"]
    waiter = next(t for t in js[1].threads if t.name == "waiter")
    assert funcs(waiter)[:3] == ["Condition.wait", "Event.wait", "wait_forever"]


@pytest.mark.parametrize("name", ["pystack_remote.txt", "pystack_core.txt"])
def test_pystack_python_only(name):
    proc = only(name)
    assert [t.tid for t in proc.threads] == [10723, 10722, 10721, 10719]
    names = {10719: "MainThread", 10721: "loader-a", 10722: "loader-b", 10723: "heartbeat"}
    for t in proc.threads:
        assert funcs(t) == DEADLOCK[names[t.tid]]  # reversed: innermost first
        assert t.os_name == "python3.11"
    main = proc.threads[3]
    assert (main.frames[0].file, main.frames[0].line) == (THREADING_311, 1139)
    assert (main.frames[-1].file, main.frames[-1].line) == (FIX + "txt_deadlock.py", 53)


def test_pystack_core_information():
    proc = only("pystack_core.txt")
    assert proc.pid == 10719
    assert proc.signal == "SIGSTOP"  # what gcore left in the core, as pystack reports it
    assert proc.executable == "python3.11"
    assert "The process died due receiving signal SIGSTOP" in proc.messages


def test_pystack_native():
    proc = only("pystack_remote_native.txt")
    t = proc.threads[1]
    assert t.tid == 10722 and t.merge == "merged"
    top = t.frames[0]
    assert (top.function, top.inlined, top.line) == ("__futex_abstimed_wait_common64", True, 57)
    assert top.library == "/usr/lib/x86_64-linux-gnu/libc.so.6"
    assert funcs(t)[3:7] == [
        "PyThread_acquire_lock_timed", "acquire_timed", "lock_PyThread_acquire_lock", "cfunction_call",
    ]
    assert funcs(t)[7] == "take_b_then_a" and t.frames[7].kind == "python"
    assert funcs(t)[-1] == "__clone3"
    hb = proc.threads[0]
    assert funcs(hb)[0] == "clock_nanosleep"  # "@GLIBC_2.2.5" dropped
    main = proc.threads[3]
    assert main.frames[-1].function == "_start" and main.frames[-1].file is None and main.frames[-1].line is None


def test_pystack_native_all():
    proc = only("pystack_native_all.txt")
    assert [t.tid for t in proc.threads] == [17677, 17667]
    assert funcs(proc.threads[0])[-1] == "__clone3"
    assert "wait_forever" in funcs(proc.threads[0], "python")


def test_pybt_all_threads():
    proc = only("pybt_all.txt")
    assert [t.tid for t in proc.threads] == [10723, 10722, 10721, 10719]
    assert proc.threads[3].current
    b = proc.threads[1]
    assert b.frames[0].function == "__enter__" and "_thread.lock" in b.frames[0].note
    assert funcs(b)[1:] == DEADLOCK["loader-b"]
    assert (b.frames[1].file, b.frames[1].line) == (FIX + "txt_deadlock.py", 28)
    assert funcs(proc.threads[3]) == DEADLOCK["MainThread"]
    assert proc.messages == []


def test_pybt_one_thread():
    proc = only("pybt_one.txt")
    (t,) = proc.threads
    assert t.current and funcs(t) == DEADLOCK["MainThread"]


def test_gdb_bt_then_pybt_keeps_both():
    proc = only("gdb_bt_and_pybt.txt")
    assert [t.tid for t in proc.threads] == [10723, 10722, 10721, 10719]
    for t in proc.threads:
        assert t.merge == "unmerged"
        assert all(f.kind == "native" for f in t.frames)
        assert all(f.kind == "python" for f in t.python_frames)
    hb = proc.threads[0]
    assert hb.frames[0].function == "__GI___clock_nanosleep"
    assert [f.function for f in hb.python_frames][:2] == ["sleep", "sleeper"]
    assert "PyThread_acquire_lock_timed" in funcs(proc.threads[1])


def test_faulthandler_later():
    proc = only("faulthandler_later.txt")
    assert "Timeout (0:00:01)!" in proc.messages
    assert [t.pthread_id for t in proc.threads] == [0x7F5AA0FA36C0, 0x7F5AA17A46C0, 0x7F5AA1FA56C0, 0x7F5AA35EFB80]
    assert [funcs(t) for t in proc.threads] == [
        DEADLOCK["heartbeat"], DEADLOCK["loader-b"], DEADLOCK["loader-a"], DEADLOCK["MainThread"],
    ]
    assert all(t.tid is None and not t.current for t in proc.threads)


def test_faulthandler_fatal_abort():
    proc = only("faulthandler_abort.txt")
    assert proc.signal == "SIGABRT"
    assert "Fatal Python error: Aborted" in proc.messages
    waiter, main = proc.threads
    assert main.current and not waiter.current
    assert funcs(main) == ["do_abort", "<module>"]
    assert main.frames[0].line == 33
    assert funcs(waiter)[:3] == ["wait", "wait", "wait_forever"]


def test_faulthandler_sigusr1():
    proc = only("faulthandler_usr1.txt")
    assert [t.current for t in proc.threads] == [False, True]
    assert funcs(proc.threads[1]) == ["do_usr1", "<module>"]


def test_traceback_chained():
    proc = only("traceback_chained.txt")
    first, second, last = proc.threads
    assert funcs(first) == ["load_config", "configure"]
    assert funcs(second) == ["parse_step", "configure", "do_chained"]
    assert funcs(last) == ["do_chained", "<module>"]
    assert (last.frames[0].file, last.frames[0].line) == (FIX + "txt_pyerrors.py", 64)
    assert "chained: during handling of it, the next was raised" in first.notes
    assert "chained: it was the direct cause of the next" in second.notes
    assert proc.messages == [
        "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/config.yaml'",
        "ValueError: invalid literal for int() with base 10: 'ten'",
        "RuntimeError: could not configure the trainer",
    ]


def test_traceback_in_thread_with_313_carets():
    proc = only("traceback_thread.txt")
    worker, main = proc.threads
    assert worker.name == "rendezvous"
    assert funcs(worker) == ["worker_fails", "run", "_bootstrap_inner"]
    assert funcs(main) == ["do_workers", "<module>"]
    assert "ConnectionError: store->get('0') got error: Socket Timeout" in proc.messages
    assert "SystemError: main gave up after the worker died" in proc.messages


def test_rank_prefixes_make_processes():
    snap = parse("ranks_prefixed.txt")
    assert [p.label for p in snap.processes] == ["rank0", "rank1"]
    r0, r1 = snap.processes
    assert r0.threads[0].name == "rendezvous"
    assert "ConnectionError: store->get('0') got error: Socket Timeout" in r0.messages
    assert funcs(r1.threads[1]) == ["do_usr1", "<module>"]


def test_traceback_inside_a_log_around_another_dump():
    text = (DATA / "faulthandler_usr1.txt").read_text() + "\n" + (DATA / "traceback_chained.txt").read_text()
    (proc,) = parse_text(text).processes
    assert "parsed as faulthandler dump" in proc.notes
    assert len(proc.threads) == 2 + 3
    assert "RuntimeError: could not configure the trainer" in proc.messages


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("gdb_mutex_hang_bt.txt", "gdb"), ("pybt_all.txt", "pybt"), ("pyspy_dump.txt", "pyspy"),
        ("pyspy_dump.json", "pyspy-json"), ("pystack_core.txt", "pystack"),
        ("faulthandler_abort.txt", "faulthandler"), ("traceback_chained.txt", "traceback"),
    ],
)
def test_detection_picks_the_format(name, fmt):
    from hanganalyze.acquire.text import DESCRIPTIONS

    auto = parse(name)
    assert auto.processes[0].notes[-1] == "parsed as %s" % DESCRIPTIONS[fmt]
    forced = parse(name, fmt)
    assert [p.to_dict() for p in forced.processes] == [p.to_dict() for p in auto.processes]
    assert parse(name, "auto").to_dict() == auto.to_dict()


def test_forcing_the_wrong_format_says_so():
    with pytest.raises(InputError, match="no threads or frames in the text as pyspy"):
        parse("gdb_mutex_hang_bt.txt", "pyspy")
    # A traceback in the log lines is found whatever the forced format
    assert len(parse("traceback_chained.txt", "pyspy").processes[0].threads) == 3
    with pytest.raises(InputError, match="not valid JSON"):
        parse_text("[{\"frames\": [", "pyspy-json")


@pytest.mark.parametrize(
    "name, version",
    [
        ("pyspy_dump.txt", "3.11.7"), ("faulthandler_abort.txt", "3.12"), ("pystack_native_all.txt", "3.12"),
        ("pybt_all.txt", "3.11"), ("gdb_python_bt.txt", "3.11"), ("traceback_thread.txt", "3.13"),
        ("gdb_mutex_hang_bt.txt", None), ("traceback_chained.txt", None),
    ],
)
def test_python_version_from_the_dump_or_its_paths(name, version):
    proc = parse(name).processes[0]
    assert (proc.python.version if proc.python is not None else None) == version


def test_pyspy_locals_are_skipped():
    proc = only("pyspy_dump_locals.txt")
    assert proc.messages == []
    main = proc.threads[0]
    assert [f.function for f in main.frames] == ["Thread._wait_for_tstate_lock", "Thread.join", "main", "<module>"]


def test_exception_group_boxes():
    proc = only("traceback_group.txt")
    group, first, second = proc.threads
    assert funcs(group) == ["start_ranks", "<module>"]
    assert funcs(first) == funcs(second) == ["parse_step", "start_ranks"]
    assert proc.messages == [
        "ExceptionGroup: 2 ranks failed to start (2 sub-exceptions)",
        "ValueError: invalid literal for int() with base 10: 'rank1'",
        "ValueError: invalid literal for int() with base 10: 'rank3'",
    ]


def test_pybt_cut_above_its_header_is_still_pybt():
    """A py-bt paste that starts below 'Traceback (most recent call first):' (18F/domain-scan#157):
    its '<built-in ... at remote 0x..>' lines are py-bt's, so it is read innermost first, not as a
    traceback read the other way round."""
    text = ("<built-in method flush of _io.BufferedWriter object at remote 0x7f8c7a209bb8>\n"
            '  File "/usr/lib/python3.6/multiprocessing/process.py", line 269, in _bootstrap\n'
            "    sys.stderr.flush()\n"
            '  File "/usr/lib/python3.6/multiprocessing/popen_fork.py", line 74, in _launch\n'
            "    code = process_obj._bootstrap()\n")
    snap = parse_text(text)
    assert "parsed as gdb py-bt" in snap.processes[0].notes
    assert funcs(snap.processes[0].threads[0]) == ["flush", "_bootstrap", "_launch"]
    # the same frames without the built-in line: a (headerless) traceback, as before
    plain = parse_text(text.split("\n", 1)[1])
    assert "parsed as gdb py-bt" not in plain.processes[0].notes
