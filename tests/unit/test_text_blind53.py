"""Fixes from open dev round 53 (manifest-blind53.yaml, crashes), each on the round's real paste and a
near miss: gdb's echo of a core's frame #0 above a ``bt`` cut after its own frame #0; Open MPI's
handler of a fatal signal; a macOS crash report whose copy lost its first character; faulthandler's
illegal instruction on Windows (a code, not words); a hang signature on a thread of a process that
crashed is context, not a hang."""

from __future__ import annotations

from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_gdbs_echo_above_a_bt_cut_after_frame_0(db):
    text = real_text("gentoo/gentoo-16801-1.txt")
    snap, wait = text_verdict(text, db)
    assert len(snap.processes[0].threads) == 1 and wait == "crashed"
    # near miss: a bt whose frame #0 is another function is a second thread (no echo)
    other = text.rstrip("\n").rsplit("\n", 1)[0] + "\n#0  _dl_open (file=0x0) at dl-open.c:500\n"
    assert len(parse_text(other).processes[0].threads) == 2


def test_open_mpis_fatal_signal_handler(db):
    text = real_text("xtuner/xtuner-798-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the handler's lines taken out: the stack alone stands in MPI (a collective's library)
    rest = "\n".join(x for x in text.splitlines() if "Signal" not in x and "Failing at" not in x) + "\n"
    assert text_verdict(rest, db)[1] != "crashed"


def test_a_crash_report_cut_at_its_first_character(db):
    text = real_text("cellprofiler/cellprofiler-1108-1.txt")
    assert text.startswith("hread 0 Crashed::")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed" and snap.processes[0].threads[0].current
    # near miss: a thread of the report that did not crash
    assert text_verdict(text.replace("hread 0 Crashed::", "hread 0::", 1), db)[1] != "crashed"


def test_windows_illegal_instruction_code(db):
    text = real_text("comfyui-llm-session/comfyui-llm-session-9-1.txt")
    assert "code 0xc000001d" in text
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: a COM error faulthandler logs (a handler may take it): no crash on its own
    assert text_verdict(text.replace("code 0xc000001d", "code 0x80010108"), db)[1] != "crashed"


def test_a_hang_signature_in_a_crashed_process_is_context(db):
    text = real_text("jarvis/jarvis-575-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "crashed"
    net = next(f for f in snap.findings if f.signature == "network-read-no-timeout")
    assert net.severity == "info" and "the process crashed" in net.summary
    assert snap.findings[0].signature == "triage"
    # near miss: without the fatal error line the thread's read is the hang
    calm = "\n".join(x for x in text.splitlines() if "Fatal Python error" not in x) + "\n"
    snap, wait = text_verdict(calm, db)
    assert wait != "crashed"
    assert next(f for f in snap.findings if f.signature == "network-read-no-timeout").severity == "hang"
