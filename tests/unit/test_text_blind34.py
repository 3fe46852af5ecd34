"""The mechanisms behind the misses of open dev round 34 (manifest-blind34.yaml, scored blind), each on
the round's real paste and a near miss: WinDbg's !analyze (STACK_TEXT rows with their arguments between
colons, the crash bucket), Python logging's ``time - name - LEVEL -`` prefix over a traceback, c10's
note under a CUDA error, vLLM's executor RPC that no worker answered, a socketserver handling a request
(no idle loop), and a signature's context word that is no line a hang leaves."""

from __future__ import annotations

import pytest
from helpers import crash_said, real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_windbg_analyze_rows_and_its_crash_bucket(db):
    text = real_text("sardana/sardana-540-1.txt")
    (t,) = parse_text(text).processes[0].threads
    assert [f.function for f in t.frames] == [None, "BaseThreadInitThunk", "RtlUserThreadStart"]
    assert t.frames[0].library == "python"
    assert text_verdict(text, db)[1] == "crashed"
    hang = text.replace("FAILURE_BUCKET_ID:  BREAKPOINT_80000003_KERNELBASE.dll!WaitForSingleObjectEx",
                        "FAILURE_BUCKET_ID:  APPLICATION_HANG_BusyHang_cfffffff_python.exe!Unknown")
    assert text_verdict(hang, db)[1] != "crashed"  # !analyze -hang's bucket: no crash


def test_a_traceback_under_pythons_logging_prefix_and_a_cuda_errors_note(db):
    text = real_text("ocrflux/ocrflux-70-1.txt")
    frames = [f for p in parse_text(text).processes for t in p.threads for f in t.frames]
    assert any(f.function == "run_mp_engine" for f in frames)
    assert text_verdict(text, db)[1] == "crashed"
    without = "\n".join(x for x in text.split("\n") if "CUDA kernel errors" not in x)
    assert not crash_said(without, db)


def test_the_executors_rpc_timeout_is_the_stuck_worker_class(db):
    text = real_text("vllm/vllm-40926-1.txt")
    assert "vllm-shm-broadcast-reader-stuck" in sigs(text_verdict(text, db)[0])
    faulted = "RuntimeError: CUDA error: an illegal memory access was encountered\n" + text
    assert "vllm-shm-broadcast-reader-stuck" not in sigs(text_verdict(faulted, db)[0])


def test_a_socketserver_handling_a_request_is_no_idle_loop(db):
    assert text_verdict(real_text("bucket-brigade/bucket-brigade-42-1.txt"), db)[1] != "idle"
    waiting = ("Traceback (most recent call last):\n"
               '  File "./server.py", line 81, in start_server\n    server.serve_forever()\n'
               '  File "/usr/lib/python3.6/socketserver.py", line 236, in serve_forever\n'
               "    ready = selector.select(poll_interval)\n"
               '  File "/usr/lib/python3.6/selectors.py", line 376, in select\n'
               "    fd_event_list = self._poll.poll(timeout)\nKeyboardInterrupt\n")
    assert text_verdict(waiting, db)[1] == "idle"


def test_a_signatures_context_word_is_no_known_line():
    # a ps listing of inductor's compile workers: "_inductor" is a signature's context, not a hang's line
    with pytest.raises(InputError):
        parse_text(real_text("openpipe/art-395-1.txt"))
