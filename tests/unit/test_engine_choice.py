"""``acquire/engine.py``: the one rule that picks the reader, and the request checked when made.

Real files only (the running Python as an executable that is here); no reader runs."""

from __future__ import annotations

import platform
import sys
from dataclasses import FrozenInstanceError

import pytest

from hanganalyze.acquire.engine import EngineRequest, choose
from hanganalyze.acquire.sysroot import GdbOptions
from hanganalyze.corefile import CoreInfo
from hanganalyze.errors import InputError

X86 = platform.machine() in ("x86_64", "AMD64")


def test_unknown_engine_is_refused_when_the_request_is_made():
    with pytest.raises(InputError, match=r"^--engine must be one of auto, direct, gdb \(got 'lldb'\)$"):
        EngineRequest(engine="lldb")


@pytest.mark.parametrize("options", [GdbOptions(sysroot="/tmp"), GdbOptions(solib_search_path=("/tmp",)),
                                     GdbOptions(debuginfod=True)])
def test_direct_with_gdb_settings_is_refused(options):
    with pytest.raises(InputError, match="are gdb's settings: use them without --engine direct"):
        EngineRequest(engine="direct", options=options)
    assert choose(EngineRequest(options=options)) == "gdb"  # auto: gdb's file search means gdb


def test_request_is_frozen():
    """Shared by the job pool's threads and by repeated samples: nobody changes it under them."""
    with pytest.raises(FrozenInstanceError):
        EngineRequest().engine = "gdb"  # type: ignore[misc]


def test_named_engine_is_taken_as_named():
    missing = CoreInfo(path="core", executable="/nonexistent/exe")
    assert choose(EngineRequest(engine="gdb")) == "gdb"
    assert choose(EngineRequest(engine="direct"), missing) == "direct"  # its error, not a silent gdb


def test_naming_a_debugger_selects_gdb():
    assert choose(EngineRequest(gdb="cuda-gdb")) == "gdb"


@pytest.mark.skipif(not X86, reason="auto picks gdb on other architectures")
def test_auto_reads_directly_unless_the_core_executable_is_missing(tmp_path):
    auto = EngineRequest()
    assert choose(auto) == "direct"
    here = CoreInfo(path="core", executable=sys.executable)
    assert choose(auto, here) == "direct"
    assert choose(auto, CoreInfo(path="core", executable=sys.executable + " (deleted)")) == "direct"
    gone = CoreInfo(path="core", executable=str(tmp_path / "gone"))
    assert choose(auto, gone) == "gdb"
    assert choose(auto, CoreInfo(path="core")) == "gdb"  # no executable named at all
    assert choose(auto, gone, exe=sys.executable) == "direct"  # --exe gives it
    assert choose(auto, here, exe=tmp_path / "gone") == "gdb"  # --exe names a file that is not there


@pytest.mark.skipif(not X86, reason="auto picks gdb on other architectures")
def test_truncated_core_goes_to_the_direct_reader():
    """The chosen routing (engine.py's docstring, docs/design.md): truncation alone keeps the
    direct reader, which needs no dynamic linker list from the missing end."""
    info = CoreInfo(path="core", executable=sys.executable, file_size=4096, expected_size=1 << 30)
    assert info.truncated
    assert choose(EngineRequest(), info) == "direct"
