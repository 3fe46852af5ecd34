"""Fixes from open dev rounds 56-58 (manifest-blind56/57/58.yaml), each on the round's real paste and a near
miss: faulthandler's current thread shown with no frame; a console's copy padded to its width; vLLM's
engine waiting for its workers' answers by its stack; a device-side assertion in a header (not a .cu
file); a program's own SEGMENTATION FAULT banner; better_exchook's traceback; mpirun's rank killed by
signal 9; TensorFlow's coordinator and CPython's regrtest lines; QGIS's crash report; an NCCL RAS status
with the job's log under it."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire import ncclras
from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return {f.signature: f.confidence for f in snap.findings}


def test_faulthandlers_current_thread_with_no_frame(db):
    text = real_text("pytorch/pytorch-145441-1.txt")
    assert text.rstrip().endswith("(most recent call first):")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a dump_traceback_later's dump (no fatal error) over the same threads
    near = text.replace("Fatal Python error: Segmentation fault", "Timeout (0:05:00)!")
    assert text_verdict(near, db)[1] != "crashed"


def test_lines_padded_to_the_consoles_width(db):
    text = real_text("pytorch/pytorch-170863-1.txt")
    assert text.splitlines()[0].endswith("     ")
    assert len(parse_text(text).processes[0].threads[0].frames) == 3
    assert text_verdict(text, db)[1] == "crashed"


@pytest.mark.parametrize("path", ["vllm-ascend/vllm-ascend-2264-1.txt", "vllm/vllm-19668-1.txt"])
def test_vllms_engine_waiting_for_its_workers_by_its_stack(db, path):
    assert "vllm-shm-broadcast-reader-stuck" in sigs(text_verdict(real_text(path), db)[0])


def test_an_idle_workers_read_of_the_next_step_is_no_stuck_engine(db):
    text = ("Thread 0x7F (idle): \"MainThread\"\n"
            "    acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:698)\n"
            "    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:779)\n"
            "    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:590)\n")
    assert "vllm-shm-broadcast-reader-stuck" not in sigs(text_verdict(text, db)[0])


def test_a_device_side_assertion_in_a_header(db):
    text = real_text("mscclpp/mscclpp-682-1.txt")
    assert "allreduce.hpp:679" in text
    snap, wait = text_verdict(text, db)
    assert "cuda-device-side-assert" in sigs(snap) and wait == "crashed"
    # near miss: a host's assert() names no block and thread
    with pytest.raises(InputError):
        parse_text("allreduce.hpp:679: void f(): Assertion sizePer is fine\n")


def test_a_programs_own_segmentation_fault_banner(db):
    text = real_text("mantid/mantid-22241-1.txt")
    assert "********* SEGMENTATION FAULT *********" in text
    assert text_verdict(text, db)[1] == "crashed"
    near = text.replace("********* SEGMENTATION FAULT *********", "no segmentation fault here")
    assert text_verdict(near, db)[1] != "crashed"


def test_better_exchooks_traceback(db):
    text = real_text("sisyphus/sisyphus-164-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames] == ["SISGraph.for_all_nodes.<locals>.runner_helper",
                                            "default_handle_exception_interrupt_main_thread.<locals>.wrapped_func"]
    # near miss: an exception's name under a frame is no piece of its function's name
    t = parse_text('Traceback (most recent call last):\n  File "x.py", line 3, in f\nKeyboardInterrupt\n')
    assert t.processes[0].threads[0].frames[0].function == "f"


def test_mpiruns_rank_killed_by_signal_9(db):
    text = real_text("tensorrt-llm/tensorrt-llm-1700-1.txt")
    assert "rank-killed-sigkill" in sigs(text_verdict(text, db)[0])
    near = text.replace("exited on signal 9 (Killed)", "exited on signal 11 (Segmentation fault)")
    assert "rank-killed-sigkill" not in sigs(text_verdict(near, db)[0])


@pytest.mark.parametrize("path,line", [
    ("tensorflow/tensorflow-20833-1.txt", "Coordinator stopped with threads still running: "),
    ("cpython/cpython-121719-1.txt", "running (1): test.test_concurrent_futures.test_deadlock (24 min 3 sec)"),
])
def test_lines_of_a_run_that_does_not_end(db, path, line):
    text = real_text(path)
    assert line in text
    assert any(f.signature == "triage" for f in text_verdict(text, db)[0].findings)
    # near miss: the same programs' lines of a run that ended
    with pytest.raises(InputError):
        parse_text("INFO:tensorflow:Coordinator stopped cleanly\n0:24:44 load avg: 0.80 [1/1] test_x passed\n")


def test_qgis_crash_report(db):
    text = real_text("qgis/qgis-62800-1.txt")
    snap, wait = text_verdict(text, db)
    t = snap.processes[0].threads[0]
    assert t.frames[0].function == "QgsPlotCanvas::mousePressEvent" and t.frames[-1].function == "RtlUserThreadStart"
    assert wait == "crashed"
    # near miss: three "word :" lines of prose are no report
    with pytest.raises(InputError):
        parse_text("Note :\nWarning :\nStatus :\n")


def test_ras_status_with_the_jobs_log_under_it(db):
    text = real_text("nccl/nccl-1730-1.txt")
    snap, wait = text_verdict(text, db)
    assert "pgnccl-collective-timeout" in sigs(snap) and wait == "collective"
    # near miss: the RAS status alone holds no process
    ras = text.split("[rank118]")[0]
    assert ncclras.ras_snapshot(ras, "x").processes == []


def test_a_ctrl_c_echo_glued_to_a_file_line_and_a_dask_future(db):
    text = real_text("distributed/distributed-801-1.txt")
    assert '^C  File "' in text
    frames = parse_text(text).processes[0].threads[0].frames
    assert any(f.function == "result" and f.file.endswith("distributed/client.py") for f in frames)
    assert text_verdict(text, db)[1] == "future"
    # near miss: without the client's result frame the Event's wait under sync is a condition
    near = "\n".join(x for x in text.splitlines() if "client.py" not in x and "result = sync(" not in x) + "\n"
    assert text_verdict(near, db)[1] == "condition"


def test_dasks_file_lines_carry_their_source():
    text = real_text("xgboost/xgboost-6649-1.txt")
    f = parse_text(text).processes[0].threads[0].frames[0]
    assert f.function == "apply_function" and f.source == "result = function(*args, **kwargs)"
    # near miss: ctypes' callback frame's name has blanks inside its quotes
    t = parse_text('Traceback (most recent call last):\n  File "_ctypes/callbacks.c", line 232, in '
                   "'calling callback function'\nRecursionError: maximum recursion depth exceeded\n")
    assert t.processes[0].threads[0].frames[0].function == "'calling callback function'"
