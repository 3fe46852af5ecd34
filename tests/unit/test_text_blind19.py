"""Open round 19 (ML dumps, manifest-blind19.yaml): the mechanisms behind its misses, each on the
round's real paste and a near miss it must not claim: torch's re-raise of NCCL's ncclRemoteError
(a peer that exited) as a crash of its own class (the raise is no hang), and the survivor's c10 exception raised by
ProcessGroupNCCL's NCCL-error check as the crash it is (read as the collective it left); a host
inside levanter's broadcast through the JAX coordination service's barrier (a traceback cut before
its DEADLINE_EXCEEDED line, read as "runs")."""

from __future__ import annotations

from helpers import real_text, text_verdict

RAISED = "pgnccl-remote-error-raised"
PEER = "nccl-peer-connection-closed"
RENDEZVOUS = "c10d-store-rendezvous-hang"
NCCL_REMOTE = "pytorch/pytorch-150916-1.txt"
LEVANTER = "levanter/levanter-1138-1.txt"
#: Signatures this module tests with a real text and a near miss (test_signature_coverage).
COVERED = [RAISED]


def analyzed(text: str, db):
    snap, wait = text_verdict(text, db)
    return {f.signature: f.confidence for f in snap.findings}, wait


# --- torch's ncclRemoteError: a peer that exited --------------------------------------------------

def test_torchs_ncclremoteerror_is_a_peer_gone_and_the_rank_crashed(db):
    """The survivor's async exception: 'NCCL error: remote process exited or there was a network
    error' with ncclRemoteError's text: torch raised it, so a crash, not the peer-closed hang."""
    found, wait = analyzed(real_text(NCCL_REMOTE), db)
    assert RAISED in found and found[RAISED] < 0.8
    assert PEER not in found
    assert wait == "crashed"


def test_another_nccl_error_is_no_peer_gone(db):
    """An unhandled system error of the same collective names no peer that went away."""
    remote = "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
    system = "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error."
    text = (real_text(NCCL_REMOTE)
            .replace("NCCL error: remote process exited or there was a network error",
                     "NCCL error: unhandled system error")
            .replace(remote, system))
    assert RAISED not in analyzed(text, db)[0]


def test_the_nccl_error_line_alone_says_the_process_crashed(db):
    """The log line without the backtrace: a collective that failed with an NCCL error, not a wait."""
    line = real_text(NCCL_REMOTE).splitlines()[0] + "\n"
    assert analyzed(line, db)[1] == "crashed"


def test_the_backtrace_of_the_nccl_error_check_alone_is_a_crash(db):
    """Without the log lines: c10's exception raised from checkForNCCLErrorsInternal, its
    constructor the only frame, is the thread throwing the error that ends the process."""
    backtrace = "".join(line + "\n" for line in real_text(NCCL_REMOTE).splitlines()[4:])
    assert backtrace.startswith("Exception raised from checkForNCCLErrorsInternal")
    assert analyzed(backtrace, db)[1] == "crashed"


def test_an_exception_raised_elsewhere_in_processgroupnccl_is_no_such_crash(db):
    """The same backtrace raised from another ProcessGroupNCCL function is not the NCCL-error check:
    the text's ProcessGroupNCCL names the collective, as before."""
    backtrace = "".join(line + "\n" for line in real_text(NCCL_REMOTE).splitlines()[4:])
    assert analyzed(backtrace.replace("checkForNCCLErrorsInternal", "allreduce_impl"), db)[1] == "collective"


# --- JAX multi-host: a host inside the coordination service's barrier --------------------------------

def test_levanters_broadcast_through_the_barrier_is_the_rendezvous(db):
    """Frames into multihost_broadcast_sync (client.wait_at_barrier) without the exception line."""
    found, wait = analyzed(real_text(LEVANTER), db)
    assert RENDEZVOUS in found and found[RENDEZVOUS] < 0.8
    assert wait == "collective"


def test_a_function_of_that_name_elsewhere_is_no_barrier(db):
    """The same name in another project's file is no coordination-service barrier."""
    here = "/opt/levanter/src/levanter/utils/jax_utils.py"
    text = real_text(LEVANTER).replace(here, "/opt/levanter/src/levanter/utils/misc.py")
    found, wait = analyzed(text, db)
    assert RENDEZVOUS not in found
    assert wait != "collective"
