"""Apple's GPU (Metal, under torch's MPS backend or MLX): a thread that waits for the GPU stands in
a command buffer's waitUntilCompleted, the MPS stream's synchronize, or in a call into the GPU
driver (IOGPU's functions end in a kernel message to it: a buffer's creation, a submission) that
does not return.  Round 28's mlx-1711 (lldb, a training step allocating a Metal buffer) read as
"runs"."""

from __future__ import annotations

from helpers import real_text, text_verdict


def test_a_metal_buffer_creation_in_the_gpu_driver_is_a_gpu_wait(db):
    _snap, wait = text_verdict(real_text("mlx/mlx-1711-1.txt"), db)
    assert wait == "gpu"


def _lldb(frames):
    rows = "".join("    frame #%d: 0x00000001%08x %s\n" % (i, 4096 * (i + 1), f) for i, f in enumerate(frames))
    return "(lldb) bt\n* thread #1, queue = 'com.apple.main-thread', stop reason = signal SIGSTOP\n" + rows.replace(
        "    frame #0", "  * frame #0", 1)


def test_a_command_buffers_wait_is_a_gpu_wait(db):
    text = _lldb(["libsystem_kernel.dylib`__psynch_cvwait + 8", "libsystem_pthread.dylib`_pthread_cond_wait + 1228",
                  "Metal`-[_MTLCommandBuffer waitUntilCompleted] + 84",
                  "libtorch_cpu.dylib`at::mps::MPSStream::synchronize(at::mps::SyncType) + 172",
                  "Python`_PyEval_EvalFrameDefault + 52772"])
    assert text_verdict(text, db)[1] == "gpu"


def test_an_iokit_call_of_another_driver_is_no_gpu_wait(db):
    # the same kernel message under IOKit, from a HID device's driver: no GPU in it
    text = _lldb(["libsystem_kernel.dylib`mach_msg2_trap + 8", "libsystem_kernel.dylib`mach_msg2_internal + 80",
                  "IOKit`io_connect_method + 524", "IOKit`IOConnectCallMethod + 236",
                  "IOKit`IOHIDDeviceGetReport + 212", "hidapi.so`hid_get_feature_report + 96"])
    assert text_verdict(text, db)[1] != "gpu"
