"""The paste sweep's residuals (``scripts/paste_sweep.py``), each fixed by a rule for the mangling:
a real corpus text under the mangling that changed its answer, and a near miss the rule must leave
alone (a line that only looks like the mangling's)."""

from __future__ import annotations

import importlib.util

from helpers import REPO, real_text

from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.common import clean_and_join

_spec = importlib.util.spec_from_file_location("paste_sweep", REPO / "scripts" / "paste_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)  # type: ignore[union-attr]


def _frames(text: str):
    return [[(f.function, f.file, f.line) for f in t.frames] for p in parse_text(text).processes for t in p.threads]


# ---- interleaved Ctrl-C tracebacks (spinalcordtoolbox-618) ----------------------------------------

SCT = "spinalcordtoolbox/spinalcordtoolbox-618-1.txt"


def test_interleaved_headerless_tracebacks_are_all_read(db):
    """Pool workers interrupted together print their tracebacks into one terminal in turn, and the
    paste has no ``Traceback`` header: every block after a ``KeyboardInterrupt`` is read, so the
    worker waiting in the task queue's ``get`` is there whatever way the paste was wrapped."""
    text = real_text(SCT)
    frames = _frames(text)
    assert len(frames) == 3
    assert [f[0] for f in frames[2]] == ["get", "worker", "run"]  # innermost first
    assert all(f[0] == "get" for f in frames[1])
    clean = sweep.analyze_text(text, ".txt", None, db)
    assert clean["wait"] == "queue"
    for name in ("lineno", "backticks", "timestamp", "wrap80", "srun"):
        assert _frames(sweep.MANGLINGS[name](text)) == frames, name
        assert sweep.analyze_text(sweep.MANGLINGS[name](text), ".txt", None, db)["wait"] == "queue", name


def test_a_file_line_after_a_headed_traceback_stays_a_message():
    """Near miss: a ``File`` line logged after a whole traceback (its header, its exception) opens
    no block of its own; only headerless blocks follow one another that way."""
    text = ("Traceback (most recent call last):\n"
            '  File "/app/main.py", line 10, in <module>\n'
            "    main()\n"
            "ValueError: bad\n"
            'retrying after  File "/app/main.py", line 10, in <module>\n'
            '  File "/app/other.py", line 3, in helper\n')
    procs = parse_text(text).processes
    assert [len(t.frames) for p in procs for t in p.threads] == [1]
    assert any("other.py" in m for m in procs[0].messages)


def test_one_line_repeated_at_an_odd_width_is_no_terminal_width():
    """The same full-width line three times (one frame in several interleaved tracebacks) at 91
    columns is no cut: the line under it (``KeyboardInterrupt``) stays a line of its own."""
    lines = clean_and_join(real_text(SCT))
    assert "KeyboardInterrupt" in lines
    assert not any(x.endswith("workerKeyboardInterrupt") for x in lines)


def test_alike_cuts_at_a_usual_width_are_still_joined(db):
    """Near miss: at 80 columns, cuts of lines that share a long path are alike (``[rank0]:   File
    "/mnt/.../torch/``) and are still the terminal's: joined, the labelled bug found."""
    text = real_text("pytorch/pytorch-78061-1.txt")
    mangled = sweep.MANGLINGS["rank0+wrap80"](text)
    cut = [x for x in mangled.split("\n") if len(x) == 80]
    assert len(cut) >= 3 and len(set(cut)) < 3
    assert "python-api-without-gil" in sweep.analyze_text(mangled, ".txt", None, db)["sigs"]


# ---- a terminal's cut at 80/120 columns -------------------------------------------------------------


def test_a_cut_right_before_a_blank_is_joined(db):
    """crazyflie-lib-python-351 at 120 columns: the only long line is cut right before the blank
    between two words (``at interpreter`` + `` shutdown, possibly due to daemon threads``): one
    line again, so the fatal error's message is whole and its rule fires."""
    text = real_text("crazyflie/crazyflie-lib-python-351-1.txt")
    mangled = sweep.MANGLINGS["wrap120"](text)
    assert any(len(x) == 120 and x.endswith("interpreter") for x in mangled.split("\n"))
    assert "daemon-thread-stdio-at-shutdown" in sweep.analyze_text(mangled, ".txt", None, db)["sigs"]


def test_an_indented_line_under_a_full_line_stays_its_own():
    """Near miss: one line exactly 120 wide, then a line indented by two blanks: a line of its own
    (no terminal leaves two blanks at the start of a cut piece), and one that starts with a capital."""
    head = "Fatal Python error: _enter_buffered_busy: could not acquire lock for stdout at shutdown, " + "x" * 31
    assert len(head) == 120
    assert clean_and_join(head + "\n  during the finalization of the interpreter\n")[0] == head
    assert clean_and_join(head + "\n Python runtime state: finalizing\n")[0] == head


def test_a_cut_inside_brackets_the_piece_closes_is_joined(db):
    """nccl-863 at 120 columns: gdb's frame cut inside its argument list (``block=<`` + ``optimized
    out>) at pthread_join_common.c:89``): joined, so the frame keeps its file and line and the
    NCCL abort's join is recognised."""
    text = real_text("nccl/nccl-863-1.txt")
    mangled = sweep.MANGLINGS["wrap120"](text)
    assert any(len(x) == 120 and x.endswith("block=<") for x in mangled.split("\n"))
    assert _frames(mangled) == _frames(text)
    assert _frames(mangled)[0][0][1:] == ("pthread_join_common.c", 89)
    assert "nccl-abort-join-hang" in sweep.analyze_text(mangled, ".txt", None, db)["sigs"]


def test_a_piece_that_opens_its_own_bracket_first_is_not_joined():
    """Near miss: a 120-wide line leaves a parenthesis open, and the next line (a capital, its own
    bracket opened before any closes) is a line of its own."""
    head = "Waiting for the workers to exit (timeout 600 s, then " + "y" * 67
    assert len(head) == 120
    nxt = "Main thread (pid 3) exited)"
    assert clean_and_join(head + "\n" + nxt + "\n")[:2] == [head, nxt]


def test_a_windbg_row_exactly_80_wide_is_no_cut(db):
    """pywin32-649 at 80 columns: ``... ntdll!RtlEnterCriticalSection+0x150`` is a ``kb`` row exactly
    80 wide; the row under it starts a new frame (ChildEBP, RetAddr, arguments) and is not its
    tail.  The rows cut inside their symbol (``pywintypes25!PyWin_AcquireGlobalLoc`` + ``k+0xb``)
    are joined: the same frames, the same wait."""
    text = real_text("pywin32/pywin32-649-1.txt")
    assert any(len(x) == 80 for x in text.split("\n"))
    mangled = sweep.MANGLINGS["wrap80"](text)
    assert _frames(mangled) == _frames(text)
    assert _frames(text)[0][0][0] == "RtlEnterCriticalSection"
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == "lock"


# ---- waits under a collector's timestamp and a trailing backslash -----------------------------------


def test_a_collectors_time_around_a_vllm_record_leaves_it_whole(db):
    """llm-scaler-77: vLLM's ``ERROR 09-06 04:14:11 [core.py:640]`` records under a collector's
    time: the level after the time is the vLLM record's (a date follows it), so the time goes alone
    and vLLM's prefix is taken off next: the same traceback, the same wait."""
    text = real_text("intel-llm-scaler/llm-scaler-77-1.txt")
    frames = _frames(text)
    assert frames and frames[0]
    for name in ("timestamp", "iso", "srun+timestamp"):
        assert _frames(sweep.MANGLINGS[name](text)) == frames, name
        assert sweep.analyze_text(sweep.MANGLINGS[name](text), ".txt", None, db)["wait"] == "queue", name


def test_a_level_of_the_collectors_record_still_goes_with_its_time():
    """Near miss: ``2025-01-03 12:00:00,123 ERROR Traceback ...``: the level is the record's own (no
    vLLM date after it) and goes with the time."""
    from hanganalyze.acquire.text.unwrap import unwrap

    lines = ["2025-01-03 12:00:00,123 ERROR Traceback (most recent call last):",
             '2025-01-03 12:00:00,124 ERROR   File "/app/x.py", line 3, in f',
             "2025-01-03 12:00:00,125 ERROR ValueError: 09-06 12:00:00 is no date"]
    assert unwrap(lines) == ["Traceback (most recent call last):", '  File "/app/x.py", line 3, in f',
                             "ValueError: 09-06 12:00:00 is no date"]


def test_a_known_line_at_a_lines_start_is_read_under_a_collectors_time(db):
    """ray-30566 (``ray stack``'s py-spy failing: ``Process 830:``, ``Error: failed to get os
    threadid``) under a collector's time: those known lines are read at a line's start, so the
    lines go without the time (as the log was), the process splits at its header as before and
    the triage speaks as for the clean text."""
    text = real_text("ray/ray-30566-1.txt")
    clean = parse_text(text)
    assert [p.pid for p in clean.processes] == [None, 830]
    for name in ("timestamp", "iso", "time_brackets", "ray"):
        mangled = sweep.MANGLINGS[name](text)
        assert [p.pid for p in parse_text(mangled).processes] == [None, 830], name
        assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == "runs", name


def test_a_log_whose_known_lines_need_no_start_keeps_its_times():
    """Near miss: the known lines are found anywhere in a line (a fatal error, NCCL's watchdog):
    the timestamps are no obstacle and the log keeps them."""
    text = ("2025-01-03 12:00:01,123 Fatal Python error: Aborted\n"
            "2025-01-03 12:00:01,124 Current thread 0x00007f (most recent call first):\n"
            "2025-01-03 12:00:02,001 the job was restarted\n")
    msgs = [m for p in parse_text(text).processes for m in p.messages]
    assert msgs and all(m.startswith("2025-01-03 12:00:0") for m in msgs)


def test_a_trailing_backslash_goes_before_a_reports_frame_numbers(db):
    """bleak-1266 (a macOS crash report) with `` \\`` after every line: the backslash is taken off
    alone first, so the report's own frame numbers (0, 1, 2... counting up like line numbers) stay
    and the frames are the clean text's."""
    text = real_text("bleak/bleak-1266-1.txt")
    mangled = sweep.MANGLINGS["continuation"](text)
    assert _frames(mangled) == _frames(text)
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == sweep.analyze_text(text, ".txt", None, db)["wait"]


def test_padded_lines_each_ending_in_a_backslash_are_not_joined(db):
    """microprofile-19: gdb's lines padded with blanks to the terminal's width, then `` \\`` on each:
    every line ends in the same blank and backslash, so none is a cut piece of the one above."""
    text = real_text("microprofile/microprofile-19-1.txt")
    mangled = sweep.MANGLINGS["continuation"](text)
    assert not any(" \\ " in x for x in clean_and_join(mangled))
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == sweep.analyze_text(text, ".txt", None, db)["wait"]


def test_a_windows_path_cut_after_its_backslash_is_still_joined():
    """Near miss: a line cut at 80 columns right after a Windows path's ``\\`` (no blank before it)
    is a cut piece: joined with the rest of the path."""
    line = ('  File "C:\\Users\\some\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\site-packages\\torch'
            '\\x.py", line 3, in f')
    cut = [line[i:i + 80] for i in range(0, len(line), 80)]
    assert cut[0].endswith("\\")
    other = ["y" * 79 + "z", "tail one", "w" * 79 + "q", "tail two"]
    assert clean_and_join("\n".join(cut + other) + "\n")[0] == line


# ---- the whole sweep's further residuals ------------------------------------------------------------


def test_the_same_ranks_tag_twice_goes_twice(db):
    """vllm-5484: a log whose traceback already carries torchrun's ``[rank0]: `` tagged again on
    every line (a launcher's log under another launcher or a collector, a time between the two too):
    the rank's lines are the log's own and the traceback is read as in the clean text."""
    text = real_text("vllm/vllm-5484-1.txt")
    frames = _frames(text)
    assert frames and frames[0]
    for name in ("rank0", "default0", "mpirun", "rank0+timestamp"):
        assert _frames(sweep.MANGLINGS[name](text)) == frames, name
        assert sweep.analyze_text(sweep.MANGLINGS[name](text), ".txt", None, db)["wait"] == "runs", name


def test_another_ranks_tag_inside_stays():
    """Near miss: rank 1's tag inside rank 0's is no repeat: it stays on the line."""
    from hanganalyze.acquire.text.common import split_ranks

    segs = split_ranks(["[rank0]: [rank1]: hello", "[rank0]: [rank0]: there"])
    assert [(s.label, s.lines) for s in segs] == [("rank0", ["[rank1]: hello", "there"])]


def test_lines_in_two_pairs_of_backticks_are_unwrapped(db):
    """openblas-1456 and py-spy-565 are pasted with each line in backticks; in backticks again, one
    pair goes per layer and the gdb frames are the clean text's."""
    for name in ("openblas/openblas-1456-1.txt", "py-spy/py-spy-565-1.txt"):
        text = real_text(name)
        for m in ("backticks", "quote+backticks"):
            mangled = sweep.MANGLINGS[m](text)
            assert "``" in mangled
            assert _frames(mangled) == _frames(text), (name, m)


def test_a_fence_is_no_pair_of_backticks():
    """Near miss: a fence's three backticks around each line are no inline code to take off."""
    from hanganalyze.acquire.text.unwrap import unwrap_layers

    assert unwrap_layers(["```#0  0x1 in f () at x.c:1```", "```#1  0x2 in g () at y.c:2```"]) == []


def test_a_pager_prompt_under_a_prefix_is_a_line_of_its_own(db):
    """pytorch-60158 (gdb with its pager prompt on a line of its own) tagged ``[rank0]: `` and cut at
    80 columns: the prompt under the tag goes alone and the next frame is not glued to the tag, so
    the cut lines are the terminal's width again and the frames are the clean text's."""
    text = real_text("pytorch/pytorch-60158-1.txt")
    mangled = sweep.MANGLINGS["rank0+wrap80"](text)
    assert "[rank0]: --Type <RET> for more" in mangled
    assert _frames(mangled) == _frames(text)


def test_a_pager_prompt_inside_a_line_still_joins_its_halves():
    """Near miss: gdb's prompt in the middle of a frame (``private=--Type <RET>...``): the line goes
    on below the prompt and the halves are one line again."""
    text = ("#1  0x1 in f (a=1, private=--Type <RET> for more, q to quit, c to continue without paging--\n"
            "private@entry=0) at x.c:139\n#2  0x2 in main () at x.c:200\n")
    assert clean_and_join(text)[0] == "#1  0x1 in f (a=1, private=private@entry=0) at x.c:139"


def test_a_bracketed_token_after_blanks_at_the_width_goes_on(db):
    """offlineimap-633 (a macOS sample) at 120 columns: the one long line is cut after its blanks and
    the piece is its ``[0x7fff5ffe8866]`` address alone: joined, the wait in ``__psynch_cvwait`` kept."""
    text = real_text("offlineimap/offlineimap-633-1.txt")
    mangled = sweep.MANGLINGS["wrap120"](text)
    assert "[0x7fff5ffe8866]" in mangled.split("\n")
    assert _frames(mangled) == _frames(text)
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == "condition"


def test_a_bracketed_line_of_its_own_after_one_blank_stays():
    """Near miss: a 120-wide line ending in one blank, then a bracketed line with blanks inside
    (a program's own remark): a line of its own."""
    head = "Thread 1 (Thread 0x7f4ae2bc4740 (LWP 21048)) stopped in the middle of its work, waiting for "
    head += "x" * 27 + " "
    assert len(head) == 120
    assert clean_and_join(head + "\n[the job was restarted at step 3]\n")[:2] == [
        head.rstrip(), "[the job was restarted at step 3]"]


def test_pieces_tagged_after_the_cut_are_joined_under_their_rank(db):
    """tribler-2842, xpra-148, nccl-147: cut at 80 columns and then tagged ``[rank0]: `` line by line
    (each piece under the tag too): a full line and the same rank's next piece are joined where the
    blanks at the cut are still known, as an untagged cut is."""
    for name in ("tribler/tribler-2842-1.txt", "xpra/xpra-148-1.txt", "nccl/nccl-147-1.txt"):
        text = real_text(name)
        mangled = sweep.MANGLINGS["wrap80+rank0"](text)
        got = sweep.analyze_text(mangled, ".txt", None, db)
        clean = sweep.analyze_text(text, ".txt", None, db)
        assert not got["refused"] and got["wait"] == clean["wait"], name
        assert set(clean["sigs"]) <= set(got["sigs"]), name


def test_another_ranks_piece_is_not_joined():
    """Near miss: a full-width line of rank 0, then rank 1's line: two ranks, two lines."""
    rows = ["[rank0]: " + "a" * 70 + "%d" % i for i in range(3)]
    lines = clean_and_join("\n".join([rows[0], "[rank1]: tail of its own", rows[1], "[rank0]: cut", rows[2]]) + "\n")
    assert lines[:2] == [rows[0], "[rank1]: tail of its own"]
    assert lines[2] == rows[1] + "cut"


def test_a_weak_frame_under_a_time_inside_a_ranks_tag_is_read(db):
    """libjuju-295 (a pytest report whose one frame line is too weak for a score) under a time inside
    torchrun's tag: the rank's lines without the time are looked at too, so it is not refused."""
    text = real_text("libjuju/python-libjuju-295-1.txt")
    mangled = sweep.MANGLINGS["rank0+timestamp"](text)
    got = sweep.analyze_text(mangled, ".txt", None, db)
    assert not got["refused"]
    assert got["wait"] == sweep.analyze_text(text, ".txt", None, db)["wait"]


def test_a_cut_inside_a_run_of_blanks_joins_the_next_column(db):
    """grpc-32163 (glog records padded with blanks) tagged and cut at 80: the cut falls inside the
    padding, and the message (``Waiting for thread pool...``, a capital) is that record's next column."""
    text = real_text("grpc/grpc-32163-1.txt")
    mangled = sweep.MANGLINGS["rank0+wrap80"](text)
    assert "grpc-fork-handler-thread-pool-wait" in sweep.analyze_text(mangled, ".txt", None, db)["sigs"]


def test_a_capital_after_one_blank_at_the_width_is_its_own_line():
    """Near miss: one blank at a usual width's end, then a capital: a line of its own (a program's
    line ending in a blank, then its next line)."""
    head = "Loading the checkpoint shards from the local cache directory, this may take a " + "while" + " "
    head = head + "x" * (120 - len(head) - 1) + " "
    assert len(head) == 120
    assert clean_and_join(head + "\nLoaded 4 shards\n")[:2] == [head.rstrip(), "Loaded 4 shards"]


# ---- the manglings added to the sweep: a code block's indent, a cut inside a collector's tag ------


def test_quote_markers_under_a_code_blocks_indent_are_no_error():
    """xpra-148 (every line quoted ``> ``) indented by four blanks (a Markdown code block): the
    markers sit deeper than a quote's three blanks; the indent goes, then the quotes, and the
    frames are the clean text's (it raised ValueError before)."""
    text = real_text("xpra/xpra-148-1.txt")
    assert _frames(sweep.MANGLINGS["indent4"](text)) == _frames(text)


def test_a_quote_under_three_blanks_still_goes():
    """Near miss: ``   > `` (three blanks, then the marker) is a quote and is taken off."""
    from hanganalyze.acquire.text.common import strip_quotes

    assert strip_quotes(["   > #0  0x1 in f ()", "   > #1  0x2 in g ()"]) == ["#0  0x1 in f ()", "#1  0x2 in g ()"]


def test_a_cut_then_tagged_by_srun_is_joined_inside_the_tag(db):
    """A program's output cut at 120 columns (rich's console writing to a pipe) and then tagged
    ``0: `` by srun, each piece too: the width is read inside the tag (123 = 120 and the tag), and
    the pieces are judged without it, so the labelled bug is found as in the clean text."""
    for name, expect in (("crazyflie/crazyflie-lib-python-351-1.txt", "daemon-thread-stdio-at-shutdown"),
                         ("nccl/nccl-863-1.txt", "nccl-abort-join-hang"),
                         ("pytorch/pytorch-130610-1.txt", "fork-child-inherited-lock")):
        mangled = sweep.MANGLINGS["wrap120+srun"](real_text(name))
        assert expect in sweep.analyze_text(mangled, ".txt", None, db)["sigs"], name


def test_a_tagged_full_line_before_a_new_tagged_frame_stays(db):
    """Near miss: py-spy-565 (each line in backticks) tagged ``0: `` and cut at 80: the frame line
    ``0: `#1 ... waitpid.c:6``` is exactly 80 wide and the next tagged line starts a new backticked
    frame (the same wrapper inside the same tag): no cut, the frames are the clean text's."""
    text = real_text("py-spy/py-spy-565-1.txt")
    mangled = sweep.MANGLINGS["srun+wrap80"](text)
    assert any(len(x) == 80 and x.endswith("waitpid.c:6`") for x in mangled.split("\n"))
    assert _frames(mangled) == _frames(text)


def test_a_lone_closing_backtick_and_a_cut_after_a_colon_are_tails(db):
    """openblas-1456 (each line in backticks) at 100 columns: two lines cut, one right before its
    closing backtick (the piece is a lone "`"), one after ``team.c:`` (the piece is ``122```): both
    tails, so the gdb frames are the clean text's."""
    text = real_text("openblas/openblas-1456-1.txt")
    mangled = sweep.MANGLINGS["wrap100"](text)
    assert "`" in mangled.split("\n") and "122`" in mangled.split("\n")
    assert _frames(mangled) == _frames(text)


def test_a_new_backticked_line_and_an_address_after_a_colon_stay():
    """Near misses: a line of 100 in backticks, then another backticked line; a line of 100 ending
    in a colon, then an address (``0x7f...``: a value of its own, no line number)."""
    a = "`" + "a" * 98 + "`"
    assert clean_and_join(a + "\n`next line`\n")[:2] == [a, "`next line`"]
    b = "Thread 1 waits on the lock at address:" + " " + "z" * 60 + ":"
    assert len(b) == 100
    assert clean_and_join(b + "\n0x7f4ae24f76b0 is held by thread 2\n")[:2] == [b, "0x7f4ae24f76b0 is held by thread 2"]


def test_a_pager_prompt_under_a_time_is_a_line_of_its_own(db):
    """pytorch-60158 timestamped line by line and cut at 120: the pager prompt's line carries its own
    time (digits differ from the next line's): still a line of its own, no frame glued to a time."""
    text = real_text("pytorch/pytorch-60158-1.txt")
    mangled = sweep.MANGLINGS["timestamp+wrap120"](text)
    assert not sweep.analyze_text(mangled, ".txt", None, db)["refused"]
    assert not any(x.count("2025-01-03") > 1 for x in clean_and_join(mangled))


def test_a_boxs_right_edge_alone_is_a_cut_tail(db):
    """deepdewedge-20 (rich's box-drawn traceback) tagged ``0: `` and cut at 80: the pieces are the
    box's right edge (``  │``): tails of their box lines, so the traceback is read and the
    rendezvous hang is found as in the clean text."""
    text = real_text("deepdewedge/deepdewedge-20-1.txt")
    mangled = sweep.MANGLINGS["srun+wrap80"](text)
    assert "  │" in mangled.split("\n")
    assert "c10d-store-rendezvous-hang" in sweep.analyze_text(mangled, ".txt", None, db)["sigs"]


def test_a_whole_box_line_after_a_full_line_stays():
    """Near miss: a box line with its content (``│ x │``) under a full-width line is a line of the box."""
    rows = ["│ " + "%d" % i * 76 + " │" for i in range(3)]
    assert clean_and_join("\n".join(rows) + "\n")[:3] == rows


def test_a_cut_before_the_blank_after_a_closing_quote_is_joined(db):
    """jax-22740 (an XLA log line) tagged by Ray and cut at 120: the second cut falls right before the
    blank after a closing backtick (``run_id=724296073``` + `` for 10 seconds and may be stuck``):
    joined, the rendezvous line whole and its wait read."""
    text = real_text("jax/jax-22740-1.txt")
    mangled = sweep.MANGLINGS["ray+wrap120"](text)
    assert any(x.startswith(" for 10 seconds") for x in mangled.split("\n"))
    assert sweep.analyze_text(mangled, ".txt", None, db)["wait"] == "collective"


def test_a_capital_after_a_closing_quote_at_the_width_stays():
    """Near miss: after a closing quote at 120, a blank and a capital: a sentence of its own."""
    head = "The worker printed 'done' and exited with the status the launcher gave it, which then waited for `"
    head += "x" * (119 - len(head)) + "`"
    assert len(head) == 120
    assert clean_and_join(head + "\n The next worker started\n")[:2] == [head, " The next worker started"]


def test_the_sweep_compares_the_answers_wait_with_every_processs():
    """Two processes (``ray stack``'s two workers) read in another order under a rank's tag: the last
    triage finding is the other one, the same waits: no change.  The answer's wait lost (the
    process that waited so is gone) or another wait as the answer: a change."""
    clean = {"refused": None, "wait": "runs", "waits": ["io", "runs"], "sigs": ["triage"], "confident": []}
    assert sweep.compare(clean, dict(clean, wait="io"), None)["wait"] is False
    assert sweep.compare(clean, dict(clean, wait="io", waits=["io"]), None)["wait"] is True
    assert sweep.compare(clean, dict(clean, wait="lock", waits=["io", "lock", "runs"]), None)["wait"] is True
