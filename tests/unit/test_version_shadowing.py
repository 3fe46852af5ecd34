"""An embedded library version is shown only where no mapped library gives that library's version
(issue 21.6): a PyTorch 2.11 cu130 rank maps libnccl.so.2 2.28.9 while libtorch_cuda.so carries
the string of the NCCL 2.27.0 it was built against.  Real libraries of a real GPU capture."""

from __future__ import annotations

import json
from pathlib import Path

from hanganalyze.libversions import drop_shadowed, static_path
from hanganalyze.render.view import key_libraries
from hanganalyze_gdbext.model import Library, Process

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "gpu_job" / "straggler.job.json"


def _rank(nccl_version: str) -> Process:
    proc = Process.from_dict(json.loads(CAPTURE.read_text())["processes"][0])
    torch_cuda = next(lib.path for lib in proc.libraries if lib.path.endswith("/libtorch_cuda.so"))
    for lib in proc.libraries:
        if lib.path.endswith("/libnccl.so.2"):
            lib.version = nccl_version  # what add_embedded_versions reads from the file itself
    proc.libraries.append(Library(path=static_path(torch_cuda, "libnccl.so"), version="2.27.0"))
    return proc


def _nccl_lines(proc: Process):
    return [(name, v) for name, v in key_libraries(proc) if name.startswith("libnccl")]


def test_mapped_version_hides_the_embedded_one():
    proc = _rank("2.28.9")
    assert _nccl_lines(proc) == [("libnccl.so.2", "2.28.9")]  # and no "libnccl.so 2.27.0 (static)"
    n = len(proc.libraries)
    drop_shadowed(proc.libraries)
    assert len(proc.libraries) == n - 1
    assert not any("(static " in lib.path for lib in proc.libraries)
    assert any(lib.path.endswith("/libnccl.so.2") and lib.version == "2.28.9" for lib in proc.libraries)


def test_embedded_version_shown_with_where_when_the_mapped_one_is_unknown():
    proc = _rank("2")  # the soname's ABI number only, as in the capture
    lines = _nccl_lines(proc)
    assert ("libnccl.so", "2.27.0 (static) in libtorch_cuda.so") in lines, lines
    assert len(drop_shadowed(list(proc.libraries))) == len(proc.libraries)


def test_capture_as_recorded_is_unchanged():
    proc = Process.from_dict(json.loads(CAPTURE.read_text())["processes"][0])
    before = [(lib.path, lib.version) for lib in proc.libraries]
    assert [(lib.path, lib.version) for lib in drop_shadowed(proc.libraries)] == before
