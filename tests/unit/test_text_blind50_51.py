"""Fixes made after sealed rounds 50/51 were scored and opened (manifest-blind50/51.yaml), each on the
round's real paste and a near miss: Visual Studio's mixed-mode Python frames; WinDbg's !analyze exception
code; a CI's "exit value 139"; a Rust thread pool that could not start its threads (EAGAIN); a DataLoader
worker whose descriptor sharing hit the open-file limit."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_visual_studios_python_frames(db):
    text = real_text("ptvsd/ptvsd-1788-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    f = frames[0]
    assert (f.kind, f.file, f.function, f.line) == ("python", "threading.py", "wait", 340)
    assert text_verdict(text, db)[1] == "condition"
    # near miss: a native module's row stays native
    native = parse_text("\tpython311.dll!take_gil(_ts * tstate) Line 331\tC\n"
                        "\tpython311.dll!PyEval_RestoreThread(_ts * tstate) Line 466\tC\n")
    assert native.processes[0].threads[0].frames[0].kind == "native"


def test_windbgs_exception_code(db):
    text = real_text("cpython/cpython-131795-1.txt")
    assert "ExceptionCode(c0000005)" in text
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a breakpoint's code (a debugger's own stop) is no crash line
    with pytest.raises(InputError):
        parse_text('DEBUG_FLR_EXCEPTION_CODE(80000003) and the ".exr -1" ExceptionCode(80000003) match\n')


def test_a_cis_exit_value_of_a_fault(db):
    text = real_text("datahub/datahub-18934-1.txt")
    assert "exit value 139" in text
    assert text_verdict(text, db)[1] == "crashed"
    with pytest.raises(InputError):
        parse_text(text.replace("exit value 139", "exit value 0"))


def test_a_rust_pool_that_could_not_start_its_threads(db):
    text = real_text("hllm/hllm-40-1.txt")
    assert "thread-limit-reached" in sigs(text_verdict(text, db)[0])
    # near miss: the same pool error for another OS error (no EAGAIN: not the task limit)
    near = text.replace("code: 11, kind: WouldBlock", "code: 22, kind: InvalidInput")
    assert "thread-limit-reached" not in sigs(text_verdict(near, db)[0])


def test_a_workers_descriptor_sharing_at_the_open_file_limit(db):
    text = real_text("ssd.pytorch/ssd.pytorch-91-1.txt")
    snap, wait = text_verdict(text, db)
    assert "torch-mp-fd-sharing-limit" in sigs(snap) and wait == "crashed"
    # near miss: the same frames raising another error (a closed socket, no limit)
    near = text.replace("OSError: [Errno 24] Too many open files", "OSError: [Errno 9] Bad file descriptor")
    assert "torch-mp-fd-sharing-limit" not in sigs(text_verdict(near, db)[0])


def test_a_stripped_librarys_top_over_a_null_page_return_address(db):
    text = real_text("onnxruntime/onnxruntime-18776-1.txt")
    assert "#1 0x0000000000000600 in ?? ()" in text
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the caller a real address of no known object (a JIT's code, say): no proof
    near = text.replace("#1 0x0000000000000600 in ?? ()", "#1 0x00007f4e5d8d0000 in ?? ()")
    near = near.replace("#2 0x0000000002c1e8a0 in ?? ()\n", "").replace("#3 0x0000000000000100 in ?? ()\n", "")
    assert text_verdict(near, db)[1] != "crashed"
