"""The MI reader of the gdb driver, against a real gdb: result records by token (also when
commands are queued ahead), gdb's own error text, and c-string unescaping."""

from __future__ import annotations

import shutil

import pytest
from hanganalyze.acquire.gdbdriver import GdbSession, c_string
from hanganalyze.errors import GdbError

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


def test_c_string_escapes():
    assert c_string(b'"a\\tb\\n"') == "a\tb\n"
    assert c_string(b'"say \\"hi\\" \\\\ done"') == 'say "hi" \\ done'
    assert c_string(b'"caf\\303\\251"') == "caf\u00e9"  # UTF-8 bytes as octal escapes
    assert c_string(b'"\\377"') == "\ufffd"


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
