"""Bucket id on parsed data: what must stay equal and what must differ (real cores: integration)."""

from __future__ import annotations

import re

import pytest

from hanganalyze.analyze.bucket import bucket_id, bucket_key, stack_tokens
from hanganalyze.names import library_base, normalize_native_name
from hanganalyze_gdbext.model import Evidence, Finding, Frame, Process, Snapshot, Thread


def py(func, file, line):
    return Frame(kind="python", function=func, file=file, line=line)


def nat(func, lib, addr=0x1000, file=None, line=None):
    return Frame(kind="native", function=func, library=lib, address=addr, file=file, line=line)


def deadlock_thread(tid, pyver, prefix, qual, line_shift=0, addr_shift=0, worker="worker_a"):
    lib = "%s/lib/libpython%s.so.1.0" % (prefix, pyver)
    frames = [
        nat("__futex_abstimed_wait_common", "/lib/x86_64-linux-gnu/libc.so.6", 0x7F00 + addr_shift),
        nat("PyThread_acquire_lock_timed", lib, 0x5000 + addr_shift),
        nat("lock_PyThread_acquire_lock", lib, 0x5100 + addr_shift),
        py(("Deadlocker." if qual else "") + worker, "/home/alice/proj/deadlock.py", 12 + line_shift),
        nat("_PyEval_EvalFrameDefault", lib, 0x6000 + addr_shift),
        py(("Thread." if qual else "") + "run", "%s/lib/python%s/threading.py" % (prefix, pyver), 975 + line_shift),
        py("_bootstrap_inner", "%s/lib/python%s/threading.py" % (prefix, pyver), 1038 + line_shift),
        py("_bootstrap", "%s/lib/python%s/threading.py" % (prefix, pyver), 995 + line_shift),
        nat("start_thread", "/lib/x86_64-linux-gnu/libc.so.6", 0x7A00 + addr_shift),
    ]
    return Thread(tid=tid, name="T%d" % tid, frames=frames)


def deadlock_snapshot(pyver, prefix, qual, tids=(101, 102), shift=0, sig="deadlock-cycle", swap=False):
    t1 = deadlock_thread(tids[0], pyver, prefix, qual, shift, shift * 16, "worker_a")
    t2 = deadlock_thread(tids[1], pyver, prefix, qual, shift, shift * 16, "worker_b")
    ev = [Evidence(thread=tids[0], frame=3, rule="cycle"), Evidence(thread=tids[1], frame=3, rule="cycle")]
    if swap:
        ev.reverse()
    proc = Process(source="core", pid=100, threads=[Thread(tid=100, frames=[]), t1, t2])
    f = Finding(signature=sig, title="lock-order deadlock", severity="deadlock", process=0, evidence=ev)
    return Snapshot(processes=[proc], findings=[f])


def test_format_is_versioned_and_short():
    b = bucket_id(deadlock_snapshot("3.10", "/root/.pyenv/versions/3.10.13", False))
    assert re.fullmatch(r"b2-[0-9a-f]{12}", b)


def test_same_bug_across_python_versions_paths_lines_addresses_and_tids():
    a = deadlock_snapshot("3.10", "/root/.pyenv/versions/3.10.13", qual=False)
    b = deadlock_snapshot("3.12", "/usr/local", qual=True, tids=(5001, 4000), shift=3, swap=True)
    assert bucket_key(a) == bucket_key(b)
    assert bucket_id(a) == bucket_id(b)


def test_different_signature_or_different_code_differs():
    base = deadlock_snapshot("3.10", "/p", False)
    other_sig = deadlock_snapshot("3.10", "/p", False, sig="pylock-self-deadlock")
    assert bucket_id(base) != bucket_id(other_sig)
    other_code = deadlock_snapshot("3.10", "/p", False)
    for t in other_code.processes[0].threads[1:]:
        t.frames[3].function = "save_checkpoint"
    assert bucket_id(base) != bucket_id(other_code)


def test_interpreter_and_libc_frames_do_not_enter_the_key():
    t = deadlock_thread(1, "3.11", "/x", False)
    toks = stack_tokens(t)
    assert toks[0] == "py:deadlock.py:worker_a"
    assert not any("PyThread" in x or "futex" in x or "start_thread" in x for x in toks)


def test_native_only_falls_back_to_runtime_frames():
    t = Thread(tid=1, frames=[nat("pthread_join", "/lib/libc.so.6"), nat("__libc_start_main", "/lib/libc.so.6")])
    assert stack_tokens(t) == ["c:pthread_join", "c:__libc_start_main"]


@pytest.mark.parametrize(
    "raw,norm",
    [
        ("ns::Foo<int, std::vector<int> >::bar(int, char*) const [clone .isra.0]", "ns::Foo::bar"),
        ("commReclaim(ncclComm*)", "commReclaim"),
        ("commReclaim(ncclAsyncJob*)", "commReclaim"),
        ("gc_collect_main.cold", "gc_collect_main"),
        ("take_gil.constprop.0.isra.1", "take_gil"),
        ("helper.part.3", "helper"),
        ("Foo::operator()(int) const", "Foo::operator()"),
        ("operator<<(std::ostream&, X const&)", "operator<<"),
        ("(anonymous namespace)::run(int)", "{anon}::run"),
        ("std::__cxx11::basic_string<char>::basic_string[abi:cxx11](char const*)",
         "std::__cxx11::basic_string::basic_string"),
    ],
)
def test_native_name_normalization(raw, norm):
    assert normalize_native_name(raw) == norm


def test_library_versions_dropped():
    assert library_base("/usr/lib/libnccl.so.2.21.5") == "libnccl.so"
    assert library_base("/usr/lib/libnccl.so.2.26.5") == "libnccl.so"


def test_crash_without_finding_buckets_the_signalled_thread():
    cur = Thread(tid=7, current=True, frames=[nat("raise", "/lib/libc.so.6"), nat("do_crash", None, 0x401000)])
    other = Thread(tid=8, frames=[nat("poll", "/lib/libc.so.6")])
    snap = Snapshot(processes=[Process(source="core", signal="SIGSEGV", threads=[other, cur])])
    b = bucket_id(snap)
    assert b and b.startswith("b2-")
    cur.frames[1].address = 0x402000  # another build: addresses move, id stays
    assert bucket_id(snap) == b
    cur.frames[1].function = "do_other_crash"
    assert bucket_id(snap) != b


def test_hang_without_finding_has_no_bucket():
    snap = Snapshot(processes=[Process(source="core", signal=None, threads=[Thread(tid=1, current=True)])])
    assert bucket_id(snap) is None
    snap.processes[0].signal = "SIGSTOP"
    assert bucket_id(snap) is None
