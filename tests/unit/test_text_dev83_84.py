"""Fixes from open development rounds 83/84 (manifest-blind83/84.yaml), each on the round's real paste
and a near miss: TensorFlow Hub's wait for another process's download of a module (its lock file),
TensorFlow's stack trace handler's "*** Received signal 11 ***" and the crashed thread's blame under
the signal trampoline (not in the handler that printed the stack)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.analyze import crashframes
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Frame


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_tensorflow_hubs_wait_for_another_download_is_a_lock_file(db):
    text = real_text("hub/hub-55-1.txt")
    snap, wait = text_verdict(text, db)
    assert "stale-file-lock" in sigs(snap) and wait == "file-lock"
    # near miss: the module's own download (no other process's lock)
    near = text.replace("already being downloaded by", "downloaded to").replace(". Waiting.", ".")
    with pytest.raises(InputError):  # a plain INFO log: nothing a hang leaves
        text_verdict(near, db)


def test_tensorflows_received_signal_is_a_crash_blamed_under_the_trampoline(db):
    text = real_text("deeplabcut/deeplabcut-1970-1.txt")
    snap, wait = text_verdict(text, db)
    tri = [f for f in snap.findings if f.signature == "triage"][0]
    assert wait == "crashed" and "blame frame: MPSSetResourcesOnCommandEncoder" in tri.summary
    # near miss: the same stack without the handler's line and frames is no crash said
    near = "\n".join(x for x in text.splitlines() if "Received signal" not in x)
    assert text_verdict(near, db)[1] != "crashed"


def test_below_handler_finds_the_interrupted_frame():
    fs = [Frame(kind="native", function=n) for n in ("Handler", "_sigtramp", "fault_here", "main")]
    assert crashframes.below_handler(fs) == 2
    assert crashframes.below_handler([Frame(kind="native", function=n) for n in ("a", "b")]) == 0  # no trampoline


def test_a_tls_handshake_on_a_socket_with_no_timeout(db):
    """simple-websocket-server#13: the server's accept wraps each socket in TLS; do_handshake waits for a
    client that never completes it (the reporter's own signal handler printed the stack above it)."""
    text = real_text("simple-websocket-server/simple-websocket-server-13-1.txt")
    snap, wait = text_verdict(text, db)
    assert "network-read-no-timeout" in sigs(snap) and wait == "network"
    # near miss: the same server past its handshake, reading the peer's certificate (no wait)
    near = text.replace("self.do_handshake()", "self.getpeercert()").replace(
        "line 305, in do_handshake", "line 305, in getpeercert").replace("self._sslobj.do_handshake()",
                                                                           "self._sslobj.getpeercert()")
    assert near != text and "network-read-no-timeout" not in sigs(text_verdict(near, db)[0])


def test_a_recursion_error_swallowed_until_cpython_aborts(db):
    """watchtower#93: botocore's DEBUG records re-enter the CloudWatch handler, which swallows the
    RecursionError; CPython aborts with 'Cannot recover from stack overflow'."""
    text = real_text("watchtower/watchtower-93-1.txt")
    assert "stack-overflow-recursion" in sigs(text_verdict(text, db)[0])
    near = text.replace("Fatal Python error: Cannot recover from stack overflow.", "Fatal Python error: Aborted")
    assert near != text and "stack-overflow-recursion" not in sigs(text_verdict(near, db)[0])
