"""Fixes from open dev round 42 (manifest-blind42.yaml), each on the round's real paste and a near miss:
the lines a process's own end leaves (MPI's fatal error handler, glog's / abseil's and Ray's headers over
a fatal check's stack, Ray's driver on a worker dead of a system error, faulthandler's Windows line cut
at its start, a shell's "Killed"); PyTorch 0.4's THD waiting in its init method's rendezvous."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError


def test_mpis_fatal_error_handler_ends_the_process(db):
    text = real_text("tensorrt-llm/tensorrt-llm-2286-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: MPI's error handler that returns errors (MPI_ERRORS_RETURN) ends nothing: no known line
    calm = text.replace("MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,", "MPI_ERRORS_RETURN (")
    calm = calm.replace("Local abort before MPI_INIT completed completed successfully", "a note")
    with pytest.raises(InputError):
        parse_text(calm)


def test_a_fatal_checks_stack_header_is_a_crash(db):
    text = real_text("xla/xla-6291-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same frames under no failure header are a stack a program printed
    plain = text.replace("*** Check failure stack trace: ***", "stack of the device thread:")
    assert text_verdict(plain, db)[1] != "crashed"


def test_rays_check_and_its_worker_death_line_are_a_crash(db):
    text = real_text("ray/ray-26007-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: Ray's line for a worker that exited on its own (intended exit) is no crash line
    calm = "\n".join(line for line in text.splitlines() if "Check failed" not in line and "***" not in line)
    calm = calm.replace("A worker died or was killed while executing a task by an unexpected system error",
                        "A worker exited as intended")
    with pytest.raises(InputError):
        parse_text(calm)


def test_faulthandlers_windows_line_cut_at_its_start_is_a_crash(db):
    text = real_text("nunif/nunif-494-1.txt")
    assert text.startswith("fatal exception: access violation")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the words inside a sentence are prose, not the handler's line
    prose = text.replace("fatal exception: access violation", "I think a fatal exception: access violation happens")
    assert text_verdict(prose, db)[1] != "crashed"


def test_thds_init_method_rendezvous_is_the_collectives_wait(db):
    text = real_text("pytorch/pytorch-7896-1.txt")
    assert text_verdict(text, db)[1] == "collective"
    # near miss: the same sleep under the program's own function is a sleep
    own = text.replace("thd::init::initFile", "myapp::poll_file").replace("thd::getInitConfig", "myapp::config")
    own = own.replace("THDProcessGroupInit", "myapp_init").replace("thd::DataChannel::newChannel", "myapp::open")
    assert text_verdict(own, db)[1] == "sleep"


def test_a_shells_killed_line_ends_the_process(db):
    text = real_text("sglang/sglang-3752-1.txt")
    assert "\nKilled\n" in text
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: "Killed" inside a line is prose (the same log without the shell's line names no wait)
    prose = text.replace("\nKilled\n", "\nKilled the old server first\n")
    assert text_verdict(prose, db)[1] != "crashed"
