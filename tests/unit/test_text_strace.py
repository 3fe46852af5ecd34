"""strace's output (``strace -p PID``, ``-f``): each thread stands in its last system call; a call
with no result is where it blocks (a futex wait: a lock or a condition variable), a call that
returned again and again is a loop.  Real pastes: awx-4181 (strace's futex wait, then prose),
zlog-246 (strace beside pstack), ray-45822 (two processes' futex waits beside py-spy frames)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def _threads(text):
    return {t.tid: (t.frames[0].function, t.waits.kind if t.waits else None) for p in parse_text(text).processes
            for t in p.threads if any("strace" in n for n in t.notes)}


def test_a_futex_wait_that_never_returned_is_a_lock_wait(db):
    text = real_text("awx/awx-4181-1.txt")
    assert _threads(text) == {9268: ("futex", "futex")}
    assert text_verdict(text, db)[1] == "lock"


def test_each_attached_process_keeps_its_own_call():
    # two `strace -p` runs, each stopped by Ctrl-C inside a futex wait
    assert _threads(real_text("ray/ray-45822-1.txt")) == {4007191: ("futex", "futex"), 4007101: ("futex", "futex")}


def test_follow_forks_output_by_pid(db):
    text = ("strace: Process 700 attached with 3 threads\n"
            "[pid   702] 10:00:01.000100 recvfrom(7,  <unfinished ...>\n"
            "[pid   701] 10:00:01.000200 futex(0x7f00, FUTEX_WAKE_PRIVATE, 1) = 0\n"
            "[pid   700] 10:00:01.000300 wait4(-1,  <unfinished ...>\n"
            "[pid   701] 10:00:01.000400 epoll_wait(4, [], 64, 1000) = 0\n"
            "[pid   701] 10:00:02.000500 epoll_wait(4, [], 64, 1000) = 0\n")
    assert _threads(text) == {702: ("recvfrom", None), 700: ("wait4", None), 701: ("epoll_wait", None)}
    assert text_verdict(text, db)[1] == "child"  # the attached process (700) waits for its child


def test_a_call_resumed_with_its_result_no_longer_blocks():
    text = ("strace: Process 42 attached\n"
            "futex(0x55d0, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY"
            " <unfinished ...>\n"
            "<... futex resumed>)                    = 0\n"
            "write(1, \"ok\\n\", 3)                   = 3\n")
    assert _threads(text) == {42: ("write", None)}


def test_prose_that_names_calls_is_no_strace():
    text = ("I called read(fd) from the worker and it never returned.\n"
            "Then close(fd) in the other thread did not help either.\n")
    with pytest.raises(InputError):
        parse_text(text)
