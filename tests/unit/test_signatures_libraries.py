"""Classes the corpus kept meeting without a signature (its unlabelled entries' categories), each on
its real pastes (corpus dumps, by manifest path) and near misses: ZeroMQ's context termination
waiting for its sockets; a thread's C stack exhausted by recursion; a C exit handler calling into
Python after the interpreter finalized (python-finalization-gil-reacquire, widened); exit-time code
starting a thread that Python refuses at interpreter shutdown; a buffered stream re-entered by a
signal handler that logs; a C extension's reference count error; instructions this CPU lacks."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

#: Signatures this module tests with a real paste and a near miss (test_signature_coverage.py).
COVERED = ["zmq-context-term-waits-for-sockets", "stack-overflow-recursion", "thread-start-at-interpreter-shutdown",
           "stream-write-reentered", "extension-refcount-error",
           "cpu-instruction-set-unsupported"]

ZMQ = "zmq-context-term-waits-for-sockets"


def sigs(text: str, db) -> list:
    return [f.signature for f in text_verdict(text, db)[0].findings]


@pytest.mark.parametrize("name", ["libzmq/libzmq-3252-1.txt", "libzmq/libzmq-2586-1.txt",
                                  "jupyter_client/jupyter_client-771-1.txt"])
def test_a_zmq_context_termination_that_waits_is_named(db, name):
    assert ZMQ in sigs(real_text(name), db)


def test_zmq_near_misses(db):
    lldb = real_text("libzmq/libzmq-3252-1.txt")
    # the same wait under another libzmq call (a socket's blocking receive): no termination
    assert ZMQ not in sigs(lldb.replace("zmq::ctx_t::terminate()", "zmq::socket_base_t::recv(zmq::msg_t*, int)")
                           .replace("zmq_ctx_term", "zmq_msg_recv"), db)
    # a term() of another module (a terminal helper) is not pyzmq's
    py = real_text("jupyter_client/jupyter_client-771-1.txt")
    assert ZMQ not in sigs(py.replace("zmq/sugar/context.py", "myapp/terminal.py"), db)
    # pyzmq's term() deeper than the innermost frames: the thread waits elsewhere, not in term
    deeper = "\n".join(["Thread 0x7f01 (idle): \"MainThread\"",
                        "    wait (threading.py:320)", "    get (queue.py:171)", "    _flush (myapp/io.py:40)",
                        "    __del__ (myapp/io.py:12)", "    term (zmq/sugar/context.py:190)",
                        "    destroy (zmq/sugar/context.py:243)", "    main (app.py:9)"]) + "\n"
    assert ZMQ not in sigs(deeper, db)


OVERFLOW = "stack-overflow-recursion"


@pytest.mark.parametrize("name", ["cpython/cpython-148443-1.txt", "cpython/cpython-131543-1.txt",
                                  "cpython/cpython-113655-1.txt", "cpython/cpython-114797-1.txt",
                                  "langsrccurise/langsrccurise-43-1.txt"])
def test_an_exhausted_c_stack_is_named(db, name):
    snap, wait = text_verdict(real_text(name), db)
    assert OVERFLOW in [f.signature for f in snap.findings] and wait == "crashed"


def test_stack_overflow_near_misses(db):
    # the same Windows crash of another exception is no stack overflow
    win = real_text("cpython/cpython-113655-1.txt")
    assert OVERFLOW not in sigs(win.replace("stack overflow", "access violation"), db)
    # Python's own guard that held: a RecursionError raised (and printed) is no crash of the stack
    caught = ("Traceback (most recent call last):\n"
              '  File "/app/walk.py", line 4, in walk\n    return walk(node.parent)\n'
              '  File "/app/walk.py", line 4, in walk\n    return walk(node.parent)\n'
              "  [Previous line repeated 996 more times]\n"
              "RecursionError: maximum recursion depth exceeded\n")
    assert OVERFLOW not in sigs(caught, db)


FINAL = "python-finalization-gil-reacquire"


@pytest.mark.parametrize("name", ["artiq/artiq-445-1.txt", "gns3-gui/gns3-gui-475-1.txt", "torchy/torchy-13-1.txt"])
def test_an_exit_handler_calling_into_python_after_finalization(db, name):
    assert FINAL in sigs(real_text(name), db)


def test_exit_handler_near_misses(db):
    gdb = real_text("artiq/artiq-445-1.txt")
    # the interpreter's own clean-up (Py_FinalizeEx on the stack) destroying the object is not it
    assert FINAL not in sigs(gdb.replace("__run_exit_handlers", "Py_FinalizeEx"), db)
    # a library's exit handler that never calls into Python (CUDA's unregistering at exit)
    assert FINAL not in sigs(real_text("pytorch/pytorch-24983-1.txt"), db)
    # PyQt's hook under a QObject's destructor during the run (no exit handler below it)
    assert FINAL not in sigs(gdb.replace("__run_exit_handlers", "QCoreApplication::exec"), db)


SHUTDOWN = "thread-start-at-interpreter-shutdown"


@pytest.mark.parametrize("name", ["deno_vm/deno_vm-11-1.txt", "opentelemetry-python/opentelemetry-python-4752-1.txt",
                                  "pystack/pystack-158-1.txt"])
def test_a_thread_refused_at_interpreter_shutdown(db, name):
    snap, wait = text_verdict(real_text(name), db)
    assert SHUTDOWN in [f.signature for f in snap.findings] and wait == "crashed"


@pytest.mark.parametrize("line", [
    # an executor used after its own shutdown() (not the interpreter's): another mistake
    "RuntimeError: cannot schedule new futures after shutdown",
    # the thread limit (thread-limit-reached), not the shutdown
    "RuntimeError: can't start new thread",
])
def test_interpreter_shutdown_near_misses(db, line):
    text = real_text("pystack/pystack-158-1.txt").replace(
        "RuntimeError: can't create new thread at interpreter shutdown", line)
    assert SHUTDOWN not in sigs(text, db)


REENTERED = "stream-write-reentered"


@pytest.mark.parametrize("name", ["gunicorn/gunicorn-2564-1.txt", "launch/launch-91-1.txt"])
def test_a_stream_reentered_by_a_signal_handler(db, name):
    assert REENTERED in sigs(real_text(name), db)


def test_stream_reentered_near_miss(db):
    # another RuntimeError raised inside the same logging call: no re-entered stream
    text = real_text("gunicorn/gunicorn-2564-1.txt")
    near = "\n".join("RuntimeError: dictionary changed size during iteration" if "reentrant call" in x else x
                     for x in text.splitlines()) + "\n"
    assert near != text and REENTERED not in sigs(near, db)


REFCOUNT = "extension-refcount-error"


def test_an_extensions_refcount_error(db):
    snap, wait = text_verdict(real_text("cpython/cpython-93762-1.txt"), db)
    f = next(f for f in snap.findings if f.signature == REFCOUNT)
    assert f.confidence >= 0.8 and wait == "crashed"
    # the collector's corrupted list has two causes (a refcount error, the C API without the GIL)
    snap = text_verdict(real_text("ikalog/ikalog-59-1.txt"), db)[0]
    assert next(f for f in snap.findings if f.signature == REFCOUNT).confidence < 0.8


def test_refcount_near_miss(db):
    # another fatal error at the same place (a thread state, not a reference count)
    text = real_text("cpython/cpython-93762-1.txt")
    near = "\n".join("Fatal Python error: PyThreadState_Get: no current thread" if "deallocating None" in x else x
                     for x in text.splitlines()) + "\n"
    assert near != text and REFCOUNT not in sigs(near, db)


CPU = "cpu-instruction-set-unsupported"


def _conf(text: str, db, sig: str) -> float:
    return max((f.confidence for f in text_verdict(text, db)[0].findings if f.signature == sig), default=0.0)


def test_an_illegal_instruction_at_import_is_the_cpu(db):
    assert _conf(real_text("numcodecs/numcodecs-252-1.txt"), db, CPU) >= 0.8
    # SIGILL alone (a rank, an emulator): one of two causes, a lead
    for name in ("horovod/horovod-926-1.txt", "ish/ish-377-1.txt"):
        assert 0 < _conf(real_text(name), db, CPU) < 0.8, name


@pytest.mark.parametrize("old,new", [
    ("Illegal instruction (core dumped)", "Segmentation fault (core dumped)"),  # another signal at import
    (">>> import numcodecs", ">>> numcodecs.blosc.compress(b'x')"),  # not right after an import: a lead only
])
def test_cpu_near_misses(db, old, new):
    text = real_text("numcodecs/numcodecs-252-1.txt")
    assert old in text
    assert _conf(text.replace(old, new), db, CPU) < 0.8


def test_tensorflows_note_on_unused_instructions_is_no_crash(db):
    text = ("2024-01-02 10:00:00.123456: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow "
            "binary is optimized to use available CPU instructions in performance-critical operations.\n"
            "Your CPU supports instructions that this TensorFlow binary was not compiled to use: AVX2 FMA\n")
    from helpers import text_or_log_findings
    assert CPU not in [f.signature for f in text_or_log_findings(text, db)]
