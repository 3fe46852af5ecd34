"""Fixes from open development rounds 105/106 (manifest-blind105/106.yaml), each on the round's real
paste and a near miss: Qt 6's QThread abort line, strace lines under grep -n's numbers with -r's
relative time, JUCE's per-thread backtrace, a profiler's table refused as one, faulthandler's SIGILL
while an extension module loads, "invalid device function" told with less confidence, and gdb's stop
line of the thread a signal hit when the paste leaves that thread's frames out."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def found(snap):
    return {f.signature: f.confidence for f in snap.findings}


def test_qt6s_qthread_line_names_the_thread(db):
    text = real_text("blender-launcher-v2/blender-launcher-v2-454-1.txt")
    assert "qt-qthread-destroyed-while-running" in found(text_verdict(text, db)[0])
    with pytest.raises(InputError):  # near miss: QThread's other words are no abort
        parse_text("QThread: Destroyed while thread '' is waiting\n")


def test_strace_under_line_numbers_with_relative_times(db):
    text = real_text("cpython/cpython-112788-1.txt")
    threads = parse_text(text).processes[0].threads
    assert any(t.frames and t.frames[0].function == "futex" for t in threads)
    # near miss: the same numbers before words that are no system call
    with pytest.raises(InputError):
        parse_text("553976: the build started\n553978: the build is still running\n553979: waiting\n")


def test_juce_backtrace_threads():
    procs = parse_text(real_text("popsicle/popsicle-15-1.txt")).processes
    first = procs[0].threads[0]
    assert first.frames[0].function == "ZwWaitForSingleObject" and first.frames[0].library == "ntdll"
    assert any(f.function == "PyThread_acquire_lock_timed" for f in first.frames)
    with pytest.raises(InputError):  # near miss: a banner over prose is no stack
        parse_text("================ Thread 5 ================\nit hangs here, see above\n")


def test_a_profilers_table_is_refused_as_one():
    with pytest.raises(InputError, match="profiler's table"):
        parse_text(real_text("guidellm/guidellm-431-1.txt"))
    # near miss: a table of percentages that is no profiler's (a GPU monitor's) gets the plain refusal
    with pytest.raises(InputError) as e:
        parse_text("GPU  Util   Mem\n0    100.00%   80.00%\n1    0.00%   80.00%\n2    0.00%   80.00%\n")
    assert "profiler's table" not in str(e.value)


def test_faulthandlers_sigill_while_an_extension_module_loads(db):
    text = real_text("spleeter/spleeter-539-1.txt")
    assert found(text_verdict(text, db)[0]).get("cpu-instruction-set-unsupported", 0) >= 0.8
    near = text.replace("Fatal Python error: Illegal instruction", "Fatal Python error: Segmentation fault")
    assert near != text and "cpu-instruction-set-unsupported" not in found(text_verdict(near, db)[0])


def test_invalid_device_function_is_the_missing_arch_most_often_not_always(db):
    conf = found(text_verdict(real_text("detectron/detectron-136-1.txt"), db)[0]).get("gpu-arch-not-in-build")
    assert conf is not None and conf < 0.8
    sure = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    assert found(text_verdict(sure, db)[0])["gpu-arch-not-in-build"] >= 0.8


def test_gdbs_stop_line_is_the_signalled_threads_frame_zero(db):
    text = real_text("freedv-gui/freedv-gui-814-1.txt")
    snap, wait = text_verdict(text, db)
    proc = snap.processes[0]
    crashed = next(t for t in proc.threads if t.current)
    assert crashed.frames[0].function == "new_threadstate"  # thread 1, not the GLib thread shown below
    assert "python-finalization-gil-reacquire" in found(snap) and wait == "crashed"
    # near miss: a thread state made for a live interpreter is no re-entry after finalization
    near = text.replace("interp=0x0,", "interp=0x5555555d1e40,")
    assert near != text and "python-finalization-gil-reacquire" not in found(text_verdict(near, db)[0])


def test_a_signal_line_naming_a_thread_the_paste_leaves_out_names_no_thread(db):
    text = "\n".join(x for x in real_text("freedv-gui/freedv-gui-814-1.txt").splitlines()
                     if not x.startswith(("new_threadstate", "1563")))
    snap, wait = text_verdict(text, db)
    tri = next(f for f in snap.findings if f.signature == "triage")
    assert wait == "crashed" and "does not show which thread crashed" in tri.summary
    assert not any(t.current for t in snap.processes[0].threads)  # not the GLib thread the paste shows
    # near miss: the signal line naming the thread shown blames that one
    shown = text.replace('Thread 1 "pt_main_thread" received signal', 'Thread 11 "FreeDV GUI" received signal')
    assert next(t for t in text_verdict(shown, db)[0].processes[0].threads if t.frames).current
