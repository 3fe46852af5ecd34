"""gdb on a core whose signal line the paste cut: its echo of frame #0 above ``bt`` is the same thread,
and a lone stack stopped in a stripped library's own code is where it crashed (opened sealed round 40's
ONNX Runtime core); the thread that frees a tensor waiting for the GIL, shown alone (horovod-3352)."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def test_a_cores_echo_without_its_signal_line(db):
    text = real_text("onnxruntime/onnxruntime-26197-1.txt")
    assert "Program terminated" not in text and "[Current thread is 1" in text
    snap, wait = text_verdict(text, db)
    assert len(snap.processes[0].threads) == 1 and wait == "crashed"
    # near miss: the stack's second frame in the C library (a wait's wrapper): no stop in the program's code
    near = text.replace("#1  0x00007fb284ddaa2b in ?? () from /home/ubuntu/soft/onnxruntime-linux-x64-gpu-1.20.1/lib/"
                        "libonnxruntime.so.1", "#1  0x00007fb284ddaa2b in ?? () from /lib/x86_64-linux-gnu/libc.so.6")
    assert text_verdict(near, db)[1] != "crashed"


def test_an_echo_and_a_different_thread_stay_two():
    text = ("#0  0x00007f01 in foo () from /lib/libfoo.so\n(gdb) bt\n#0  0x00007f02 in bar () from /lib/libbar.so\n"
            "#1  0x00007f03 in baz () from /lib/libbar.so\n")
    assert len(parse_text(text).processes[0].threads) == 2


def test_the_tensor_releasing_thread_alone(db):
    text = real_text("horovod/horovod-3352-1.txt")
    snap, wait = text_verdict(text, db)
    assert len(snap.processes[0].threads) == 1
    f = next(f for f in snap.findings if f.signature == "tensorimpl-decref-needs-gil")
    assert f.confidence == 0.6 and wait == "gil"
    # near miss: a GIL wait that frees no tensor
    near = text.replace("c10::TensorImpl::release_resources()", "c10::Foo::run()").replace(
        "(anonymous namespace)::concrete_decref_fn", "(anonymous namespace)::callback_fn")
    assert "tensorimpl-decref-needs-gil" not in [f.signature for f in text_verdict(near, db)[0].findings]


def test_a_frame_past_the_end_of_its_stack(db):
    text = real_text("pytorch/pytorch-164297-1.txt")
    assert "self=<error reading variable: Cannot access memory at address" in text
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the caller's arguments unreadable too (a core that lost its stack pages): no proof
    near = text.replace("args=(<torch._C._onnx.OperatorExportTypes at remote 0x7ffdb6a6e5b0>,)",
                        "args=<error reading variable: Cannot access memory at address 0x7fffff7fef00>")
    assert text_verdict(near, db)[1] != "crashed"
