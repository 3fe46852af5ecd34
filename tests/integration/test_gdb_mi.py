"""The MI reader of the gdb driver, against a real gdb: result records by token (also when
commands are queued ahead), gdb's own error text, and stream records unescaped by pygdbmi."""

from __future__ import annotations

import shutil

import pytest

from hanganalyze.acquire.gdbsession import GdbSession
from hanganalyze.errors import GdbError

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


def test_records_are_parsed_by_pygdbmi_and_notifications_skipped():
    s = GdbSession.__new__(GdbSession)  # the record filing only: no gdb process needed
    s.messages, s._results = [], {}
    s._record(b'~"a\\tb\\n"')
    s._record(b'&"say \\"hi\\" \\\\ done"')
    s._record(b'~"caf\\303\\251"')  # UTF-8 bytes as octal escapes
    s._record(b'=thread-created,id="7",group-id="i1"')  # async: skipped, never a result
    s._record(b'12^error,msg="No symbol \\"x\\" in current context."')
    s._record(b"13^done")
    s._record(b"")
    assert s.messages == ["a\tb\n", 'say "hi" \\ done', "caf\u00e9"]
    assert s._results == {12: ("error", {"msg": 'No symbol "x" in current context.'}), 13: ("done", None)}


def test_queued_commands_answer_in_order_with_their_own_errors(tmp_path):
    s = GdbSession("gdb", 30)
    try:
        bad = s.send("-file-exec-and-symbols %s" % (tmp_path / "missing"))
        echo = s.send_console("echo queued\\n")
        s.started()
        with pytest.raises(GdbError, match=r"gdb failed while loading it: .*No such file or directory"):
            s.wait("loading it", bad)
        kind, _ = s.wait("echoing", echo)
        assert kind == "done"
        assert any("queued" in m for m in s.messages)
        kind, rest = s.mi("version", "-gdb-version")
        assert kind == "done"
        assert any("GNU gdb" in m for m in s.messages)
    finally:
        s.close()
    assert s.proc is None


def _fake(tmp_path, body):
    p = tmp_path / "fake-gdb"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def test_gdb_that_closes_its_output_but_lives_is_an_error_not_a_wait(tmp_path):
    import time

    s = GdbSession(_fake(tmp_path, "exec >&-\nsleep 30\n"), 20)
    t0 = time.monotonic()
    try:
        with pytest.raises(GdbError, match="stopped answering while starting gdb.*closed its output"):
            s.started()
    finally:
        s.close(graceful=False)
    assert time.monotonic() - t0 < 10


def test_closed_stderr_does_not_spin(tmp_path):
    """A wrapper that closes gdb's stderr: stderr is at end of file for the whole session, and
    waiting must not turn into a busy loop on it."""
    import time

    s = GdbSession(_fake(tmp_path, 'exec 2>&-\nsleep 1\nexec %s "$@"\n' % shutil.which("gdb")), 30)
    cpu0 = time.process_time()
    try:
        s.started()
        kind, _ = s.mi("version", "-gdb-version")
        assert kind == "done"
    finally:
        s.close()
    assert time.process_time() - cpu0 < 0.5  # about a second of waiting, not of spinning
