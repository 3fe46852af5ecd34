"""Signatures widened or added by mechanism (issue 32): each matches real stacks of its class in
more than one version or wrapper, and a near miss (the same paste without the frame the mechanism
needs, or with the frame that rules it out) does not.  Texts: the real-world corpus
(tests/data/realworld/, the thread URL of each in its manifest)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.errors import InputError

REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld"

#: Signatures this module tests with a real stack and a near miss (test_signature_coverage).
COVERED = ["deepspeed-zero3-param-fetch-divergence", "network-read-no-timeout",
           # frequent classes added by mechanism, on real pastes in tests/data/mechtext/
           "python-import-lock-deadlock", "dataloader-worker-killed-by-signal", "torch-spawn-child-killed-by-signal",
           "process-pool-worker-died", "spawn-main-module-not-guarded", "asyncio-run-inside-running-loop",
           "cuda-device-side-assert", "mp-manager-server-gone", "gevent-loop-exit-blocked-forever",
           # a second round (issue 32): ranks sharing a GPU, Ray's unschedulable requests, a dead datasets.map
           # worker, Popen waiting for a child that never exec'd
           "nccl-duplicate-gpu-ranks", "ray-resource-request-unschedulable", "hf-datasets-map-worker-died",
           "popen-child-stuck-before-exec"]


def ids(text: str, db) -> List[str]:
    return [f.signature for f in pipeline.analyze(parse_text(text), db).findings]


def ids_or_refused(text: str, db) -> List[str]:
    """``ids``, or none when the reader refuses the text: a log whose only known lines were the
    mechanism's, once they are removed, is no input at all (nothing reported either)."""
    try:
        return ids(text, db)
    except InputError:
        return []


def corpus(name: str) -> str:
    return (REALWORLD / name).read_text()


# --- DeepSpeed ZeRO-3: a rank waiting in the parameter all-gather of a submodule's pre-hook ---------

# py-spy of DeepSpeed 0.14 (partitioned_param_coordinator.py, all_gather_coalesced) under accelerate,
# and faulthandler of DeepSpeed 0.3 (stage3.py, the stream synchronize after the gather)
ZERO3 = ["accelerate/accelerate-3104-1.txt", "deepspeed/deepspeed-860-1.txt"]


@pytest.mark.parametrize("name", ZERO3)
def test_zero3_fetch_wait_in_two_versions(db, name):
    assert "deepspeed-zero3-param-fetch-divergence" in ids(corpus(name), db)


@pytest.mark.parametrize("name", ZERO3)
def test_zero3_near_miss_without_the_fetch(db, name):
    text = corpus(name)
    kept = "\n".join(line for line in text.splitlines() if "fetch_sub_module" not in line) + "\n"
    assert kept != text
    assert "deepspeed-zero3-param-fetch-divergence" not in ids(kept, db)


def test_zero3_near_miss_computing_in_the_hook(db):
    """The same stack cut above the gather: the rank runs the hook's Python code, it waits for nobody."""
    lines = corpus(ZERO3[0]).splitlines()
    start = next(i for i, line in enumerate(lines) if "fetch_sub_module" in line)
    text = "\n".join(lines[:1] + lines[start:]) + "\n"
    assert "all_gather" not in text
    assert "deepspeed-zero3-param-fetch-divergence" not in ids(text, db)


def test_zero3_is_a_lead_not_a_verdict(db):
    """One rank caught in a gather may only be slow: the finding stays below the confident line."""
    snap = pipeline.analyze(parse_text(corpus(ZERO3[0])), db)
    f = next(f for f in snap.findings if f.signature == "deepspeed-zero3-param-fetch-divergence")
    assert f.severity == "hang" and f.confidence < 0.8


# --- a blocking socket read seen in native frames only ---------------------------------------------

def test_blocking_recv_under_cpython_socket_module(db):
    """gdb `bt` of requests without a timeout, cut before the Python frames: recv called straight from
    the socket module is a socket with no timeout (one with a timeout waits in poll instead)."""
    text = corpus("requests/requests-4624-1.txt")
    assert "urllib3" not in text and "requests/" not in text
    assert "network-read-no-timeout" in ids(text, db)


def test_socket_with_a_timeout_waits_in_poll_near_miss(db):
    """The same stack as a socket with a timeout shows it: poll under internal_select, then the recv."""
    text = corpus("requests/requests-4624-1.txt")
    miss = re.sub(r"in recv \(\) from", "in poll () from", text, count=1)
    miss = miss.replace("#1  0x00007f16d99d3da1 in sock_recv_impl",
                        "#1  0x00007f16d99d3d10 in internal_select (s=0x7f16d3df8b28, writing=0, "
                        "interval=1000000000, connect=0) at socketmodule.c:745\n"
                        "#1  0x00007f16d99d3da1 in sock_recv_impl")
    assert miss != text and "internal_select" in miss
    assert "network-read-no-timeout" not in ids(miss, db)


def test_recv_outside_the_socket_module_near_miss(db):
    """A recv called by another library (no CPython socket frame) says nothing about a Python timeout."""
    text = corpus("requests/requests-4624-1.txt")
    kept = "\n".join(line for line in text.splitlines() if not re.search(r"sock_|socketmodule", line)) + "\n"
    assert "recv ()" in kept
    assert "network-read-no-timeout" not in ids(kept, db)


# --- frequent classes the database lacked (tests/data/mechtext/: real pastes, source URL in each header) ----
# Each file is matched whole; its near miss removes the lines the mechanism needs (the key), or swaps in
# the line of a neighbouring class (the swap), which must then not be reported as this one.

MECHTEXT = Path(__file__).resolve().parents[1] / "data" / "mechtext"

#: (file, regex of the lines a near miss drops)
MECH_CASES = [
    ("import_lock_urlwatch_559.txt", r"importlib\._bootstrap"),
    ("import_deadlock_error_drf_7078.txt", r"_DeadlockError|in acquire|in __enter__"),
    ("dl_worker_killed_pytorch_8976.txt", r"is killed by signal"),
    ("dl_worker_killed_dcpdn_12.txt", r"is killed by signal"),
    ("spawn_sigkill_prompt4nr_3.txt", r"terminated with signal"),
    ("spawn_sigkill_encoding_324.txt", r"terminated with signal"),
    ("broken_pool_blueprints_16.txt", r"BrokenProcessPool"),
    ("broken_pool_aesthetics_2.txt", r"BrokenProcessPool"),
    ("spawn_main_guard_dask_4751.txt", r"An attempt has been made"),
    ("spawn_main_guard_segdecnet_16.txt", r"An attempt has been made"),
    ("asyncio_run_nested_telerecon_11.txt", r"running event loop"),
    ("asyncio_run_nested_somax2_1.txt", r"running event loop"),
    ("device_assert_reid_372.txt", r"device-side assert|Assertion `"),
    ("device_assert_gplinker_14.txt", r"device-side assert|Assertion `"),
    ("manager_gone_deepmod2_41.txt", r"managers\.py"),
    ("gevent_loopexit_calamari_533.txt", r"LoopExit"),
    ("gevent_loopexit_ghr_1.txt", r"LoopExit"),
    ("nccl_dup_gpu_mambair_39.txt", r"Duplicate GPU"),
    ("nccl_dup_gpu_horovod_3929.txt", r"Duplicate GPU"),
    ("ray_unschedulable_secretflow_192.txt", r"cannot be scheduled"),
    ("ray_unschedulable_ray_16612.txt", r"cannot be scheduled"),
    ("ray_infeasible_tinyzero_94.txt", r"No available node types"),
    ("hf_map_worker_died_musicgen_12.txt", r"abruptly died"),
    ("hf_map_worker_died_unsloth_zoo_88.txt", r"abruptly died"),
    ("popen_child_before_exec_cpython_120998.txt", r"_execute_child"),
    ("popen_child_before_exec_cpython_103911.txt", r"_execute_child|errpipe_read"),
]


def mech(name: str):
    """(body, expected signature) of a mechtext file: header lines start with '# '."""
    lines = (MECHTEXT / name).read_text().splitlines()
    expect = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("# expect:"))
    return "\n".join(line for line in lines if not line.startswith("# ")) + "\n", expect


def test_every_mechtext_file_is_listed():
    assert {p.name for p in MECHTEXT.glob("*.txt")} == {c[0] for c in MECH_CASES}
    for p in MECHTEXT.glob("*.txt"):
        assert p.read_text().startswith("# source: https://"), p.name


@pytest.mark.parametrize("name,key", MECH_CASES)
def test_mech_class_matches_its_real_paste(db, name, key):
    text, expect = mech(name)
    assert expect in ids(text, db)


@pytest.mark.parametrize("name,key", MECH_CASES)
def test_mech_class_near_miss_without_its_lines(db, name, key):
    text, expect = mech(name)
    kept = "\n".join(line for line in text.splitlines() if not re.search(key, line)) + "\n"
    assert kept != text
    assert expect not in ids_or_refused(kept, db)


# swaps: the same paste with the line of a neighbouring class (that class wins, this one stays silent)
SWAPS = [
    # a SIGBUS is the shared-memory class, not an OOM kill / native crash
    ("dl_worker_killed_pytorch_8976.txt", "is killed by signal: Killed.", "is killed by signal: Bus error.",
     "dataloader-worker-shm-exhausted"),
    # a child that exited with a code raised a Python error of its own: no signal death
    ("spawn_sigkill_prompt4nr_3.txt", "terminated with signal SIGKILL", "terminated with exit code 1", None),
    # an illegal memory access is a sticky CUDA error too, but no device-side check failed
    ("device_assert_gplinker_14.txt", "device-side assert triggered", "an illegal memory access was encountered", None),
    # the manager answered: an exception raised by the remote method is the program's own error
    ("manager_gone_deepmod2_41.txt", "EOFError", "KeyError: 'is_set'", None),
]


@pytest.mark.parametrize("name,old,new,other", SWAPS)
def test_mech_class_near_miss_of_a_neighbouring_class(db, name, old, new, other):
    text, expect = mech(name)
    swapped = text.replace(old, new)
    if "Assertion `" in swapped:
        swapped = "\n".join(line for line in swapped.splitlines() if "Assertion `" not in line) + "\n"
    assert swapped != text
    found = ids(swapped, db)
    assert expect not in found
    if other:
        assert other in found


def test_import_in_progress_is_not_a_lock_wait(db):
    """The same import cut below the lock: a thread running a module's top-level code (inside
    _find_and_load / exec_module) holds the module lock, it does not wait for one."""
    text, _ = mech("import_deadlock_error_drf_7078.txt")
    lines = text.splitlines()
    cut = next(i for i, line in enumerate(lines) if "line 980, in _find_and_load" in line)
    held = "Traceback (most recent call last):\n" + "\n".join(lines[:cut]) + "\n"
    assert "exec_module" in held and "acquire" not in held
    assert "python-import-lock-deadlock" not in ids(held, db)


def test_detector_spin_is_a_lead_and_the_raised_error_is_a_verdict(db):
    """A thread caught in the module lock may be a short wait: the frames alone count less than
    the detector's own error, which is certain."""
    frames = pipeline.analyze(parse_text(mech("import_lock_urlwatch_559.txt")[0]), db).findings
    raised = pipeline.analyze(parse_text(mech("import_deadlock_error_drf_7078.txt")[0]), db).findings
    f = next(f for f in frames if f.signature == "python-import-lock-deadlock")
    g = next(f for f in raised if f.signature == "python-import-lock-deadlock")
    assert f.confidence < g.confidence == 1.0
    assert any("has_deadlock" in (e.text or "") or "acquire" in (e.text or "") for e in f.evidence)


@pytest.mark.parametrize("name", ["fastai/fastai-docker-21-1.txt", "pipedream/pipedream-28-1.txt",
                                  "megatron/megatron-lm-878-1.txt"])
def test_worker_bus_error_in_the_corpus_is_not_a_kill(db, name):
    """Real near misses: DataLoader workers killed by SIGBUS (shared memory, labelled so in the corpus)
    are the shm class; the killed-by-signal class stays silent on them."""
    assert "dataloader-worker-killed-by-signal" not in ids(corpus(name), db)


# --- the second round (issue 32): near misses of a neighbouring class and the leads' confidence --------

def test_nccl_socket_error_is_not_a_duplicate_gpu(db):
    """The same horovod log with NCCL's bootstrap failing instead: another NCCL init error, its class wins."""
    text, _ = mech("nccl_dup_gpu_horovod_3929.txt")
    swapped = re.sub(r"NCCL WARN Duplicate GPU detected : rank \d+ and rank \d+ both on CUDA device \w+",
                     "NCCL WARN Bootstrap : no socket interface found", text)
    assert swapped != text and "Duplicate" not in swapped
    found = ids(swapped, db)
    assert "nccl-duplicate-gpu-ranks" not in found and "nccl-no-socket-interface" in found


def test_duplicate_gpu_is_certain(db):
    """NCCL's own check names the two ranks: a verdict, in torch's exception and in NCCL's WARN line."""
    for name in ("nccl_dup_gpu_mambair_39.txt", "nccl_dup_gpu_horovod_3929.txt"):
        f = next(f for f in pipeline.analyze(parse_text(mech(name)[0]), db).findings
                 if f.signature == "nccl-duplicate-gpu-ranks")
        assert f.confidence == 1.0 and f.severity == "error"


def test_ray_oom_kill_is_not_an_unschedulable_request(db):
    """The same scheduler lines turned into the memory monitor's: a worker killed, not a request waiting."""
    text, _ = mech("ray_unschedulable_secretflow_192.txt")
    swapped = re.sub(r"Warning: The following resource request cannot be scheduled right now: .*",
                     "Task was killed due to the node running low on memory.", text)
    assert "cannot be scheduled" not in swapped
    found = ids(swapped, db)
    assert "ray-resource-request-unschedulable" not in found and "ray-memory-monitor-killed-worker" in found


@pytest.mark.parametrize("name", ["ray_unschedulable_secretflow_192.txt", "ray_unschedulable_ray_16612.txt",
                                  "ray_infeasible_tinyzero_94.txt"])
def test_ray_unschedulable_is_a_lead(db, name):
    """An autoscaler may still add the node (and Ray has called node-affinity requests infeasible by
    mistake): below the confident line; the infeasible form counts more than the pending one."""
    f = next(f for f in pipeline.analyze(parse_text(mech(name)[0]), db).findings
             if f.signature == "ray-resource-request-unschedulable")
    assert f.severity == "hang" and f.confidence < 0.8
    assert (f.confidence > 0.7) == ("infeasible" in name)


def test_datasets_map_with_its_own_error_is_not_a_dead_worker(db):
    """The same traceback raising another error from iflatmap_unordered (the function's own exception,
    re-raised): the pool watcher's frame alone accuses nobody."""
    text, _ = mech("hf_map_worker_died_musicgen_12.txt")
    swapped = text.replace("RuntimeError: One of the subprocesses has abruptly died during map operation.To debug the "
                           "error, disable multiprocessing.", "KeyError: 'input_ids'")
    assert swapped != text and "iflatmap_unordered" in swapped
    assert "hf-datasets-map-worker-died" not in ids(swapped, db)


def test_datasets_map_frames_count_more_than_the_line(db):
    """With the pool watcher's frame the error is certain; the line alone (the IPython traceback's
    re-raise by unsloth keeps both) stays at the line's confidence."""
    text, _ = mech("hf_map_worker_died_musicgen_12.txt")
    alone = "\n".join(line for line in text.splitlines() if line.startswith("RuntimeError")) + "\n"
    sig = "hf-datasets-map-worker-died"
    full = next(f for f in pipeline.analyze(parse_text(text), db).findings if f.signature == sig)
    line = next(f for f in pipeline.analyze(parse_text(alone), db).findings if f.signature == sig)
    assert full.confidence == 1.0 and line.confidence == 0.8


def test_popen_waiting_for_a_running_child_is_not_stuck_before_exec(db):
    """The same Jenkins traceback one step later: Popen returned and the caller waits for the child it
    started (communicate / wait) - the child exec'd, it is a running program, not this class."""
    text, _ = mech("popen_child_before_exec_cpython_103911.txt")
    lines = text.splitlines()
    cut = next(i for i, line in enumerate(lines) if "in __init__" in line)
    later = "\n".join(lines[:cut] + [
        '12:03:37    File "/usr/lib64/python3.11/subprocess.py", line 1264, in wait',
        "12:03:37      return self._wait(timeout=timeout)",
        '12:03:37    File "/usr/lib64/python3.11/subprocess.py", line 2053, in _wait',
        "12:03:37      (pid, sts) = self._try_wait(0)",
        '12:03:37    File "/usr/lib64/python3.11/subprocess.py", line 2011, in _try_wait',
        "12:03:37      (pid, sts) = os.waitpid(self.pid, wait_flags)"]) + "\n"
    assert "_execute_child" not in later
    assert "popen-child-stuck-before-exec" not in ids(later, db)


def test_popen_exec_wait_is_a_lead(db):
    """Every Popen passes through _execute_child: one dump of it is a lead, below the confident line."""
    for name in ("popen_child_before_exec_cpython_120998.txt", "popen_child_before_exec_cpython_103911.txt"):
        f = next(f for f in pipeline.analyze(parse_text(mech(name)[0]), db).findings
                 if f.signature == "popen-child-stuck-before-exec")
        assert f.severity == "hang" and f.confidence < 0.8
