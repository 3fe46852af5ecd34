"""The triage's advice per wait and per program kind (issue 30): the cause and the next steps come from
the wait's category and from what the process is (analyze/programkind.py), and never tell the user to
run the command that made the report."""

from __future__ import annotations

import re

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.analyze.programkind import advice_fits, advice_text, program_kinds
from hanganalyze.analyze.triagetable import table
from hanganalyze_gdbext.model import Frame, Library, Process, Snapshot, Thread, Wait

ML_WORDS = re.compile(r"DataLoader|num_workers|ray stack|TORCH_|NCCL|huggingface|torchrun", re.I)


def _py(function: str, file: str) -> Frame:
    return Frame(kind="python", function=function, file=file, line=1)


def _nat(function: str, library: str = "/usr/lib/libc.so.6") -> Frame:
    return Frame(kind="native", function=function, library=library)


def _proc(source: str, *threads: list, **kw) -> Process:
    return Process(source=source, pid=10, threads=[Thread(tid=10 + i, frames=fr) for i, fr in enumerate(threads)],
                   **kw)


LOCK_WAIT = [_nat("__futex_abstimed_wait_common64"),
             _nat("PyThread_acquire_lock_timed", "/usr/lib/libpython3.11.so.1.0"), _py("take", "/app/worker.py")]
NATIVE_LOCK = [_nat("__lll_lock_wait"), _nat("pthread_mutex_lock"), _nat("Cache::insert", "/app/app")]
QUEUE_WAIT = [_nat("__futex_abstimed_wait_common64"), _py("get", "/usr/lib/python3.11/queue.py"),
              _py("consume", "/app/main.py")]


def test_program_kinds_from_positive_evidence():
    assert program_kinds(_proc("live", LOCK_WAIT)) == {"python"}
    assert program_kinds(_proc("core", NATIVE_LOCK)) == {"native"}
    torch = _proc("live", LOCK_WAIT, libraries=[Library(path="/venv/torch/lib/libtorch_cpu.so")])
    assert program_kinds(torch) == {"python", "torch"}
    dist = _proc("live", [_nat("c10d::ProcessGroupNCCL::WorkNCCL::wait"), _py("all_reduce",
                 "/venv/torch/distributed/distributed_c10d.py")])
    assert {"torch", "distributed", "python"} <= program_kinds(dist)
    assert "distributed" in program_kinds(_proc("text", NATIVE_LOCK, rank=3))
    loader = _proc("live", [_py("_try_get_data", "/venv/torch/utils/data/dataloader.py")])
    assert {"dataloader", "torch"} <= program_kinds(loader)
    # frames of the eval loop alone (a gdb paste without py-bt) say Python, not C++
    assert program_kinds(_proc("text", [_nat("_PyEval_EvalFrameDefault")])) == {"python"}
    assert program_kinds(_proc("text")) == frozenset()  # nothing seen, nothing claimed


def test_advice_filters():
    entry = {"text": "x", "kinds": ["torch"], "inputs": ["live"]}
    assert advice_fits(entry, {"python", "torch"}, "live")
    assert not advice_fits(entry, {"python"}, "live")
    assert not advice_fits(entry, {"torch"}, "core")
    assert not advice_fits({"text": "x", "not_kinds": ["ray"]}, {"python", "ray"}, "text")
    assert advice_fits("plain", set(), "core")


def _triage(proc: Process, db):
    snap = pipeline.analyze(Snapshot(processes=[proc]), db)
    return next(f for f in snap.findings if f.signature == "triage")


def test_every_category_has_a_cause_of_its_own():
    tab = table()
    rule_cause = "What the stacks show"
    for cat in tab.categories + [tab.crashed, tab.runs]:
        assert cat.cause, cat.id
        assert not any(advice_text(c).startswith(rule_cause) for c in cat.cause)
    causes = {str(c) for cat in tab.categories for c in cat.cause}
    assert len(causes) >= len(tab.categories)  # not one sentence for all


def test_plain_python_lock_wait_gets_python_advice(db):
    f = _triage(_proc("live", LOCK_WAIT), db)
    assert f.triage.wait == "lock"
    assert "threading.Lock" in f.cause and "What the stacks show" not in f.cause
    text = " ".join(f.fix)
    assert not ML_WORDS.search(text) and "scoped_lock" not in text
    assert "hanganalyze --pid PID" not in text  # the command just run


def test_native_lock_wait_gets_no_python_advice(db):
    for source in ("live", "core", "text"):
        f = _triage(_proc(source, NATIVE_LOCK), db)
        text = " ".join(f.fix) + f.cause
        assert "__owner" in text, source
        assert "Python" not in text and "threading" not in text, (source, text)
        assert not ML_WORDS.search(text)


def test_queue_advice_names_the_dataloader_only_for_a_dataloader(db):
    plain = _triage(_proc("live", QUEUE_WAIT), db)
    assert plain.triage.wait == "queue"
    assert not ML_WORDS.search(" ".join(plain.fix))
    loader = _triage(_proc("live", [_nat("__futex_abstimed_wait_common64"), _py("get", "/usr/lib/python3.11/queue.py"),
                                    _py("_try_get_data", "/venv/torch/utils/data/dataloader.py")]), db)
    assert any("num_workers=0" in s for s in loader.fix)


SLEEPER = [_nat("clock_nanosleep"), _py("poll_forever", "/app/main.py")]


def test_sleep_advice_depends_on_the_input(db):
    live = " ".join(_triage(_proc("live", SLEEPER), db).fix)
    core = " ".join(_triage(_proc("core", SLEEPER), db).fix)
    text = " ".join(_triage(_proc("text", SLEEPER), db).fix)
    assert "--samples" in live and "hanganalyze --pid" not in live  # told the option, not the command
    assert "A core is one moment" in core and "--samples" in core
    assert "hanganalyze --pid PID" in text  # a paste: which command captures it


def test_a_cxx_paste_is_not_told_to_merge_python_frames(db):
    text = """Thread 1 (Thread 0x7f (LWP 200)):
#0  __lll_lock_wait (futex=0x5) at lowlevellock.c:52
#1  0x00007f in __GI___pthread_mutex_lock (mutex=0x5) at pthread_mutex_lock.c:80
#2  0x00007f in Cache::insert (this=0x1) at cache.cc:40
"""
    snap = pipeline.analyze(parse_text(text), db)
    f = next(f for f in snap.findings if f.signature == "triage")
    assert not any("Python frames" in s for s in f.fix)
    gdb_py = text + "#3  0x00007f in _PyEval_EvalFrameDefault () from /usr/lib/libpython3.11.so.1.0\n"
    snap = pipeline.analyze(parse_text(gdb_py), db)
    f = next(f for f in snap.findings if f.signature == "triage")
    assert any("merges the Python frames in" in s for s in f.fix)


def test_a_python_lock_cycle_gets_no_cxx_advice(db):
    def waiting(tid: int, owner: int, kind: str) -> Thread:
        return Thread(tid=tid, frames=LOCK_WAIT, waits=Wait(kind=kind, resource="0x%x" % tid, owner_tid=owner, frame=0))

    for kind, cxx in (("pylock", False), ("mutex", True)):
        proc = Process(source="live", pid=1, threads=[waiting(1, 2, kind), waiting(2, 1, kind)])
        snap = pipeline.analyze(Snapshot(processes=[proc]), db)
        f = next(f for f in snap.findings if f.signature == "deadlock-cycle")
        assert ("scoped_lock" in " ".join(f.fix)) is cxx, (kind, f.fix)
        assert any("one global order" in s for s in f.fix)
