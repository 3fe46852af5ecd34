"""ML logs that say which wait timed out (round 10's misses, widened): the NCCL watchdog, gloo's
send / recv, the c10d store (a key, its clients, its socket), the store-based barrier, JAX's
coordination service, Horovod's stall inspector.  A stack that names no wait (a traceback cut
short, or standing in code no frame list knows) takes the wait the paste's timeout line names,
also when the reader cut the paste into a log and a traceback (``analyze/logwait.py``); a stack
that shows a wait keeps it, and a paste with no timeout line says what its frames say.

Texts: tests/data/loglines/timeouts/, real pastes from public threads (the URL heads each file;
``# wait:`` is the wait the thread establishes, ``# expect:`` the known bug, or nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from helpers import sample_with_header

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.gdb import parse_frame_body
from hanganalyze.analyze.logwait import paste_timeouts, timed_out
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Frame, Process, Snapshot, Thread

DATA = Path(__file__).resolve().parents[1] / "data" / "loglines" / "timeouts"
REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld"
CONFIDENT = 0.8


def header(name: str, key: str) -> List[str]:
    """The first word of each ``# key:`` header line."""
    return [line.split(":", 1)[1].split()[0] for line in (DATA / name).read_text().splitlines()
            if line.startswith("# %s:" % key)]


def read(name: str) -> Tuple[str, Optional[str], str]:
    """(body, expected known bug or None, the wait the thread establishes)."""
    text, expect = sample_with_header(DATA / name)
    return text, expect, header(name, "wait")[0]


def analyze(text: str, db) -> Snapshot:
    return pipeline.analyze(parse_text(text), db)


def triage(snap: Snapshot):
    return next(f for f in snap.findings if f.signature == "triage")


FILES = sorted(p.name for p in DATA.glob("*.txt"))


def test_every_file_is_sourced_and_labelled():
    assert len(FILES) >= 12
    for name in FILES:
        head = (DATA / name).read_text().splitlines()[:3]
        assert head[0].startswith("# source: https://github.com/"), name
        assert head[1].startswith("# expect: ") and head[2].startswith("# wait: "), name


@pytest.mark.parametrize("name", FILES)
def test_the_wait_and_the_finding(db, name):
    """Each paste: the triage's wait is the one its thread establishes; the known bug of its class
    is found where one is labelled, and no other bug is said with confidence."""
    text, expect, wait = read(name)
    snap = analyze(text, db)
    assert triage(snap).triage.wait == wait
    found = {f.signature for f in snap.findings}
    if expect is not None:
        assert expect in found, found
    also = set(header(name, "also"))  # a second bug of the same class the paste shows too
    assert also <= found, found
    confident = {f.signature for f in snap.findings if f.signature not in {"triage", expect} | also
                 and (f.confidence or 0) >= CONFIDENT and f.severity in ("hang", "deadlock")}
    assert not confident, confident


#: Pastes whose frames name no wait: the timeout line decides (file -> words of the lines that say
#: what timed out; without them the frames' own answer comes back: a traceback that raised, or
#: one cut before its exception line, is the exception's, "crashed").
FROM_THE_LINE = {
    "c10d_socket_timeout_grpo_trl_3157.txt": ("waitForInput", "crashed"),
    "c10d_socket_timeout_vllm_client_openr1_690.txt": ("waitForInput", "crashed"),
    "gloo_broadcast_timeout_kwola_2.txt": ("Timed out waiting", "crashed"),
    # SGLang's scheduler died of an exception the cut traceback does not show: without the
    # socket's timeout beside it, a crash
    "c10d_socket_timeout_sglang_7478.txt": ("waitForInput", "crashed"),
}


@pytest.mark.parametrize("name", sorted(FROM_THE_LINE))
def test_the_timeout_line_names_the_wait_and_only_it(db, name):
    text, _expect, wait = read(name)
    key, without = FROM_THE_LINE[name]
    snap = analyze(text, db)
    info = triage(snap).triage
    assert (info.wait, info.from_) == (wait, "log")
    assert any(t.frames or t.python_frames for p in snap.processes for t in p.threads)  # a stack, not a log only
    kept = "\n".join(line for line in text.splitlines() if key not in line) + "\n"
    assert kept != text
    assert triage(analyze(kept, db)).triage.wait == without


def test_a_log_line_of_gloo_alone_is_the_collective(db):
    """gloo's timeout line with nothing else: read (not refused) and told as the collective."""
    text, _expect, _wait = read("gloo_send_timeout_vnext_9.txt")
    assert len([x for x in text.splitlines() if x.strip()]) == 1
    f = triage(analyze(text, db))
    assert f.triage.wait == "collective" and "the log says" in f.summary


def _text_process(threads: List[Thread], messages: List[str], input_file: Optional[str] = None,
                  signal: Optional[str] = None) -> Process:
    p = Process(source="text", threads=threads, messages=messages, signal=signal)
    p.input_file = input_file
    return p


def _traceback_thread(frames: List[Frame]) -> Thread:
    return Thread(frames=frames, notes=["Python traceback"])


GRPO_LINE = read("c10d_socket_timeout_grpo_trl_3157.txt")[0].splitlines()[1]
USER_FRAME = Frame(kind="python", function="main", file="/src/run_grpo.py", line=219)


def _wait_of(snap: Snapshot, db) -> str:
    return triage(pipeline.analyze(snap, db)).triage.wait


def test_a_stack_that_shows_a_wait_keeps_it(db):
    """The timeout line of the paste fills in only for frames that name no wait: a thread in
    queue.get stays a queue wait (the line may be another rank's)."""
    assert "timed out after" in GRPO_LINE
    queue = _traceback_thread([Frame(kind="python", function="get", file="/usr/lib/python3.10/queue.py", line=171),
                               USER_FRAME])
    assert _wait_of(Snapshot(processes=[_text_process([queue], []), _text_process([], [GRPO_LINE])]), db) == "queue"
    runs = _traceback_thread([USER_FRAME])
    assert _wait_of(Snapshot(processes=[_text_process([runs], []), _text_process([], [GRPO_LINE])]), db) == "collective"


def test_another_inputs_line_is_not_this_ones(db):
    """A job's rank files are separate inputs: one rank's timeout line says nothing of another
    rank's stack."""
    procs = [_text_process([_traceback_thread([USER_FRAME])], [], "/logs/rank0.txt"),
             _text_process([], [GRPO_LINE], "/logs/rank1.txt")]
    assert [c.id for c in paste_timeouts(procs).values()] == ["collective"]
    assert id(procs[0]) not in paste_timeouts(procs)
    found = pipeline.analyze(Snapshot(processes=procs), db).findings
    waits = {f.triage.wait for f in found if f.signature == "triage"}
    assert "crashed" in waits  # rank 0's own answer: its traceback is cut before the exception line


def test_a_fatal_signal_stays_a_crash(db):
    """A rank that died of SIGSEGV in a paste whose other lines say a collective timed out (the
    others waited for it): crashed, not the wait."""
    t = _traceback_thread([USER_FRAME])
    t.current = True
    snap = Snapshot(processes=[_text_process([t], ["Fatal Python error: Segmentation fault"], signal="SIGSEGV"),
                               _text_process([], [GRPO_LINE])])
    assert _wait_of(snap, db) == "crashed"


def test_timed_out_names_the_line():
    cat, i = timed_out(["epoch 3 loss 1.2", GRPO_LINE])
    assert cat is not None and cat.id == "collective" and i == 1
    poll = "[c10d] waitForInput: poll for socket returned 0, likely a timeout"  # a poll's warning, not the end
    assert timed_out(["epoch 3 loss 1.2", poll]) == (None, None)


# --- round 10's two misses, in the open corpus --------------------------------------------------

@pytest.mark.parametrize("name,expect", [("vlm-training/vlm-training-26-1.txt", "pgnccl-collective-timeout"),
                                         ("open-llama/open-llama-47-1.txt", "c10d-store-rendezvous-hang")])
def test_round10_collective_misses(db, name, expect):
    snap = analyze((REALWORLD / name).read_text(), db)
    assert expect in {f.signature for f in snap.findings}
    assert triage(snap).triage.wait == "collective"


def test_the_failed_collectives_stack_is_python_frames():
    """ProcessGroupNCCL's "Stack trace of the failed collective" (torch's CapturedTraceback): each
    "#N f from /x.py:L" is a Python frame at that file and line; gdb's "from LIB" stays a library."""
    f = parse_frame_body("all_gather_into_tensor from /env/site-packages/torch/distributed/distributed_c10d.py:4186")
    assert (f.kind, f.function, f.line, f.library) == ("python", "all_gather_into_tensor", 4186, None)
    assert f.file is not None and f.file.endswith("distributed_c10d.py")
    g = parse_frame_body("0x00007f3c750b0353 in clone () from /lib/x86_64-linux-gnu/libc.so.6")
    assert (g.kind, g.function, g.library, g.file) == ("native", "clone", "/lib/x86_64-linux-gnu/libc.so.6", None)


def test_the_store_barrier_line_alone_is_the_rendezvous(db):
    """c10d's store-based barrier line (torch < 2.1), the only line of a log: the collective's
    wait; a line of the same logger about something else is no wait."""
    text = (REALWORLD / "open-llama/open-llama-47-1.txt").read_text()
    assert triage(analyze(text.splitlines()[0] + "\n", db)).triage.wait == "collective"
    # torch's own line when the same barrier completes (its wording in distributed_c10d.py), in the log's format
    other = ("I0510 07:28:04.417845 139863945226048 distributed_c10d.py:228] Rank 2: Completed store-based "
             "barrier for key:store_based_barrier_key:1 with 8 nodes.\n")
    try:
        snap = analyze(other, db)
    except InputError:
        return  # no known line at all: refused, which is no wait either
    assert triage(snap).triage.wait != "collective"


def test_the_node_summary_says_the_same_wait(db):
    """``--format node`` triages each process itself (``analyze/nodecapture.py``): the timeout line
    of the paste reaches it as it reaches the flat report."""
    text, _expect, wait = read("c10d_socket_timeout_grpo_trl_3157.txt")
    snap = pipeline.analyze(parse_text(text), db, node_summary=True)
    assert snap.node_summary is not None
    assert wait in {g.finding.triage.wait for g in snap.node_summary.triage}
    assert "runs" not in {g.finding.triage.wait for g in snap.node_summary.triage}
