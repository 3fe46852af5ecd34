"""Open round 13 (ML dumps, manifest-blind13.yaml): the mechanisms behind its misses, each on the
round's real paste and a near miss it must not claim: a c10d store get that timed out, in the wordings
PyTorch 2.2+ and the FileStore print (only "Socket Timeout" was known); c10d's store-based barrier
entered by a rank in a log where no rank completes it; and Open MPI's progress engine under an MPI
call whose MPI_ entry point is not on the stack (Horovod's background thread)."""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

STORE = "c10d-store-rendezvous-hang"


def analyzed(text: str, db):
    snap, wait = text_verdict(text, db)
    return {f.signature: f.confidence for f in snap.findings}, wait


# --- a store get that timed out, every wording ----------------------------------------------------

@pytest.mark.parametrize("path", ["ms-swift/ms-swift-3612-1.txt", "nemo/nemo-speech-14399-1.txt"])
def test_a_timed_out_store_get_of_the_nccl_unique_id_is_the_store_wait(path, db):
    """A rank's first collective fetches rank 0's ncclUniqueId from the store; 2.2+ says "wait
    timeout after Nms" (here behind [rankN]: and a launcher's prefix), which no rule read before."""
    found, wait = analyzed(real_text(path), db)
    assert found.get(STORE, 0) >= 0.8
    assert wait == "collective"


def test_the_older_wordings_of_the_same_timeout_still_match(db):
    text = real_text("ms-swift/ms-swift-3612-1.txt")
    for wording in ("Socket Timeout", "Timeout waiting for key: default_pg/0/0 after 1800000 ms"):
        found, _ = analyzed(text.replace("wait timeout after 1800000ms", wording), db)
        assert found.get(STORE, 0) >= 0.8, wording


def test_a_store_get_that_failed_otherwise_is_not_the_timeout(db):
    """The store's server gone (rank 0 died) is another story than a peer that never answered."""
    text = real_text("ms-swift/ms-swift-3612-1.txt").replace("wait timeout after 1800000ms",
                                                            "Connection reset by peer")
    found, _ = analyzed(text, db)
    assert STORE not in found


# --- the store-based barrier entered and never completed -----------------------------------------

def test_a_rank_in_the_store_based_barrier_that_never_completes(db):
    """Lightning's DDP start: two of four members initialise, rank 1 adds its barrier key, and the
    log ends there; a lower confidence, as a log can also end early."""
    found, wait = analyzed(real_text("lightning/lightning-13087-1.txt"), db)
    assert 0.5 <= found.get(STORE, 0) < 0.8
    assert wait == "collective"


def test_a_store_based_barrier_that_completes_is_no_rendezvous_hang(db):
    text = real_text("lightning/lightning-13087-1.txt") + (
        "[2022-02-08 19:04:30,001][torch.distributed.distributed_c10d][INFO] - Rank 1: Completed "
        "store-based barrier for key:store_based_barrier_key:1 with 4 nodes.\n")
    found, _ = analyzed(text, db)
    assert STORE not in found


# --- Open MPI's progress engine under an MPI call -------------------------------------------------

def test_open_mpis_progress_engine_under_a_send_is_a_collective_wait(db):
    """Horovod's background thread in an allreduce: the stack shows Open MPI's internals
    (opal_progress, ompi_sync_wait_mt, mca_pml_ob1_send), not MPI_Allreduce; before it ran
    ("runs")."""
    assert analyzed(real_text("horovod/horovod-361-1.txt"), db)[1] == "collective"


def test_open_mpis_idle_event_thread_is_no_collective_wait(db):
    """Open MPI's own progress thread waiting for events in libevent is idle, not a peer wait."""
    text = (
        "Thread 2 (Thread 0x7f3c1d7fe700 (LWP 24410)):\n"
        "#0  0x00007f3c2a1b3d53 in epoll_wait () from /lib64/libc.so.6\n"
        "#1  0x00007f3c29a4e2f6 in epoll_dispatch () from /usr/lib64/openmpi/lib/libopen-pal.so.40\n"
        "#2  0x00007f3c29a51a2d in opal_libevent2022_event_base_loop () from "
        "/usr/lib64/openmpi/lib/libopen-pal.so.40\n"
        "#3  0x00007f3c29a0d4be in progress_engine () from /usr/lib64/openmpi/lib/libopen-pal.so.40\n"
        "#4  0x00007f3c2a48cea5 in start_thread () from /lib64/libpthread.so.0\n"
        "#5  0x00007f3c2a1b38dd in clone () from /lib64/libc.so.6\n")
    assert analyzed(text, db)[1] != "collective"
