"""Fixes from open development rounds 95/96 (manifest-blind95/96.yaml), each on the round's real paste
and a near miss: Go's goroutine dumps, gdb frames whose ``#`` became a dash, a library's fatal error
reporter on a cut stack, AddressSanitizer's report below its header, multiprocessing's line over a
child's uncaught exception, ROCm's signal wait, a typeset arrow and an Objective-C method in a
hand-written chain, asyncio's executor that did not join, an event loop under run_until_complete,
faulthandler's timeout header with a comment."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError
from hanganalyze.names import normalize_native_name


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_a_go_sigquit_dump_is_read(db):
    text = real_text("ollama/ollama-1863-1.txt")
    proc = parse_text(text).processes[0]
    t = proc.threads[0]
    assert t.name == "goroutine 0" and "goroutine state: idle" in t.notes
    assert [f.function for f in t.frames[:3]] == ["runtime.pthread_cond_wait", "runtime.semasleep", "runtime.notesleep"]
    assert t.frames[0].line == 507 and t.frames[0].file.endswith("runtime/sys_darwin.go")
    assert text_verdict(text, db)[1] == "idle"
    # near miss: a goroutine header with no place line under its calls does not score as a Go dump
    from hanganalyze.acquire.text import goroutines

    assert goroutines.score(["goroutine 1 [running]:", "main.main()"]) == 0


def test_a_goroutines_state_names_the_wait_its_hidden_runtime_frames_would(db):
    text = ("goroutine 1 [chan receive, 12 minutes]:\nmain.main()\n\t/tmp/x/main.go:9 +0x5c\n")
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].function == "runtime.chanrecv" and "state [chan receive" in t.frames[0].note
    assert text_verdict(text, db)[1] == "queue"
    # near miss: a running goroutine that panicked in a nil mutex's Lock waits for nothing: it crashed
    go = real_text("go/go-34168-1.txt")
    assert text_verdict(go, db)[1] == "crashed"


def test_a_go_method_keeps_its_receiver_in_its_name():
    assert normalize_native_name("sync.(*WaitGroup).Wait") == "sync.(*WaitGroup).Wait"
    assert normalize_native_name("net/http.(*conn).serve") == "net/http.(*conn).serve"
    # near miss: a C++ parameter list still goes
    assert normalize_native_name("ns::A::b(char const*) const") == "ns::A::b"


def test_gdb_frames_whose_hash_became_a_dash(db):
    text = real_text("pyzmq/pyzmq-618-1.txt")
    t = parse_text(text).processes[0].threads[0]
    assert t.frames[0].function == "epoll_wait" and t.frames[1].function == "zmq::epoll_t::loop"
    assert text_verdict(text, db)[1] == "idle"
    # near miss: a list of dashed lines that are no frames (no address and "in")
    with pytest.raises(InputError):
        parse_text("-0  first item of the list\n-1  second item\n-2  third item\n")


def test_a_librarys_fatal_reporter_on_a_cut_stack_is_the_abort(db):
    text = real_text("llama.cpp/llama.cpp-27330-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same stack without the reporter on top (the kernel launch itself) is no abort
    near = "\n".join(text.split("\n")[2:])
    assert not near.startswith("#3") and text_verdict(near, db)[1] != "crashed"


def test_asan_report_lines_below_its_header(db):
    text = real_text("cpython/cpython-140815-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    near = text.replace("Address 0x76c292fb39da is located in stack of thread T0",
                        "The value 0x76c292fb39da was read by thread T0")
    assert near != text and text_verdict(near, db)[1] != "crashed"


def test_multiprocessings_line_over_a_childs_uncaught_exception(db):
    text = ('Process SpawnProcess-1:\nTraceback (most recent call last):\n'
            '  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap\n    self.run()\n'
            '  File "/app/w.py", line 5, in work\n    x = data[3]\nIndexError: list index out of range\n'
            'INFO:app:parent goes on\n')
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    assert "the child process ended on it" in [f for f in snap.findings if f.signature == "triage"][0].summary
    # near miss: a Ctrl-C in the child is where it stood, not an exception of its own
    near = text.replace("IndexError: list index out of range", "KeyboardInterrupt")
    assert text_verdict(near, db)[1] != "crashed"


def test_rocm_hsa_signal_wait_is_the_gpus(db):
    text = real_text("llama.cpp/llama.cpp-13100-1.txt")
    assert text_verdict(text, db)[1] == "gpu"


def test_a_typeset_arrow_chain_with_an_objective_c_method(db):
    text = real_text("eshkol/eshkol-66-1.txt")
    names = [f.function for f in parse_text(text).processes[0].threads[0].frames]
    assert names[:2] == ["__psynch_cvwait", "_pthread_cond_wait"] and "-[_MTLCommandBuffer waitUntilCompleted]" in names
    assert text_verdict(text, db)[1] == "gpu"
    # near miss: prose with one typeset arrow is no call chain
    with pytest.raises(InputError):
        parse_text("We went from the old loader \u2192 the new one and it got slower.\n")


def test_asyncios_executor_that_did_not_join_its_threads(db):
    text = real_text("sqlit/sqlit-69-1.txt")
    assert text_verdict(text, db)[1] == "join"


def test_an_event_loop_under_run_until_complete_is_idle(db):
    text = real_text("ha-mcp/ha-mcp-1644-1.txt")
    assert text_verdict(text, db)[1] == "idle"
    # near miss: a future's result() inside a task step is the future's wait
    near = text.replace("    _poll (asyncio\\windows_events.py:775)\n    select (asyncio\\windows_events.py:446)\n",
                        "    result (concurrent\\futures\\_base.py:456)\n")
    assert near != text and text_verdict(near, db)[1] == "future"


def test_faulthandlers_timeout_header_with_a_pasters_comment_is_a_known_line(db):
    text = real_text("codex/codex-24933-1.txt")
    assert text_verdict(text, db)[0].findings
    with pytest.raises(InputError):  # near miss: "Timeout" in prose
        parse_text("Timeout (that is what I got) after a while\n")
