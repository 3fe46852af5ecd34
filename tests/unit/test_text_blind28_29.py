"""The texts of rounds 28 and 29 the reader refused though they hold frames (once listed in
pending-blind28-29.yaml), and Jython's thread dump in VisualVM's ``t@N`` style: each on its real
paste, the format's other variant its producer prints, and a near miss it must not claim."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.detect import detect, scores
from hanganalyze.errors import InputError


def only(snap):
    assert len(snap.processes) == 1
    return snap.processes[0]


def best(text: str) -> str:
    return scores(text.splitlines())[0][1]


# --- cuda-gdb's info cuda threads ----------------------------------------------------------------

def test_info_cuda_threads_rows_are_device_frames_and_the_gpu_is_the_wait(db):
    text = real_text("nccl/nccl-558-1.txt")
    proc = only(parse_text(text))
    assert "parsed as cuda-gdb info cuda threads" in proc.notes
    # six rows, four places (kernel, PC, file, line): rows at one PC are one thread
    assert len(proc.threads) == 4
    first = proc.threads[0]
    assert first.name == "CUDA kernel 0, block (0,0,0), thread (0,0,0)-(31,0,0)"
    assert "device threads: 64" in first.notes  # rows 1 and 4 share PC 0x7f735e581630
    f = first.frames[0]
    assert (f.function, f.file, f.line, f.address) == (
        None, "/sources/nccl/src/collectives/device/prims_ll.h", 48, 0x7F735E581630)
    assert [t.frames[0].line for t in proc.threads] == [48, 48, 94, 48]
    _snap, wait = text_verdict(text, db)
    assert wait == "gpu"


def test_info_cuda_threads_uncoalesced_rows_and_the_current_thread():
    text = ("(cuda-gdb) info cuda threads\n"
            "   BlockIdx ThreadIdx         Virtual PC Dev SM Wp Ln   Filename  Line\n"
            "Kernel 1\n"
            "*   (0,0,0)   (0,0,0) 0x000000000088f88c   0  0  0  0    acos.cu   376\n"
            "    (0,0,0)   (1,0,0) 0x000000000088f88c   0  0  0  1    acos.cu   376\n"
            "    (0,0,0)   (2,0,0) 0x000000000088f800   0  0  0  2        n/a     0\n")
    proc = only(parse_text(text))
    assert len(proc.threads) == 2
    assert proc.threads[0].current and proc.threads[0].name == "CUDA kernel 1, block (0,0,0), thread (0,0,0)"
    assert "device threads: 2" in proc.threads[0].notes
    assert (proc.threads[1].frames[0].file, proc.threads[1].frames[0].line) == (None, None)  # n/a, 0


def test_a_lone_row_or_a_kernels_table_is_not_info_cuda_threads():
    row = "   (0,0,0)   (0,0,0)     (0,0,0)  (31,0,0)    32 0x00007f735e581630 prims_ll.h    48\n"
    assert dict((n, s) for s, n in scores(row.splitlines()))["cuda-threads"] == 0
    kernels = ("  Kernel Parent Dev Grid Status   SMs Mask   GridDim  BlockDim Invocation\n"
               "*      0      -   0    7 Active 0x00000001 (1,1,1) (256,1,1) ncclKernel_AllReduce_RING_LL_Sum_f32()\n")
    assert best(kernels) == "cuda-kernels"


def test_a_device_focus_in_an_nccl_kernel_stays_a_collective(db):
    # the device-thread fallback speaks only where no frame name places the wait (cuda-gdb-18: waitPeer)
    _snap, wait = text_verdict(real_text("cuda-gdb/cuda-gdb-18-1.txt"), db)
    assert wait == "collective"


# --- rich traceback, its location wrapped at a blank ---------------------------------------------

def test_a_rich_box_cut_above_reads_the_location_wrapped_before_its_function(db):
    text = real_text("adm-public/adm-public-6-1.txt")
    proc = only(parse_text(text))
    assert "parsed as rich traceback (boxed frames)" in proc.notes
    frames = proc.threads[0].frames
    assert [(f.function, f.line) for f in frames] == [("_try_get_data", 1163)]
    assert frames[0].file.endswith("torch/utils/data/dataloader.py")
    _snap, wait = text_verdict(text, db)
    assert wait == "queue"


def test_a_rich_location_wrapped_before_in_is_one_frame_too():
    text = ("│ /srv/app/jobs/loader_with_a_long_name.py:88                                       │\n"
            "│ in fetch_next                                                                     │\n"
            "│                                                                                   │\n"
            "│ ❱  88 │   │   item = self.queue.get()                                             │\n")
    proc = only(parse_text(text))
    assert [(f.function, f.line) for f in proc.threads[0].frames] == [("fetch_next", 88)]


def test_two_halves_that_both_say_in_or_lines_outside_a_box_are_no_rich_frame():
    both = "│ /srv/app/jobs/loader.py:88 in │\n│ in fetch_next │\n"
    assert dict((n, s) for s, n in scores(both.splitlines()))["rich"] == 0
    bare = "/srv/app/jobs/loader.py:88 in\nfetch_next\n"
    assert dict((n, s) for s, n in scores(bare.splitlines()))["rich"] == 0


# --- a Windows program's own stack print (CaptureStackBackTrace + SymFromAddr) -------------------

def test_a_windows_stack_print_is_one_thread_innermost_first():
    proc = only(parse_text(real_text("cpython/cpython-22453-1.txt")))
    assert "parsed as Windows stack print (N: Function - 0xAddress)" in proc.notes
    names = [f.function for f in proc.threads[0].frames]
    assert len(names) == 31 and names[:3] == ["PythonCmd", "TclNRRunCallbacks", "Tcl_EvalEx"]
    assert names[14] == "KiUserCallbackDispatcher"
    assert all(f.address is None for f in proc.threads[0].frames)  # the symbol's start, not a PC


def test_a_stack_print_numbered_down_keeps_its_order():
    text = "2: WaitForSingleObjectEx - 0x7FFCC2F01000\n1: worker_loop - 0x7FF6A0001200\n0: main - 0x7FF6A0001000\n"
    proc = only(parse_text(text))
    assert [f.function for f in proc.threads[0].frames] == ["WaitForSingleObjectEx", "worker_loop", "main"]


@pytest.mark.parametrize("text", [
    "1: Install the driver - 0x10 is the id\n2: Reboot - 0x20\n",  # two numbered lines: a list, not a stack
    "1: start - 0x10\n3: stop - 0x20\n7: reset - 0x30\n",  # not numbered one after another
])
def test_numbered_prose_with_hex_numbers_is_no_stack(text):
    assert dict((n, s) for s, n in scores(text.splitlines()))["stackwalk"] == 0
    with pytest.raises(InputError):
        detect(text.splitlines())


# --- VisualVM / NetBeans thread dump ("name" - Thread t@N) --------------------------------------

def test_a_visualvm_thread_waits_for_the_lock_its_owner_holds(db):
    text = real_text("jython/jython-321-1.txt")
    proc = only(parse_text(text))
    t = proc.threads[0]
    assert (t.name, t.tid) == ("Timer-46", 1884806)
    assert t.waits is not None and t.waits.kind == "mutex" and t.waits.owner_tid == 1792157
    assert 'owned by "https-openssl-nio-443-exec-245" t@1792157' in t.waits.detail
    assert t.waits.resource == "60eba516"
    _snap, wait = text_verdict(text, db)
    assert wait == "lock"


def test_a_visualvm_cycle_is_a_deadlock_through_the_t_at_ids(db):
    text = ('"A" - Thread t@11\n   java.lang.Thread.State: BLOCKED\n'
            "\tat app.Bank.move(Bank.java:10)\n"
            '\t- waiting to lock <1f2e3d4c> (a app.Account) owned by "B" t@12\n'
            "\t- locked <5a6b7c8d> (a app.Account)\n\n"
            '"B" - Thread t@12\n   java.lang.Thread.State: BLOCKED\n'
            "\tat app.Bank.move(Bank.java:10)\n"
            '\t- waiting to lock <5a6b7c8d> (a app.Account) owned by "A" t@11\n'
            "\t- locked <1f2e3d4c> (a app.Account)\n")
    proc = only(parse_text(text))
    assert [(t.tid, t.waits.owner_tid) for t in proc.threads] == [(11, 12), (12, 11)]
    snap, _wait = text_verdict(text, db)
    assert any(f.severity == "deadlock" for f in snap.findings)


def test_a_visualvm_waiting_on_is_no_lock_wait():
    text = ('"pool-1-thread-1" - Thread t@21\n   java.lang.Thread.State: WAITING\n'
            "\tat java.lang.Object.wait(Native Method)\n"
            "\t- waiting on <3c4d5e6f> (a java.util.LinkedList)\n"
            "\tat app.Pool.take(Pool.java:40)\n")
    t = only(parse_text(text)).threads[0]
    assert t.tid == 21 and t.waits is None
    quoted = 'He said "Timer-46" - Thread t@ nothing more\n'
    assert dict((n, s) for s, n in scores(quoted.splitlines()))["jvm-threads"] == 0


# --- chunks of corpus texts that were refused (or lost their frames) though they hold frames ------

def test_lines_padded_to_one_width_are_a_screen_copy_not_a_wrap():
    # UCX's handler backtrace, every line filled with blanks to 142 columns: the rows were joined
    # into one line as if a terminal had cut them, and the backtrace was lost
    proc = only(parse_text(real_text("pytorch/pytorch-149418-1.txt")))
    t = proc.threads[0]
    assert t.tid == 224 and [f.function for f in t.frames] == ["ucs_handle_error", None]


def test_a_terminal_cut_at_its_width_is_still_joined():
    long = ("#0  0x00007f0c1a096f9e in very_long_function_name_number_one (argument=<optimized out>, "
            "other=0x1) at /build/glibc/nptl/pthread_kill.c:44")
    text = "\n".join([long[:80], long[80:], long.replace("#0", "#1")[:80], long[80:],
                      long.replace("#0", "#2")[:80], long[80:]]) + "\n"
    proc = only(parse_text(text))
    assert [f.line for f in proc.threads[0].frames] == [44] * 3


def test_caret_m_endings_and_a_word_every_record_shares_come_off(db):
    # "2024-12-19 21:40:35 ERROR 56542 [async_llm_engine.py:64]   File ...^M": a logging format's
    # time, level, pid and location over a traceback, each line ending in cat -v's ^M
    text = real_text("vllm/vllm-11366-1.txt")
    proc = only(parse_text(text))
    assert "parsed as Python traceback" in proc.notes
    assert proc.threads[0].frames[0].function == "_wrapper"
    assert not any(f.function.endswith("^M") for f in proc.threads[0].frames)
    snap, _wait = text_verdict(text, db)
    assert "cuda-illegal-memory-access" in [f.signature for f in snap.findings]


def test_a_lone_caret_m_and_a_word_two_lines_share_stay():
    from hanganalyze.acquire.text.common import clean_and_join
    from hanganalyze.acquire.text.unwrap import unwrap_layers

    assert clean_and_join("press ^M\nthen wait\nand wait\n")[0] == "press ^M"
    assert unwrap_layers(["job1 starts", "job1 ends"]) == []


def test_a_shared_word_is_no_proof_for_a_frame_too_weak_to_score():
    # the reporter's own printf lines under "[pid]": without the word, one reads like py-spy's
    # "function (file)"; only a format's score may take the layer under a word shared by chance
    with pytest.raises(InputError):
        parse_text(real_text("psycopg2/psycopg2-703-1.txt"))
