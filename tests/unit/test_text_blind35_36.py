"""Fixes made right after sealed rounds 35 and 36 were scored and opened (sealed-blind35-36.score.md: they
do not count in that score), each on the round's real paste and a near miss: a paster's ``...`` between a
traceback's frames; a stack dumper quoting its paths with ``'``; Tribler's watchdog dump; Python 2's
``error: can't start new thread``; JAX's coordination agent failing to reach its service; a known error
on a stack ended the process; glibc's heap consolidation check; the import system's module lock; CPython's exit
join of non-daemon threads (wait_for_thread_shutdown); AIX dbx's where; a device command queue's finish;
ptyprocess's spawn waiting for its child's exec."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def frames_of(text):
    return [(f.function, f.line) for p in parse_text(text).processes for t in p.threads for f in t.frames]


def test_a_pasters_ellipsis_between_frames_is_no_exception_line(db):
    text = real_text("pexpect/pexpect-390-1.txt")
    assert frames_of(text) == [("read_nonblocking", 144)]
    assert text_verdict(text, db)[1] == "io"
    # near miss: a real exception line after the frame still ends the traceback as one
    raised = text.replace("KeyboardInterrupt", "OSError: [Errno 5] Input/output error")
    assert text_verdict(raised, db)[1] != "io"


def test_a_stack_dumper_quoting_its_paths_with_single_quotes(db):
    text = real_text("crochet/crochet-25-1.txt")
    assert frames_of(text)[0] == ("__del__", 683) and len(frames_of(text)) == 6
    # near miss: the same rows with mismatched quotes are no frame (refused: no frame, no known line)
    with pytest.raises(InputError):
        parse_text(text.replace("File: '", "File: \"").replace("', line", "`, line"))


def test_tribers_watchdog_dump_rows_innermost_first(db):
    text = real_text("tribler/tribler-2022-1.txt")
    threads = parse_text(text).processes[0].threads
    assert threads[0].name == "WatchDog" and threads[0].frames[0].function == "print_all_stacks"
    assert [f.function for f in threads[1].frames][:2] == ["wait", "get"]
    assert text_verdict(text, db)[1] == "condition"
    # near miss: the rows without their ThreadID headers or a .py path are no stack dump
    with pytest.raises(InputError):
        parse_text("".join(x.replace(".py:", ".txt:") + "\n" for x in text.splitlines() if "ThreadID" not in x))


def test_python2s_thread_error_is_the_thread_limit(db):
    text = real_text("speedtest-cli/speedtest-cli-197-1.txt")
    assert "thread-limit-reached" in sigs(text_verdict(text, db)[0])
    # near miss: another error of the same module is not
    assert "thread-limit-reached" not in sigs(text_verdict(text.replace("can't start new thread",
                                                                        "can't join thread"), db)[0])


def test_jaxs_coordination_agent_failing_to_reach_its_service_ends_the_task(db):
    text = real_text("marin/marin-7650-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: gRPC's failure to connect alone is the network wait of the caller
    only = "".join(x + "\n" for x in text.splitlines() if "WatchTasksAsync" not in x)
    assert text_verdict(only, db)[1] == "network"


def test_a_known_error_on_a_stack_ended_the_process(db):
    """A known bug of severity error (the thread limit) matched a traceback's process: the thread that
    raised it crashed, as a known crash's would."""
    text = real_text("django-bgremoverml/django-bgremoverml-25-1.txt")
    snap, wait = text_verdict(text, db)
    assert "thread-limit-reached" in sigs(snap) and wait == "crashed"
    # near miss: the same traceback raising no known error is read by its frames
    assert not crash_said(text.replace("can't start new thread", "bad request"), db)


def test_glibcs_heap_consolidation_check_is_a_crash_line(db):
    text = real_text("mlx/mlx-pr2329-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same frames without glibc's line say no crash
    assert text_verdict(text.replace("malloc_consolidate(): invalid chunk size", ""), db)[1] != "crashed"


def test_a_thread_in_the_import_systems_module_lock_waits_for_a_lock(db):
    text = real_text("holidays/holidays-1514-1.txt")
    assert text_verdict(text, db)[1] == "lock"
    # near miss: the import machinery loading a module (no module lock) is no lock wait
    assert text_verdict(text.replace("_get_module_lock", "_load_unlocked").replace("__enter__", "exec_module"),
                        db)[1] != "lock"


def test_cpythons_exit_join_of_non_daemon_threads_is_a_join(db):
    text = real_text("cupynumeric/cupynumeric-187-1.txt")
    assert text_verdict(text, db)[1] == "join"
    # near miss: the interpreter's finalization past that join (its GC) is no join
    assert text_verdict(text.replace("wait_for_thread_shutdown", "finalize_modules"), db)[1] != "join"


def test_aix_dbx_where_is_read_and_its_abort_is_a_crash(db):
    text = real_text("pyzmq/pyzmq-2128-1.txt")
    (t,) = parse_text(text).processes[0].threads
    names = [f.function for f in t.frames]
    assert names[:4] == ["pthread_kill", "_p_raise", "raise", "abort"]
    assert names.count("zmq::socket_base_t::getsockopt(int, void*, unsigned long*)") == 1  # its blocks: one call
    assert t.frames[4].file == "err.cpp" and t.frames[4].line == 61
    snap, wait = text_verdict(text, db)
    assert wait == "crashed" and "zmq::zmq_abort" in snap.findings[0].summary
    # near miss: two such lines in prose are no stack (refused: no frame, no known line)
    with pytest.raises(InputError):
        parse_text("I saw foo(bar) at 0x1234 and then baz(qux) at 0x5678 in the log\n")


def test_a_device_command_queues_finish_is_the_hosts_wait_for_the_device(db):
    text = real_text("tt-metal/tt-metal-6495-1.txt")
    assert text_verdict(text, db)[1] == "gpu"  # a lone bt stopped there: a poll, not a fault
    # near miss: the same lone stop in the queue's own code that is no wait reads as before (a crash)
    assert text_verdict(text.replace("HWCommandQueue::finish", "HWCommandQueue::enqueue_program"), db)[1] == "crashed"


def test_ptyprocess_spawn_reading_its_exec_error_pipe_waits_for_the_child(db):
    text = real_text("bpython/bpython-708-1.txt")
    assert text_verdict(text, db)[1] == "child"
    # near miss: a read of another pipe in the program's own function is I/O
    other = text.replace('ptyprocess.py", line 302, in spawn', 'ptyprocess.py", line 302, in read_output')
    assert text_verdict(other, db)[1] == "io"
