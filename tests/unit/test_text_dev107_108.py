"""Fixes from open development rounds 107/108 (manifest-blind107/108.yaml), each on the round's real
paste and a near miss: a writer's arrow notes after gdb frames, glibc's internal alias as a rule's
anchor (__GI___dl_iterate_phdr), the loader's lock named by gdb's argument (<_rtld_global+N>), the
MSVC runtime's abort text, multiprocessing's resource sharer as an idle helper and a Popen's poll as a
child wait, and terminate from a CUDA object's destructor at exit."""

from __future__ import annotations

from helpers import real_text, text_verdict, wait_or_refused

from hanganalyze.acquire.text import parse_text


def found(snap):
    return {f.signature: f.confidence for f in snap.findings}


def test_annotated_gdb_frames_and_the_glibc_alias_anchor(db):
    text = real_text("auto-round/auto-round-1701-1.txt")
    t = parse_text(text).processes[0].threads[1]
    assert [f.function for f in t.frames] == ["futex_wait", "___pthread_mutex_lock", "__GI___dl_iterate_phdr"]
    snap, wait = text_verdict(text, db)
    assert "loader-lock-gil-inversion" in found(snap) and wait == "loader-lock"
    assert "dynamic-loader-lock-deadlock" not in found(snap)  # a callback waiting for the GIL is the inversion's
    # near miss: the callback's thread waiting for a plain lock, not the GIL, is no GIL inversion
    near = text.replace("PyEval_RestoreThread", "pthread_mutex_lock")
    assert "loader-lock-gil-inversion" not in found(text_verdict(near, db)[0])


def test_the_loaders_lock_named_by_gdbs_argument(db):
    text = real_text("legacy-rocm-build/legacy-rocm-build-6577-1.txt")
    assert text_verdict(text, db)[1] == "loader-lock"
    near = text.replace("<_rtld_global+2608>", "<some_mutex>")
    assert near != text and text_verdict(near, db)[1] == "lock"


def test_the_msvc_runtimes_abort_text_is_a_crash(db):
    text = real_text("bugjar/bugjar-4-1.txt")
    assert text_verdict(text, db)[1] == "crashed"
    # near miss: the same Tcl complaint without the runtime's abort text says no crash (or is refused)
    near = text.replace("requested the Runtime to terminate it in an unusual way", "asked to close")
    assert near != text
    assert wait_or_refused(near, db) != "crashed"


def test_the_resource_sharer_is_idle_and_a_popens_poll_waits_for_its_child(db):
    text = real_text("loky/loky-461-1.txt")
    snap, wait = text_verdict(text, db)
    assert wait == "child"
    # near miss: the same accept outside the resource sharer is a network wait of its own
    near = text.replace("resource_sharer.py\", line 138 in _serve", "server.py\", line 138 in _serve")
    assert near != text
    tri = next(f for f in text_verdict(near, db)[0].findings if f.signature == "triage")
    assert "network" in {t["wait"] if isinstance(t, dict) else t.wait for t in tri.triage.threads}


def test_terminate_from_a_cuda_objects_destructor_at_exit(db):
    text = real_text("pytorch/pytorch-185148-1.txt")
    assert "cuda-teardown-driver-shutting-down" in found(text_verdict(text, db)[0])
    near = text.replace("__run_exit_handlers", "run_worker_loop")
    assert near != text and "cuda-teardown-driver-shutting-down" not in found(text_verdict(near, db)[0])
