"""Fixes from open dev round 59 (manifest-blind59.yaml, crashes by less common producers), each on the
round's real paste and a near miss: the kernel's segfault line (dmesg, journalctl -k); compute-sanitizer's
(cuda-memcheck's) invalid access of a kernel; UBSan's runtime error (a report, no crash); systemd-coredump
rows under one thread header of a chunk cut above it."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return {f.signature: f.confidence for f in snap.findings}


@pytest.mark.parametrize("path", ["i2pd/i2pd-1589-1.txt", "nav/nav-4066-1.txt"])
def test_the_kernels_segfault_line(db, path):
    text = real_text(path)
    assert ": segfault at " in text
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the kernel's line about a process the OOM killer chose is no fault (and none other is known)
    with pytest.raises(InputError):
        parse_text("[228730.193809] QThread[176253]: started at 70 ip 000055f832cd23af\n")


@pytest.mark.parametrize("path,expect", [("hecbench/hecbench-112-1.txt", "cuda-illegal-memory-access"),
                                         ("quicksilver/quicksilver-48-1.txt", None)])
def test_compute_sanitizers_invalid_access(db, path, expect):
    text = real_text(path)
    snap, wait = text_verdict(text, db)
    assert wait == "crashed" and sigs(snap).get("cuda-illegal-memory-access") == 0.7
    # near miss: the sanitizer's summary of a clean run
    with pytest.raises(InputError):
        parse_text("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n")


def test_ubsans_runtime_error_is_read_not_a_crash(db):
    text = real_text("cpython/cpython-127563-1.txt")
    assert text_verdict(text, db)[1] != "crashed"
    # near miss: a compiler's warning line (file:line:col, no runtime error) is no known line
    with pytest.raises(InputError):
        parse_text("Objects/dictobject.c:2015:40: warning: unused variable 'x'\n")


def test_coredump_rows_cut_above_their_header(db):
    text = real_text("core/core-19789-1.txt")
    snap, wait = text_verdict(text, db)
    assert any("coredump" in n or "systemd" in n for p in snap.processes for n in p.notes)
    assert wait == "crashed"
    # near miss: gdb's own rows (``in`` before the function) are gdb's, not the journal's
    gdb = "#0  0x00007f609a605436 in do_futex_wait () from /lib/libpthread.so.0\n" \
          "#1  0x00007f609a605538 in __new_sem_wait_slow () from /lib/libpthread.so.0\n" \
          "#2  0x00007f609a1b7939 in PyThread_acquire_lock_timed () from /lib/libpython3.7m.so.1.0\n"
    assert text_verdict(gdb, db)[1] == "lock"
