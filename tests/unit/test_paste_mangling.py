"""The same answer whatever way a paste was wrapped (issue 32): real corpus texts of different
producers (gdb, py-spy, faulthandler, a traceback, pystack, lldb, a glog log, a torchrun log),
each mangled the ways issue threads mangle pastes (``scripts/paste_sweep.py``'s ``MANGLINGS``:
backticks, quotes, line numbers, timestamps, launcher and collector prefixes, CRLF, entities,
no-break spaces, indentation as tabs, a terminal's cut at 80/120 columns, combinations), give the clean text's wait and
labelled bug and no confident finding it did not have.  Near misses: the first column that is data
(a macOS crash report's frame numbers, gdb's ``#N``), a log whose glog timestamps a rule reads, a
bracket that belongs to the record, a line of a usual width that no terminal cut."""

from __future__ import annotations

import importlib.util
from typing import Dict

import pytest
from helpers import REPO

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.common import clean_and_join

CORPUS = REPO / "tests" / "data" / "realworld"

_spec = importlib.util.spec_from_file_location("paste_sweep", REPO / "scripts" / "paste_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)  # type: ignore[union-attr]

#: corpus text -> its labelled bug (manifest ``expect``); one per producer.
TEXTS: Dict[str, str] = {
    "pytorch/pytorch-130610-1.txt": "fork-child-inherited-lock",  # gdb bt
    "deepspeed/deepspeedexamples-302-1.txt": "stale-file-lock",  # py-spy dump
    "pytest/pytest-13137-1.txt": "mp-queue-join-before-drain",  # faulthandler
    "pytorch/pytorch-26072-1.txt": "dataloader-shutdown-hang",  # Python traceback
    "threadpoolctl/threadpoolctl-239-1.txt": "loader-lock-gil-inversion",  # pystack --native
    "lieer/lieer-150-1.txt": "network-read-no-timeout",  # lldb
    "greenlet/greenlet-325-1.txt": "python-api-without-gil",  # gdb, a tab in a line
    "ray/ray-31729-1.txt": "grpc-fork-handler-thread-pool-wait",  # glog log: its timestamps are the evidence
    "llamafactory/llamafactory-6269-1.txt": "pgnccl-collective-timeout",  # torchrun log, [rankN]: prefixes
}


@pytest.fixture(scope="module")
def clean(db):
    out = {}
    for name in TEXTS:
        got = sweep.analyze_text((CORPUS / name).read_text(), ".txt", None, db)
        assert not got["refused"] and TEXTS[name] in got["sigs"] and got["wait"], name
        out[name] = got
    return out


@pytest.mark.parametrize("mangling", sorted(sweep.MANGLINGS))
def test_every_mangling_gives_the_clean_answer(mangling, db, clean):
    changed = 0
    for name, expect in TEXTS.items():
        text = (CORPUS / name).read_text()
        mangled = sweep.MANGLINGS[mangling](text)
        changed += mangled != text
        got = sweep.analyze_text(mangled, ".txt", None, db)
        diff = sweep.compare(clean[name], got, expect)
        assert not got["refused"], (name, got["refused"])
        assert got["wait"] == clean[name]["wait"], name
        assert expect in got["sigs"], name
        assert not diff["added"], (name, diff["added"])
    assert changed >= 1  # the mangling did something to these texts (tabs, long lines: not to all)


def test_the_sweep_counts_a_difference():
    """``compare`` says what changed: a refusal, another wait, the bug lost, a confident addition."""
    base = {"refused": None, "wait": "lock", "sigs": ["a", "triage"], "confident": ["a"]}
    assert sweep.compare(base, dict(base), "a") == {"refused": False, "wait": False, "expect": False, "added": []}
    other = {"refused": None, "wait": "runs", "sigs": ["b", "triage"], "confident": ["b"]}
    assert sweep.compare(base, other, "a") == {"refused": False, "wait": True, "expect": True, "added": ["b"]}
    assert sweep.compare(base, {"refused": "InputError: x"}, "a")["refused"] is True


# ---- near misses: what looks like a wrapper and is not -------------------------------------------


def _threads(text: str):
    return [[(f.function, f.file, f.line, f.library) for f in t.frames] for p in parse_text(text).processes
            for t in p.threads]


def test_macos_frame_numbers_count_up_and_stay():
    """A macOS crash report's first column (``0   libsystem_kernel.dylib``) counts up like line
    numbers: it is the format's own, so it stays, and line numbers around it go."""
    text = (CORPUS / "bleak" / "bleak-1266-1.txt").read_text()
    frames = _threads(text)
    assert frames and len(frames[0]) >= 10
    assert _threads(sweep.MANGLINGS["lineno"](text)) == frames
    assert _threads(sweep.MANGLINGS["timestamp"](text)) == frames


def test_gdb_frame_numbers_are_not_line_numbers():
    """``#0``, ``#1``... count up too; the frames keep their order and their numbers' meaning."""
    text = (CORPUS / "pytorch" / "pytorch-130610-1.txt").read_text()
    frames = _threads(text)
    assert frames and all(frames)
    for name in ("lineno", "lineno_colon", "backticks", "quote2", "srun"):
        assert _threads(sweep.MANGLINGS[name](text)) == frames, name


def test_pyspy_indentation_survives_numbers_with_blanks():
    """``12 `` then py-spy's own four-space indentation: only the numberer's blank goes."""
    text = (CORPUS / "deepspeed" / "deepspeedexamples-302-1.txt").read_text()
    assert _threads(sweep.MANGLINGS["lineno"](text)) == _threads(text)


def test_glog_timestamps_reach_the_rules():
    """A glog log keeps its records' time and thread id under a wrapper that goes (line numbers,
    srun's tag): the gRPC fork rule reads them (one thread, several periods)."""
    text = (CORPUS / "ray" / "ray-31729-1.txt").read_text()
    for name in ("lineno", "srun", "compose", "quote"):
        msgs = [m for p in parse_text(sweep.MANGLINGS[name](text)).processes for m in p.messages]
        assert msgs and all(m.startswith("E0118 11:40:") for m in msgs), name
        assert len(msgs) == len([x for x in text.splitlines() if x.strip()]), name  # no record joined to another


def test_a_plain_log_keeps_its_timestamps():
    text = ("2025-01-03 12:00:01,123 ERROR [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600064 milliseconds before timing out.\n"
            "2025-01-03 12:00:02,001 INFO some other line\n")
    msgs = parse_text(text).processes[0].messages
    assert msgs[0].startswith("2025-01-03 12:00:01,123")


def test_a_bracket_of_the_record_is_no_timestamp_wrapper():
    """sglang's ``[2025-03-09 00:57:15 TP4]``: the bracket closes after the rank, so it is the
    record's, not a ``[date]`` wrapper to cut in half."""
    lines = ["[2025-03-09 00:57:15 TP4] Watchdog timeout (self.watchdog_timeout=300)",
             "[2025-03-09 00:57:20 TP4] Decode batch. #running-req: 3"]
    assert parse_text("\n".join(lines) + "\n").processes[0].messages[0] == lines[0]


def test_a_line_of_a_usual_width_is_cut_only_inside_a_word():
    """One line exactly 100 wide (py-spy's ``Process`` line) followed by a line of its own: no
    terminal cut it.  A piece that goes on inside a word at 80 is joined, its blank kept."""
    head = "Process 10719: /root/.pyenv/versions/3.11.7/bin/python3.11 /work/main/tests/fixtures/txt_deadlock.py"
    assert len(head) == 100
    assert clean_and_join(head + "\nPython v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)\n")[0] == head
    long = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:72] Timed out waiting"
    cut = long[:80] + "\n" + long[80:] + "\n"
    assert clean_and_join(cut)[0] == long
    spaced = "x" * 79 + " " + "next words"
    three_cut = spaced[:80] + "\n" + spaced[80:] + "\nX\n" + "y" * 80 + "\nz\n" + "w" * 80 + "\nv\n"
    assert clean_and_join(three_cut)[0] == spaced  # the blank the cut fell after is kept


def test_entities_and_no_break_spaces_are_decoded():
    text = (CORPUS / "pytorch" / "pytorch-26072-1.txt").read_text()
    assert "<" in text or '"' in text
    assert _threads(sweep.MANGLINGS["entities"](text)) == _threads(text)
    assert _threads(sweep.MANGLINGS["nbsp"](text)) == _threads(text)


# --- a py-spy dump whose indentation a rendered page dropped ------------------------------------

def test_a_pyspy_dump_copied_flush_left_keeps_its_frames(db):
    text = (CORPUS / "pytorch/pytorch-87995-1.txt").read_text()
    flush = "\n".join(x.lstrip() for x in text.split("\n"))
    assert sweep.analyze_text(flush, ".txt", None, db)["wait"] == sweep.analyze_text(text, ".txt", None, db)["wait"]
    threads = parse_text(flush).processes[0].threads
    assert threads[0].frames[0].function == "wait" and threads[0].frames[1].function == "get"


def test_prose_under_a_pyspy_thread_header_is_no_frame():
    text = ('Thread 0x7FA6E7C01740 (idle): "MainThread"\n'
            "it stops here (see the screenshot)\n"
            "and the GPU stays at 100% (nvidia-smi)\n"
            "    wait (threading.py:302)\n")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames] == ["wait"]


def test_a_lone_gdb_bt_beside_a_pyspy_dump_is_still_the_selected_thread(db):
    # returnn-1811: py-spy's MainThread, then gdb's `bt` of it cut inside libcuda: a host thread in the
    # driver (gdb's selected thread), whatever other tool's named threads the paste holds
    text = (CORPUS / "returnn/returnn-1811-1.txt").read_text()
    assert len(parse_text(text).processes[0].threads) == 2
    assert sweep.analyze_text(text, ".txt", None, db)["wait"] == "gpu"
    # two anonymous stacks: no lone bt, so cut driver frames are no host thread's for sure
    gdb = text[text.index("`gdb`:"):]
    assert sweep.analyze_text(gdb + "\n\n" + gdb.replace("`gdb`:", ""), ".txt", None, db)["wait"] != "gpu"


def test_blank_lines_between_a_dumps_threads_are_kept():
    # faulthandler's and gdb's blank lines between threads: their lines follow each other, no double spacing
    from hanganalyze.acquire.text.common import _single_spaced, clean_lines
    for name in ("pytest/pytest-13137-1.txt", "pytorch/pytorch-130610-1.txt"):
        text = (CORPUS / name).read_text()
        assert "" in clean_lines(text) and _single_spaced(clean_lines(text)) is None
        doubled = clean_lines("\n\n".join(text.split("\n")))
        assert [x for x in doubled if x] == [x for x in clean_lines(text) if x]


def test_a_margined_stack_between_sentences_keeps_its_wait(db):
    # kafka-python-2077: a stack printer's " : " margin, the sentences above and below it
    text = (CORPUS / "kafka-python/kafka-python-2077-1.txt").read_text()
    assert sweep.analyze_text(sweep.MANGLINGS["prose"](text), ".txt", None, db)["wait"] == "lock"
    from hanganalyze.acquire.text.gutter import strip_gutter
    short = ["It hangs here:", "", " : a", " : b", " : c", "", "Thanks"]
    assert strip_gutter(short) is None  # three margined lines among prose: no column for sure
    assert strip_gutter(short[2:5]) == ["a", "b", "c"]  # the same three alone: every line has it
