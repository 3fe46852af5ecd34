"""Open round 17 (ML dumps, manifest-blind17.yaml): the mechanisms behind its misses, each on the
round's real paste and a near miss it must not claim: MXNet's engine waiting for its workers
(``ThreadedEngine::WaitForVar`` over a condition variable, read as a bare condition); torch's desync
report (``[ranks] joined but didn't finish collective #N``) quoted without the watchdog's first line
(refused); a gdb stop line quoted alone (refused); and a lock taken at an address in the null page
(a fault, read as the lock it faulted in)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError

TIMEOUT = "pgnccl-collective-timeout"


def analyzed(text: str, db):
    snap, wait = text_verdict(text, db)
    return {f.signature: f.confidence for f in snap.findings}, wait


def functions(text: str):
    return [f.function for p in parse_text(text).processes for t in p.threads for f in t.frames]


def lines_of(text: str, keep) -> str:
    return "".join(line + "\n" for i, line in enumerate(text.splitlines()) if keep(i, line))


# --- MXNet's engine waiting for its workers ---------------------------------------------------------

@pytest.mark.parametrize("path", ["mxnet/mxnet-8695-1.txt", "mxnet/mxnet-8675-1.txt", "mxnet/mxnet-4391-1.txt"])
def test_mxnets_wait_for_var_is_a_result_its_engine_workers_owe(db, path):
    """asnumpy / wait_to_read: WaitForVar blocks until the engine's worker threads finish the
    operations pending on the array; the condition variable under it is only how it waits."""
    assert analyzed(real_text(path), db)[1] == "future"


def test_the_condition_wait_under_it_alone_stays_a_condition(db):
    """The same paste cut above WaitForVar (its two innermost frames): a plain condition wait."""
    kept = lines_of(real_text("mxnet/mxnet-8695-1.txt"), lambda i, line: i <= 2)
    assert "mxnet::engine::ThreadedEngine::WaitForVar" not in functions(kept)
    assert analyzed(kept, db)[1] == "condition"


def test_another_engine_method_is_no_wait_for_a_worker(db):
    text = real_text("mxnet/mxnet-8695-1.txt").replace("ThreadedEngine::WaitForVar(mxnet::engine::Var*)",
                                                       "ThreadedEngine::PushAsync(mxnet::engine::Var*)")
    assert analyzed(text, db)[1] == "condition"


# --- torch's desync report --------------------------------------------------------------------------

def test_torchs_desync_report_is_a_collective_timeout(db):
    """ezpz's FSDP2 LoRA hang: WorkNCCL's fields and the desync report, the watchdog's own
    "Watchdog caught collective operation timeout" line not quoted."""
    found, wait = analyzed(real_text("ezpz/ezpz-239-1.txt"), db)
    assert TIMEOUT in found
    assert wait == "collective"


def test_the_same_text_without_the_report_line_is_no_timeout(db):
    text = lines_of(real_text("ezpz/ezpz-239-1.txt"), lambda i, line: "joined but didn't finish" not in line)
    try:
        found, _wait = analyzed(text, db)
    except InputError:
        return
    assert TIMEOUT not in found


def test_prose_that_says_ranks_joined_is_no_report(db):
    """The report's line starts after the rank list's bracket: a sentence with the words is no report."""
    text = "all ranks joined but didn't finish collective #39 in our last run\n"
    with pytest.raises(InputError):
        parse_text(text)


# --- a gdb stop line quoted alone ---------------------------------------------------------------------

def test_a_quoted_gdb_stop_line_alone_is_one_frame():
    """YOLACT's segfault: the writer quoted gdb's "0x.. in f () " line in a sentence, in double quotes."""
    names = functions(real_text("yolact/yolact-483-1.txt"))
    assert len(names) == 1 and names[0].endswith("::at(void* const&) [clone .constprop.228]")


def test_the_stop_line_alone_unquoted_is_one_frame_too():
    assert functions("0x00007f0b5ee7e3f0 in strlen@plt () from /data/cpp_env/lib64/libstdc++.so.6\n") == ["strlen@plt"]


def test_quoted_prose_is_still_no_dump():
    with pytest.raises(InputError):
        parse_text('"the training crashes in the middle of the first epoch"\n')


def test_a_stop_line_above_a_backtrace_adds_no_thread():
    """The usual place of gdb's stop line: above the thread's own frames, which it repeats."""
    text = ("0x00007f0b5ee7e3f0 in strlen@plt () from /lib/libstdc++.so.6\n"
            "(gdb) bt\n"
            "#0  0x00007f0b5ee7e3f0 in strlen@plt () from /lib/libstdc++.so.6\n"
            "#1  0x00007f0ac3235d60 in ?? () from /usr/local/TensorRT-8.4.3.1/lib/libnvinfer.so.8\n")
    snap = parse_text(text)
    assert [len(t.frames) for p in snap.processes for t in p.threads] == [2]


# --- a lock at an address in the null page ----------------------------------------------------------

def test_a_mutex_at_a_null_page_address_faulted(db):
    """MXNet's engine variable already gone (var=0xa): pthread_mutex_lock(mutex=0x2a) faults on its
    first touch; no signal line in the paste, the address is the proof."""
    assert analyzed(real_text("mxnet/mxnet-18314-1.txt"), db)[1] == "crashed"


def test_the_same_lock_at_a_mapped_address_is_a_wait(db):
    text = real_text("mxnet/mxnet-18314-1.txt").replace("(mutex=0x2a)", "(mutex=0x555556b50930)")
    assert analyzed(text, db)[1] not in ("crashed", None)
