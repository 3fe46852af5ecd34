"""Fixes from open development rounds 97/98 (manifest-blind97/98.yaml), each on the round's real paste
and a near miss: gdb frames whose number stands apart from its ``#``, a SIGILL in a kernel object
built for an instruction set or in a library's static initializers, hand-written Python rows with
``<module>`` rows, the writer's ``...`` elision and a typeset ``←`` note."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_gdb_frames_whose_number_stands_apart_from_the_hash(db):
    text = real_text("weboot/weboot-115-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames[:2]] == ["sem_wait", "PyThread_acquire_lock"]
    assert text_verdict(text, db)[1] == "lock"  # not "crashed" (a frame misread as a function named "#  1 ...")
    # near miss: a Markdown heading "# 1 Setup" is no frame
    assert parse_text("# 1 Setup\n" + text).processes[0].threads[0].frames[0].function == "sem_wait"


def test_sigill_in_a_kernel_object_built_for_an_instruction_set(db):
    text = real_text("pytorch/pytorch-37577-1.txt")
    assert "cpu-instruction-set-unsupported" in sigs(text_verdict(text, db)[0])
    # near miss: the same stop in an object built for no instruction set says nothing of the CPU
    near = text.replace("BinaryOpsKernel.cpp.AVX2.cpp", "BinaryOpsKernel.cpp")
    assert near != text and "cpu-instruction-set-unsupported" not in sigs(text_verdict(near, db)[0])


def test_sigill_while_a_library_runs_its_static_initializers(db):
    text = real_text("pytorch/pytorch-32724-1.txt")
    found = [f for f in text_verdict(text, db)[0].findings if f.signature == "cpu-instruction-set-unsupported"]
    assert found and found[0].confidence >= 0.8
    # near miss: the same stack stopped on SIGSEGV is a fault, no instruction set
    near = text.replace("SIGILL, Illegal instruction", "SIGSEGV, Segmentation fault")
    assert near != text and "cpu-instruction-set-unsupported" not in sigs(text_verdict(near, db)[0])


def test_hand_written_python_rows_with_module_rows_an_elision_and_a_typeset_note(db):
    text = real_text("cortex/cortex-92-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert frames[0].function == "wait" and frames[0].file == "threading.py"
    assert any(f.function == "<module>" and f.file.endswith("validation.py") for f in frames)
    assert text_verdict(text, db)[1] == "condition"


def test_a_gdb_frame_with_no_name_between_in_and_its_parentheses(db):
    """``#0  0x7f.. in  () at /lib/libgtk-4.so.1``: no name, not one named "0x7f.. in" (which no
    symbol is, and which a lone stop would take for the program's own code)."""
    text = real_text("sealed82/gaphor-2088-1.txt")
    f0 = parse_text(text).processes[0].threads[0].frames[0]
    assert f0.function is None and f0.address == 0x00007F1F01C8DA6E and f0.library.endswith("libgtk-4.so.1")
    assert text_verdict(text, db)[1] == "crashed"  # a lone stop in an unnamed library frame: the fault


def test_a_frame_line_taken_whole_for_a_name_is_no_evidence_of_a_crash(db):
    from hanganalyze.analyze.lonestop import lone_stop
    from hanganalyze_gdbext.model import Frame, Process, Thread

    proc = Process(source="text", notes=["parsed as gdb backtrace"])
    named = Thread(current=True, frames=[Frame(kind="native", function="app_compute", file="app.c", line=3)])
    whole = Thread(current=True, frames=[Frame(kind="native", function="#  1  0x00007ffff7b0d77b in f", file="a.c")])
    assert lone_stop(proc, named, [named])
    assert not lone_stop(proc, whole, [whole])


def test_a_crash_reporters_header_over_its_stack(db):
    text = real_text("dd-trace-py/dd-trace-py-16332-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same frames without the reporter's header are where the thread ran
    near = text.replace("Stack Trace (Datadog Crashtracker 1.0)", "")
    assert near != text and text_verdict(near, db)[1] != "crashed"
