"""Fixes from open development rounds 87/88 (manifest-blind87/88.yaml), each on the round's real paste
and a near miss: a paster's ``<-- note`` beside a frame, Python 2's py-bt marker over a built-in lock
acquire, a child's output pipe read as the queue-or-pipe wait, a column of bare native names, a SIGILL
in a function named for a CPU extension, NCCL 2.0-2.3's records without the word NCCL."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def sigs(snap):
    return [f.signature for f in snap.findings]


def test_a_pasters_arrow_note_beside_a_py_spy_frame_is_not_part_of_it(db):
    text = real_text("airflow/airflow-70690-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert frames[0].function == "__enter__" and frames[1].function == "get"
    assert text_verdict(text, db)[1] == "lock"


def test_py2_py_bt_marker_over_a_built_in_lock_acquire_is_the_lock_not_the_gil(db):
    text = real_text("tqdm/tqdm-627-1.txt")
    assert text_verdict(text, db)[1] == "join"  # the lock is threading's join's
    # near miss: the same marker over a Python 3 stack is read from take_gil: the GIL
    near = text.replace("python2.7", "python3.8")
    assert near != text and text_verdict(near, db)[1] == "gil"


def test_a_childs_output_pipe_is_the_queue_or_pipe_wait(db):
    assert text_verdict(real_text("clusterfuzz-tools/clusterfuzz-tools-278-1.txt"), db)[1] == "queue"


def test_a_column_of_bare_native_names_is_a_stack(db):
    text = real_text("cpython/cpython-148953-1.txt")
    frames = parse_text(text).processes[0].threads[0].frames
    assert [f.function for f in frames[:2]] == ["do_futex_wait", "__new_sem_wait_slow"]
    assert text_verdict(text, db)[1] == "lock"


def test_a_column_of_words_is_no_stack():
    with pytest.raises(InputError):  # near miss: package names, no name only a stack holds
        parse_text("numpy_base\nscipy_extra\ntorch_vision\npandas_io\nrequests_oauth\n")


def test_sigill_in_a_function_named_for_a_cpu_extension(db):
    text = real_text("pytorch/pytorch-22338-1.txt")
    assert "cpu-instruction-set-unsupported" in sigs(text_verdict(text, db)[0])
    # near miss: a SIGILL in a function whose name says no instruction set (pytorch-15010's mkldnn)
    near = real_text("pytorch/pytorch-15010-1.txt")
    assert "cpu-instruction-set-unsupported" not in sigs(text_verdict(near, db)[0])


def test_old_nccl_records_without_the_word_nccl_are_known_lines(db):
    text = real_text("nccl-tests/nccl-tests-14-1.txt")
    assert text_verdict(text, db)[0].findings
    with pytest.raises(InputError):
        text_verdict(text.replace(" WARN ", " said "), db)


def test_gloos_buffer_read_timeout_is_the_recv_timeout_and_the_peers_close_its_consequence(db):
    text = real_text("jax/jax-40831-1.txt")
    found = sigs(text_verdict(text, db)[0])
    assert "gloo-recv-timeout" in found and "gloo-peer-connection-closed" not in found
    # near miss: the closed connection alone is the peer's loss
    near = "\n".join(x for x in text.splitlines() if "Read timeout" not in x)
    found = sigs(text_verdict(near, db)[0])
    assert "gloo-peer-connection-closed" in found and "gloo-recv-timeout" not in found


# --------------------------------------------------------------------- open rounds 89/90


def test_the_shells_illegal_instruction_line_with_a_translated_core_dump_note(db):
    text = real_text("tensorflow/tensorflow-18322-1.txt")
    assert "cpu-instruction-set-unsupported" in sigs(text_verdict(text, db)[0])
    with pytest.raises(InputError):  # near miss: the import with no crash line after it
        text_verdict(text.replace("Illegal instruction ( core dumped creato )", ""), db)


def test_a_futures_refusal_whose_words_a_terminal_joined(db):
    text = real_text("more-executors/more-executors-144-1.txt")
    assert "thread-start-at-interpreter-shutdown" in sigs(text_verdict(text, db)[0])
    near = text.replace("cannot schedule new futures afterinterpreter shutdown", "cannot schedule new futures")
    assert near != text and "thread-start-at-interpreter-shutdown" not in sigs(text_verdict(near, db)[0])


def test_another_toolkits_application_subclass_refusing_tks_selector(db):
    text = real_text("lumaviewpro/lumaviewpro-498-1.txt")
    assert "macos-nsapplication-not-its-class" in sigs(text_verdict(text, db)[0])
    near = text.replace("-[SDLApplication macOSVersion]", "-[SDLWindow macOSVersion]")
    assert near != text and "macos-nsapplication-not-its-class" not in sigs(text_verdict(near, db)[0])
