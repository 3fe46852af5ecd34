"""-o onto a FIFO: written once a reader comes, a one-line error when none comes (a plain open()
of a FIFO nobody reads blocks forever, after the whole analysis)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from hanganalyze import output
from hanganalyze.errors import InputError


def test_fifo_without_reader_is_an_error_not_a_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(output, "FIFO_READER_WAIT", 0.3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="nobody reads this FIFO"):
        output.write_output("report\n", fifo)
    assert time.monotonic() - t0 < 5


def test_fifo_with_a_late_reader_gets_the_whole_report(tmp_path, monkeypatch):
    monkeypatch.setattr(output, "FIFO_READER_WAIT", 10.0)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []

    def reader():
        time.sleep(0.3)
        with open(fifo, "rb") as f:
            got.append(f.read())

    th = threading.Thread(target=reader)
    th.start()
    data = "x" * 300_000 + "\n"  # larger than a pipe buffer: the write must block, not fail with EAGAIN
    output.write_output(data, fifo)
    th.join(10)
    assert got == [data.encode()]
