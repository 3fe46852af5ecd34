"""Fixes from open dev round 43 (manifest-blind43.yaml), each on the round's real paste and a near miss:
strace's attach line as releases before 4.12 print it; systemd-coredump's stack rows cut above their
thread's header; a thread parked in pause() while it takes the GIL at finalization (PyO3's HangThread,
CPython 3.14's park inlined); a lone thread waiting for CPython's thread-local key table lock in a
forked child."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_strace_attach_line_without_its_name_starts_each_process(db):
    text = real_text("pipenv/pipenv-303-1.txt")
    procs = parse_text(text).processes
    assert [t.tid for t in procs[0].threads] == [20069, 20076]
    assert text_verdict(text, db)[1] == "child"  # the first attached process: pipenv in wait4
    # near miss: prose that says a process attached is no attach line (both calls land on one thread)
    prose = text.replace("Process 20069 attached", "Process 20069 attached to it, as above").replace(
        "Process 20076 attached", "Process 20076 attached to it, as above")
    assert len(parse_text(prose).processes[0].threads) == 1


def test_systemd_coredump_rows_cut_above_their_header_are_a_crash_of_an_unnamed_thread(db):
    text = real_text("kikit/kikit-678-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    tri = next(f for f in snap.findings if f.signature == "triage")
    assert not tri.triage.about  # the chunk does not say which thread took the signal: none is named
    assert any("systemd-coredump stack rows cut" in n for n in snap.processes[0].notes)
    # near miss: gdb's own rows among them make it gdb's text, no core dump's
    row = "#20 0x00007ec9715a9cbb _ZN12wxEvtHandler18SafelyProcessEventER7wxEvent (libwx_baseu-3.2.so.0 + 0x1a9cbb)"
    gdb = text.replace(row, "#20 0x00007ec9715a9cbb in wxEvtHandler::SafelyProcessEvent(wxEvent&) () "
                            "from libwx_baseu-3.2.so.0")
    assert text_verdict(gdb, db)[1] != "crashed"


def test_a_thread_parked_in_pause_while_taking_the_gil(db):
    text = real_text("pyo3/pyo3-4874-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "gil"
    assert "python-finalization-gil-reacquire" in sigs(snap)
    # near miss: pause() with no GIL take under it is an idle thread, no finalization park
    idle = text.replace("pyo3_ffi::pystate::PyGILState_Ensure", "my_crate::wait_for_signal").replace(
        "pyo3::gil::GILGuard::acquire_unchecked", "my_crate::park").replace(
        "pyo3::gil::GILGuard::acquire", "my_crate::run")
    snap, wait = text_verdict(idle, db)
    assert "python-finalization-gil-reacquire" not in sigs(snap) and wait != "gil"


def test_a_lone_thread_waiting_for_the_tls_key_table_lock_is_a_fork_child(db):
    text = real_text("mitogen/mitogen-535-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "lock"
    f = next(f for f in snap.findings if f.signature == "fork-child-inherited-lock")
    assert f.confidence < 0.8
    # near miss: the same Python lock wait outside the key table (a program's own lock) is no fork evidence
    own = text.replace("find_key (key=1, value=0x0) at Python/thread.c:242",
                       "lock_PyThread_acquire_lock (self=0x7f) at Modules/threadmodule.c:50")
    assert "fork-child-inherited-lock" not in sigs(text_verdict(own, db)[0])


def test_a_visual_studio_stack_whose_tabs_became_spaces(db):
    text = real_text("pyfa/pyfa-951-1.txt")
    spaced = text.expandtabs(4)
    assert "\t" not in spaced and text_verdict(spaced, db)[1] == text_verdict(text, db)[1] == "crashed"
    t = parse_text(spaced).processes[0].threads[0]
    assert t.frames[0].function == "wxEvtHandler::SearchDynamicEventTable" and t.frames[0].line == 1746
    # near miss: a module!function pair in a sentence, with no language column, is no Visual Studio row
    prose = "I think wxbase30u_vc90.dll!wxEvtHandler::ProcessEvent is where it breaks, see the attached C\n"
    assert all(p.threads == [] or p.threads[0].frames[0].function != "wxEvtHandler::ProcessEvent"
               for p in _parse_or_none(prose))


def _parse_or_none(text):
    from hanganalyze.errors import InputError
    try:
        return parse_text(text).processes
    except InputError:
        return []
