"""Fixes from open dev rounds 47 and 49 (manifest-blind47.yaml, manifest-blind49.yaml), each on the
round's real paste and a near miss: strace's loop around a lock call that keeps failing; the Open Build
Service's elapsed-seconds prefix; spindump's sample range after a frame's address; a macOS crash report's
exception and termination lines; a raylet that could not register a worker."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_strace_loop_around_a_failing_lock_call_polls_a_lock_file(db):
    text = real_text("filelock/filelock-67-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "file-lock" and "stale-file-lock" in sigs(snap)
    # near miss: the same loop whose lock call succeeds is no lock wait
    taken = text.replace("= -1 ENOSYS (Function not implemented)", "= 0")
    snap, wait = text_verdict(taken, db)
    assert wait != "file-lock" and "stale-file-lock" not in sigs(snap)


def test_the_build_services_elapsed_prefix_is_taken_off(db):
    text = real_text("distributed/distributed-4564-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.name == "IO loop" and t.frames[0].function == "run_loop"
    # near miss: a bracket with no seconds' unit is no such prefix (the text stays unread)
    with pytest.raises(InputError):
        parse_text(text.replace("s] ", "] "))


def test_spindumps_sample_range_after_the_address(db):
    text = real_text("nicotine-plus/nicotine-plus-2154-1.txt")
    assert text_verdict(text, db)[1] == "condition"
    # near miss: a row with words after its address is no frame row (only a sample range may follow)
    with pytest.raises(InputError):
        parse_text(text.replace("] 1-45", "] samples 1-45"))


def test_a_macos_crash_reports_exception_and_termination_lines(db):
    text = real_text("jarvis/jarvis-499-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a resource report's exception type (a CPU or wakeups limit) kills nothing
    calm = text.replace("Exception Type: EXC_BREAKPOINT", "Exception Type: EXC_RESOURCE").replace(
        "Termination: SIGNAL / SIGTRAP (Trace/BPT trap: 5)", "Action taken: none")
    with pytest.raises(InputError):
        parse_text(calm)


def test_a_raylet_that_could_not_register_a_worker_leaves_its_tasks_pending(db):
    text = real_text("ray/ray-28071-1.txt")
    assert text_verdict(text, db)[1] == "future"
    # near miss: a worker that registered is no wait
    with pytest.raises(InputError):
        parse_text(text.replace("Failed to register worker", "Registered worker"))


def test_a_traceback_file_line_the_terminals_width_long_keeps_its_source_apart(db):
    text = real_text("pytorch-chatbot/pytorch-chatbot-2-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].function == "__init__" and t.frames[0].source == "w.start()"
    # an unindented piece under it that is no statement is the rest of the cut line: joined as before
    # (a statement there, "w.start()", is its source flush left: joined, the function would be no name)
    piece = text.replace("line 719, in __init__\n    w.start()", "line 719, in __in\nit__\n    w.start()")
    assert piece != text and parse_text(piece).processes[0].threads[0].frames[0].function == "__init__"
    flush = text.replace("line 719, in __init__\n    w.start()", "line 719, in __init__\nw.start()")
    f0 = parse_text(flush).processes[0].threads[0].frames[0]
    assert (f0.function, f0.source) == ("__init__", "w.start()")


def test_a_spawned_child_rerunning_the_main_script_reaches_a_process_start(db):
    text = real_text("pytorch-chatbot/pytorch-chatbot-2-1.txt")
    snap, _wait = text_verdict(text, db)
    f = next(f for f in snap.findings if f.signature == "spawn-main-module-not-guarded")
    assert f.confidence < 0.8
    # near miss: the main script's top level iterating a loader without workers starts no process
    calm = text.replace("    return _MultiProcessingDataLoaderIter(self)",
                        "    return _SingleProcessDataLoaderIter(self)")
    calm = calm.replace("    w.start()", "    self._sampler_iter = iter(self._index_sampler)")
    assert "spawn-main-module-not-guarded" not in sigs(text_verdict(calm, db)[0])


def test_a_launchers_summary_of_a_rank_that_exited_with_its_own_error(db):
    text = real_text("unsloth/unsloth-4-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a summary of a rank that exited 0 (the launcher's own error after it) names no crash
    assert not crash_said(text.replace("exitcode  : 1 (pid", "exitcode  : 0 (pid"), db)
