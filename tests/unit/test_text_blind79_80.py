"""Fixes made for open rounds 79 and 80 (manifest-blind79/80.yaml), each on the round's real paste and a
near miss: a stack copied from a table (Module | Function | Offset); a service's own record that it
waits for one of its threads to stop; glog's fatal record without its date; zsh's job line and a
``python -c 'import ...'`` before an illegal instruction; BrokenProcessPool raised by the pool's own
source line in an IPython traceback (whose arrow line is the frame's source); a bad access inside
the garbage collector's walk; Windows' names of the fatal exceptions as a crash line; .NET's line for
an exception nothing caught (a .NET host embedding Python through pythonnet)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def conf(snap, sig: str) -> float:
    return max((f.confidence for f in snap.findings if f.signature == sig), default=0.0)


def test_a_stack_copied_from_a_table_is_read(db):
    snap = parse_text(real_text("pywin32/pywin32-1697-1.txt"))
    frames = snap.processes[0].threads[0].frames
    assert [f.function for f in frames[:3]] == ["PyDict_SetItem", "PyCom_IsGatewayRegistered",
                                                 "PyCom_RegisterExtensionSupport"]
    assert frames[0].library == "python38.dll" and frames[3].function is None
    assert all(f.address is None for f in frames)  # offsets within a module are no addresses
    # near miss: a Markdown table of another kind (a benchmark's results) holds no frame
    with pytest.raises(InputError):
        parse_text("model | batch | time\n-- | -- | --\nresnet | 32 | 0x1F\nvit | 16 | 0x2A\n")


def test_a_services_record_that_it_waits_for_its_thread(db):
    text = real_text("celery/celery-593-1.txt")
    assert text_verdict(text, db)[1] == "join"
    # near miss: the same words as prose (no record's timestamp) are no evidence: refused
    with pytest.raises(InputError):
        parse_text("I think it is waiting for the broadcast thread to shutdown, then nothing happens\n")


def test_glogs_dateless_fatal_record_is_a_crash(db):
    text = real_text("jax/jax-7247-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same record at the info level
    near = text.replace("F external/", "I external/", 1)
    try:
        assert text_verdict(near, db)[1] != "crashed"
    except InputError:
        pass


@pytest.mark.parametrize("name", ["tensorflow/tensorflow-44701-1.txt", "tensorflow/tensorflow-19584-1.txt"])
def test_an_illegal_instruction_after_an_import_in_zsh_or_python_c(db, name):
    snap, wait = text_verdict(real_text(name), db)
    assert conf(snap, "cpu-instruction-set-unsupported") >= 0.8 and wait == "crashed"


def test_zsh_job_line_of_another_signal_is_not_the_cpu(db):
    near = real_text("tensorflow/tensorflow-44701-1.txt").replace("illegal hardware instruction", "segmentation fault")
    assert "cpu-instruction-set-unsupported" not in sigs(text_verdict(near, db)[0])


def test_broken_process_pool_raised_by_its_source_line(db):
    text = real_text("pytorch-lightning/pytorch-lightning-17211-1.txt")
    snap = parse_text(text)
    assert snap.processes[0].threads[0].frames[0].source == "raise BrokenProcessPool(self._broken)"
    assert "process-pool-worker-died" in sigs(text_verdict(text, db)[0])
    # near miss: the pool's other refusal on that path (shut down, not broken)
    near = text.replace("--> 707                 raise BrokenProcessPool(self._broken)",
                        "    707                 raise BrokenProcessPool(self._broken)").replace(
        "    709                 raise RuntimeError('cannot schedule new futures after shutdown')",
        "--> 709                 raise RuntimeError('cannot schedule new futures after shutdown')")
    assert near != text and "process-pool-worker-died" not in sigs(text_verdict(near, db)[0])


def test_a_bad_access_in_the_collectors_walk_is_a_refcount_lead(db):
    text = real_text("cbor2/cbor2-91-1.txt")
    snap, wait = text_verdict(text, db)
    assert 0 < conf(snap, "extension-refcount-error") < 0.8 and wait == "crashed"
    # near miss: valgrind's report of a leak, no invalid access, under the same frames
    near = text.replace("Invalid read of size 8", "16 bytes in 1 blocks are definitely lost")
    assert "extension-refcount-error" not in sigs(text_verdict(near, db)[0])


def test_windows_names_of_fatal_exceptions_are_a_crash_line(db):
    line = [x for x in real_text("jep/jep-140-1.txt").splitlines() if "EXCEPTION_ACCESS_VIOLATION" in x][0]
    # the JVM's line alone, its hexadecimal code dropped (the name is the evidence): a crash
    assert text_verdict(line.replace(" (0xc0000005)", "") + "\n", db)[1] == "crashed"
    # near miss: a debugger's first-chance report of the same exception (a handler may take it)
    with pytest.raises(InputError):
        parse_text("(1a2c.3f00): EXCEPTION_ACCESS_VIOLATION - first chance exception at 0x00007ffb12345678\n")


#: https://github.com/henon/Python.Included/issues/38 (the description: pythonnet's shutdown under load)
NET_FATAL = """Fatal error. System.AccessViolationException: Attempted to read or write protected memory. \
This is often an indication that other memory is corrupt.
Repeat 2 times:
--------------------------------
   at Python.Runtime.Runtime.PyObject_HasAttrString(IntPtr, System.String)
--------------------------------
   at Python.Runtime.Exceptions.Shutdown()
   at Python.Runtime.Runtime.Shutdown()
   at Python.Runtime.PythonEngine.ExecuteShutdownHandlers()
   at Python.Runtime.PythonEngine.Shutdown()
   at Validation.PandasTA.Finalize()
"""
#: https://github.com/QuantConnect/Lean/issues/1031 (a comment, 2017-07-26: a back test under pythonnet)
NET_UNHANDLED = """Unhandled Exception: System.AccessViolationException: Attempted to read or write protected memory. \
This is often an indication that other memory is corrupt.
   at Python.Runtime.Runtime.PyType_GenericAlloc(IntPtr type, Int32 n)
   at Python.Runtime.ExtensionType..ctor()
   at Python.Runtime.MethodBinding..ctor(MethodObject m, IntPtr target, IntPtr targetType)
   at Python.Runtime.MethodObject.tp_descr_get(IntPtr ds, IntPtr ob, IntPtr tp)
   at Python.Runtime.Runtime.PyObject_GetAttrString(IntPtr pointer, String name)
"""


@pytest.mark.parametrize("text", [NET_FATAL, NET_UNHANDLED])
def test_dotnets_line_for_an_uncaught_exception_is_a_crash(db, text):
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same exception caught and logged by the host (its message, no runtime line)
    caught = text.replace("Fatal error. ", "Caught: ").replace("Unhandled Exception: ", "Caught: ")
    assert text_verdict(caught, db)[1] != "crashed"
