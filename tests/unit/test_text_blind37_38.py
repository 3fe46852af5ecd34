"""Fixes from open dev rounds 37 and 38 (manifest-blind37.yaml, manifest-blind38.yaml), each on the round's
real paste and a near miss: CPython 3.14's C stack trace with its header cut from the paste; a Rust thread
that blocks on a future (tokio's block_on parks its own thread); asyncio's Task.print_stack output, its
tasks' waits answered; torch elastic's rendezvous round; c10d's IPv6 lookup warning (known, no wait);
Tcl's abort for an async handler deleted by the wrong thread; a lone gdb bt whose top is an address in no
loaded object called from named code (a wild call); round 38: an NCCL call failed of a CUDA, system or
internal error; vLLM's worker logging its exception; a cut traceback under a Ctrl-C echo; concurrent.futures'
exit join line; a row of Horovod's missing-ranks list."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_a_314_c_stack_cut_below_its_header_is_the_crashing_threads(db):
    text = real_text("or-tools/or-tools-5025-1.txt")
    (t,) = parse_text(text).processes[0].threads
    assert t.current and t.frames[0].function == "gsignal" and t.frames[1].function == "abort"
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same rows under another word are no C stack of CPython's
    with pytest.raises(InputError):
        parse_text(text.replace('Binary file "', 'Source file "'))


def test_tokios_block_on_parks_the_thread_for_a_future(db):
    text = real_text("polars/polars-27969-1.txt")
    assert text_verdict(text, db)[1] == "future"
    # near miss: a tokio worker's own park (the multi-thread scheduler's) waits for tasks: no future
    worker = text.replace("tokio::runtime::park::Inner::park",
                          "tokio::runtime::scheduler::multi_thread::park::Inner::park")
    assert text_verdict(worker, db)[1] != "future"


def test_asyncios_task_stack_print_is_read_and_its_tasks_wait_answered(db):
    text = real_text("lbry-sdk/lbry-sdk-3666-1.txt")
    (proc,) = parse_text(text).processes
    tasks = proc.asyncio.all_tasks()
    assert [t.coroutine_stack[0].function for t in tasks] == ["run", "process_blocks_and_mempool_forever"]
    assert tasks[0].coroutine_stack[0].line == 138 and all(t.awaits[0].kind == "future" for t in tasks)
    snap, wait = text_verdict(text, db)
    assert wait == "future" and "asyncio tasks wait" in snap.findings[0].summary
    assert not any(f.signature.startswith("asyncio-") for f in snap.findings)  # a print of some tasks: no orphan
    # near misses: tasks that ended wait for nothing; a task asleep in asyncio.sleep sleeps
    done = ("No stack for <Task finished name='Task-2' coro=<f() done, defined at /app/m.py:3> result=None>\n"
            "No stack for <Task finished name='Task-3' coro=<g() done, defined at /app/m.py:7> result=None>\n")
    assert text_verdict(done, db)[1] is None
    asleep = ("Stack for <Task pending name='Task-1' coro=<main() running at /app/m.py:10> wait_for=<Future pending "
              "cb=[Task.task_wakeup()]>> (most recent call last):\n  File \"/app/m.py\", line 10, in main\n"
              "    await tick()\n  File \"/usr/lib/python3.12/asyncio/tasks.py\", line 665, in sleep\n"
              "    return await future\n")
    assert text_verdict(asleep, db)[1] == "sleep"


def test_torch_elastic_agents_rendezvous_round_is_a_rendezvous_wait(db):
    text = real_text("pytorch-lightning/pytorch-lightning-3029-1.txt")
    assert text_verdict(text, db)[1] == "collective"
    # near miss: the agent's lines of a restart with no rendezvous line say no wait (a log it refuses)
    restart = "".join(line + "\n" for line in text.splitlines() if "ende" not in line and "Keep-alive" not in line
                      and "waiting list" not in line)
    with pytest.raises(InputError):
        parse_text(restart)


def test_c10ds_ipv6_lookup_warning_is_known_but_names_no_wait(db):
    """c10d's warning that a host's IPv6 addresses cannot be retrieved: healthy runs print it before
    they fall back to IPv4, so it is a known line (the paste is answered) but no network wait."""
    text = real_text("pytorch/pytorch-121807-1.txt")
    assert text_verdict(text, db)[1] == "runs"
    # near miss: the IPv4 lookup failing too (no fallback left) is the network wait
    assert text_verdict(text.replace("IPv6", "IPv4"), db)[1] == "network"


def test_tcl_deleting_its_async_handler_from_the_wrong_thread_aborts(db):
    text = real_text("openclga/openclga-23-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the finaliser's ignored exception alone is no crash
    quiet = text.replace("Tcl_AsyncDelete: async handler deleted by the wrong thread", "")
    assert not crash_said(quiet, db)


def test_a_lone_bt_topped_by_an_address_in_no_object_called_from_named_code_is_a_wild_call(db):
    text = real_text("pytorch/pytorch-13123-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near misses: the same top under libffi's call (ctypes into generated code: a JIT's loop may run
    # there), and a top frame gdb placed in the C library (where a waiting thread stands), are no wild
    # call (a top placed in another library's unnamed code is a stop there: crashframes._unnamed_in_library)
    ffi = text.replace("void std::_Bind_simple<void (*())()>::_M_invoke<>(std::_Index_tuple<>) ()",
                       "ffi_call_unix64 ()")
    assert text_verdict(ffi, db)[1] != "crashed"
    placed = text.replace("#0  0x00007fff78d7e260 in ?? ()",
                          "#0  0x00007fff78d7e260 in ?? () from /lib/x86_64-linux-gnu/libc.so.6")
    assert text_verdict(placed, db)[1] != "crashed"


def test_an_nccl_call_that_failed_of_a_cuda_error_ends_the_process(db):
    text = real_text("nccl/nccl-1410-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a remote peer's exit is the survivor's collective ended by another rank's death
    remote = ("[rank7]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
              "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.20.5\n"
              "[rank7]: ncclRemoteError: A call failed possibly due to a network error or a remote process "
              "exiting prematurely.\n")
    assert text_verdict(remote, db)[1] == "collective"


def test_vllms_worker_logging_the_exception_it_died_of_is_a_crash(db):
    text = real_text("vllm/vllm-14404-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same worker traceback without vLLM's line over it says no more than its frames
    assert text_verdict(text.replace("WorkerProc hit an exception: %s", "WorkerProc output"), db)[1] != "crashed"


def test_a_cut_traceback_under_a_ctrl_c_echo_stood_on_its_last_line(db):
    text = real_text("grpc/grpc-4969-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "join" and "python-shutdown-nondaemon-threads" in sigs(snap)
    # near misses: a socket read as the last line is the wait under the ^C echo, but with no echo a cut
    # traceback's read is as often the call that raised (a timeout) as a wait (cut_line_wait leaves it);
    # a line of _python_exit that is no join is not the exit join
    read = text.replace("t.join(sys.maxint)", "data = sock.recv(4096)")
    assert text_verdict(read, db)[1] == "network"
    assert text_verdict(read.replace("^C\n", ""), db)[1] != "network"
    assert text_verdict(text.replace("^C\n", ""), db)[1] != "join"  # the cut took what ended it
    other = text_verdict(text.replace("t.join(sys.maxint)", "items = list(_threads_queues.items())"), db)[0]
    assert "python-shutdown-nondaemon-threads" not in sigs(other)


def test_a_row_of_horovods_missing_ranks_list_is_the_stall(db):
    text = real_text("horovod/horovod-2107-1.txt")
    snap, wait = text_verdict(text, db)
    assert "horovod-stall" in sigs(snap) and wait == "collective"
    # near miss: a numbered list of other names is no Horovod op
    with pytest.raises(InputError):
        parse_text("3: [global_tensor_sum/Sum_placeholder_0, global_tensor_error/Error_placeholder_0]\n")


def test_a_chained_tracebacks_outer_part_does_not_hide_the_inner_wait(db):
    """borg's lock file: the inner traceback's mkdir of the lock says what it waited for; the outer
    part, cut on an acquire() line, names no other wait."""
    assert text_verdict(real_text("borg/borg-405-1.txt"), db)[1] == "file-lock"
