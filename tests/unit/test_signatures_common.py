"""Frequent ML and Python failure classes the database lacked (signatures/common_failures.yaml): the
DataLoader / torch.multiprocessing open-file limit, NCCL's /dev/shm segment, HDF5's file lock, a gloo
peer that closed its connection, spawned pool workers that cannot find a __main__ function, GPU
out-of-memory errors, cuBLAS and cuDNN handle creation failing, a data loader's worker timeout, a full
/dev/shm under torch's tensor sharing, DDP's unused parameters, host out-of-memory errors, the thread
limit, Ray's full object store, two OpenMP runtimes in one process, a GPU the build has no code for, and a
GPU driver older than the CUDA runtime, and SQLite's write lock held by another connection;
and the fork class widened to CUDA's initialization error in a DataLoader worker.  Each class matches
its real pastes (tests/data/commonclass/, the thread URL in each header) and stays silent on near
misses: the same paste without the line the class needs, and the paste with the line of a neighbouring
cause swapped in (that cause's class wins where there is one)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from helpers import text_or_log_findings

from hanganalyze_gdbext.model import Finding

COMMON = Path(__file__).resolve().parents[1] / "data" / "commonclass"
SERIOUS = {"crash", "deadlock", "hang", "error"}

#: Signatures this module tests with a real paste and a near miss (test_signature_coverage).
COVERED = ["torch-mp-fd-sharing-limit", "nccl-shm-segment-create-failed", "hdf5-file-lock-refused",
           "gloo-peer-connection-closed", "spawn-child-lacks-main-function", "gpu-out-of-memory",
           "cublas-handle-init-failed", "dataloader-worker-timeout", "torch-shm-no-space", "ddp-unused-parameters",
           "host-out-of-memory", "thread-limit-reached", "ray-object-store-full", "cudnn-handle-init-failed",
           "openmp-runtime-duplicate", "gpu-arch-not-in-build", "cuda-driver-too-old",
           "sqlite-database-locked",
           # widened: CUDA's initialization error raised in a DataLoader worker (forked after CUDA init)
           "cuda-init-before-fork"]


def sample(name: str) -> Tuple[str, Optional[str]]:
    """(body, expected signature or None for ``# expect: nothing``); header lines start with '# '."""
    lines = (COMMON / name).read_text().splitlines()
    word = next(line.split(":", 1)[1].split()[0] for line in lines if line.startswith("# expect:"))
    return "\n".join(line for line in lines if not line.startswith("# ")) + "\n", (None if word == "nothing" else word)


def findings(text: str, db) -> List[Finding]:
    return text_or_log_findings(text, db)


def ids(text: str, db) -> List[str]:
    return [f.signature for f in findings(text, db)]


def finding(text: str, db, sig: str) -> Finding:
    return next(f for f in findings(text, db) if f.signature == sig)


#: (file, regex of the lines a near miss drops)
CASES = [
    ("fd_limit_neuralrecon_91.txt", r"Too many open files"),
    ("fd_limit_maskrcnn_158.txt", r"shared memory object"),
    ("fd_limit_ancdata_smoke_21.txt", r"ancdata"),
    ("nccl_shm_create_nccltests_166.txt", r"shared memory segment|failed to extend"),
    ("nccl_shm_create_ciinfra_490.txt", r"shared memory segment|failed to extend"),
    ("hdf5_lock_ompi_6535.txt", r"unable to lock file"),
    ("hdf5_lock_nolocks_scdior_6.txt", r"unable to lock file"),
    ("gloo_closed_pytorch_75512.txt", r"Connection closed by peer"),
    ("gloo_closed_pfedsd_3.txt", r"Connection closed by peer"),
    ("gloo_closed_barrier_pytorch_61670.txt", r"Connection closed by peer"),
    ("spawn_main_attr_ipython_10894.txt", r"Can't get attribute"),
    ("spawn_main_attr_vscode_jupyter_12485.txt", r"Can't get attribute"),
    ("gpu_oom_torch_mgfn_35.txt", r"out of memory"),
    ("gpu_oom_torch_old_dcrnn_6.txt", r"out of memory"),
    ("gpu_oom_jax_afprofile_8.txt", r"RESOURCE_EXHAUSTED"),
    ("gpu_oom_tf_fasterrcnn_110.txt", r"OOM when allocating"),
    ("cublas_init_llama2c_279.txt", r"CUBLAS_STATUS"),
    ("cublas_init_minigpt4_89.txt", r"CUBLAS_STATUS"),
    ("dl_timeout_pytorch_68643.txt", r"timed out after"),
    ("dl_timeout_mxnet_18224.txt", r"timed out after"),
    ("shm_write_nnunet_294.txt", r"unable to write to file"),
    ("shm_write_nnunet_2162.txt", r"unable to write to file"),
    ("ddp_unused_promptir_30.txt", r"finished reduction"),
    ("ddp_unused_mmagic_419.txt", r"finished reduction"),
    ("ddp_unused_ddcap_35.txt", r"finished reduction"),
    ("host_oom_realesrgan_272.txt", r"DefaultCPUAllocator"),
    ("host_oom_windows_fooocus_237.txt", r"DefaultCPUAllocator"),
    ("thread_limit_pytorch_132145.txt", r"start new thread"),
    ("thread_limit_openblas_nnunet_1343.txt", r"pthread_create failed"),
    ("ray_store_full_13443.txt", r"object store because it is full"),
    ("ray_store_full_22176.txt", r"object store because it is full"),
    ("cuda_init_error_worker_i3d_7.txt", r"initialization error"),
    ("cuda_init_error_worker_pytorch_2517.txt", r"initialization error"),
    ("cudnn_init_tfmodels_7088.txt", r"cudnn handle"),
    ("cudnn_init_retinanet_1164.txt", r"cudnn handle"),
    ("omp_duplicate_msagent_175.txt", r"Error #15"),
    ("omp_duplicate_stit_22.txt", r"Error #15"),
    ("gpu_arch_goae_16.txt", r"not compatible with the current PyTorch"),
    ("gpu_arch_nailseg_8.txt", r"no kernel image"),
    ("cuda_driver_old_trixie_9.txt", r"too old"),
    ("cuda_driver_insufficient_mlcommons_54.txt", r"insufficient"),
    ("cuda_driver_insufficient_roop_465.txt", r"insufficient"),
    ("sqlite_locked_rltrader_20.txt", r"database is locked"),
    ("sqlite_locked_subgnn_10.txt", r"database is locked"),
]

#: real pastes of a neighbouring situation: no class of this module, nothing serious at all
REAL_NEAR_MISSES = [
    # NCCL failing to ATTACH to another rank's segment (it was gone: another IPC namespace, a cleaned
    # /dev/shm, a NCCL release's bug), not to create one for lack of space
    "nccl_shm_attach_nccl_1589.txt",
]


def test_every_commonclass_file_is_listed():
    assert {p.name for p in COMMON.glob("*.txt")} == {c[0] for c in CASES} | set(REAL_NEAR_MISSES)
    for p in COMMON.glob("*.txt"):
        assert p.read_text().startswith("# source: https://"), p.name


@pytest.mark.parametrize("name,key", CASES)
def test_common_class_matches_its_real_paste(db, name, key):
    text, expect = sample(name)
    assert expect in COVERED
    assert expect in ids(text, db)


@pytest.mark.parametrize("name,key", CASES)
def test_common_class_near_miss_without_its_lines(db, name, key):
    text, expect = sample(name)
    kept = "\n".join(line for line in text.splitlines() if not re.search(key, line)) + "\n"
    assert kept != text
    assert expect not in ids(kept, db)


@pytest.mark.parametrize("name,key", CASES)
def test_common_class_findings_are_specific(db, name, key):
    """A paste yields its own class and no other serious finding (the other pastes are near misses
    of each class: an OOM is no lock refusal, a gloo peer's exit no fd limit)."""
    text, expect = sample(name)
    serious = {f.signature for f in findings(text, db) if f.severity in SERIOUS}
    assert serious == {expect}, serious


@pytest.mark.parametrize("name", REAL_NEAR_MISSES)
def test_real_near_miss_pastes(db, name):
    text, expect = sample(name)
    assert expect is None
    serious = [f.signature for f in findings(text, db) if f.severity in SERIOUS]
    assert not serious, serious


# swaps: (file, old, new, the neighbouring class that must then be found or None)
SWAPS = [
    # the worker died of the OOM killer: the dead-worker class, not the open-file limit
    ("fd_limit_neuralrecon_91.txt",
     "RuntimeError: Too many open files. Communication with the workers is no longer possible.",
     "RuntimeError: DataLoader worker (pid 4142) is killed by signal: Killed.", "dataloader-worker-killed-by-signal"),
    # a corrupt or truncated file: HDF5 opened it and found no HDF5 signature, no lock was refused
    ("hdf5_lock_ompi_6535.txt", "(unable to lock file, errno = 11, error message = 'Resource temporarily unavailable')",
     "(file signature not found)", None),
    # the peer is there but never sends: gloo's receive timeout, its own class
    ("gloo_closed_barrier_pytorch_61670.txt",
     "tcp/pair.cc:598] Connection closed by peer [172.17.0.2]:16786",
     "tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete", None),
    # another module lacks the name (a renamed class, a version mismatch): no interactive __main__ involved
    ("spawn_main_attr_vscode_jupyter_12485.txt", "on <module '__mp_main__' from", "on <module 'muni_distances' from",
     None),
    # NCCL's own buffers did not fit: the NCCL class (the framework left no room), not a framework OOM
    ("gpu_oom_torch_mgfn_35.txt", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB.",
     "node1:2221:2290 [0] include/alloc.h:103 NCCL WARN Cuda failure 'out of memory'", "nccl-cuda-out-of-memory"),
    # TensorFlow's host allocator: RAM, not the GPU
    ("gpu_oom_tf_fasterrcnn_110.txt", "device:GPU:0 by allocator GPU_0_bfc", "device:CPU:0 by allocator cpu", None),
    # the earlier asynchronous error reported by itself: a kernel's assert, its own class (no handle involved)
    ("cublas_init_minigpt4_89.txt", "CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
     "device-side assert triggered", "cuda-device-side-assert"),
    # a GEMM that failed to run is a kernel fault, not the handle's creation
    ("cublas_init_llama2c_279.txt", "CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)``",
     "CUBLAS_STATUS_EXECUTION_FAILED when calling "
     "`cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`", None),
    # the worker died instead of stalling: the dead-worker class
    ("dl_timeout_pytorch_68643.txt", "RuntimeError: DataLoader timed out after 5 seconds",
     "RuntimeError: DataLoader worker (pid(s) 18360) exited unexpectedly", "dataloader-worker-killed-by-signal"),
    # the shared-memory object could not be opened for want of descriptors: the open-file limit, not space
    ("shm_write_nnunet_294.txt", "RuntimeError: unable to write to file </torch_15769_1517813162>",
     "RuntimeError: unable to open shared memory object </torch_15769_1517813162> in read-write mode: "
     "Too many open files (24)", "torch-mp-fd-sharing-limit"),
    # another DDP error (a parameter marked ready twice: reentrant checkpointing, shared weights), not unused ones
    ("ddp_unused_promptir_30.txt",
     "Expected to have finished reduction in the prior iteration before starting a new one",
     "Expected to mark a variable ready only once", None),
    # the device ran out, not the host: the GPU class
    ("host_oom_realesrgan_272.txt",
     "Error [enforce fail at CPUAllocator.cpp:67] . DefaultCPUAllocator: can't allocate memory: you tried to allocate "
     "264896512 bytes. Error code 12 (Cannot allocate memory)",
     "RuntimeError: CUDA out of memory. Tried to allocate 254.00 MiB (GPU 0; 14.76 GiB total capacity; 13.19 GiB "
     "already allocated; 81.75 MiB free; 13.52 GiB reserved in total by PyTorch)", "gpu-out-of-memory"),
    # Python 3.12 refusing a thread started while the interpreter finalizes: no limit was hit
    ("thread_limit_pytorch_132145.txt", "RuntimeError: can't start new thread",
     "RuntimeError: can't create new thread at interpreter shutdown", None),
    # the node's RAM ran out and Ray's memory monitor killed a worker: host memory, not the object store
    ("ray_store_full_13443.txt",
     "ray.exceptions.ObjectStoreFullError: Failed to put object "
     "ffffffffffffffffffffffffffffffffffffffff0f00000003000000 in object store because it is full. "
     "Object size is 516884584 bytes.",
     "Task was killed due to the node running low on memory.", "ray-memory-monitor-killed-worker"),
    # TensorFlow's own allocator failing (its OOM report): the GPU memory class, no cuDNN handle involved
    ("cudnn_init_retinanet_1164.txt", "Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
     "OOM when allocating tensor with shape[8,256,64,64] and type float on "
     "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc", "gpu-out-of-memory"),
    # another OpenMP runtime failure (an internal assertion, often after fork): one runtime, no duplicate
    ("omp_duplicate_stit_22.txt",
     "OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already initialized.",
     "OMP: Error #13: Assertion failure at z_Linux_util.cpp(2361).", None),
    # a kernel that ran and faulted: the build had code for the GPU
    ("gpu_arch_nailseg_8.txt", "no kernel image is available for execution on the device",
     "an illegal memory access was encountered", "cuda-illegal-memory-access"),
]


@pytest.mark.parametrize("name,old,new,other", SWAPS)
def test_common_class_near_miss_of_a_neighbouring_cause(db, name, old, new, other):
    text, expect = sample(name)
    swapped = text.replace(old, new)
    assert swapped != text
    found = ids(swapped, db)
    assert expect not in found
    if other:
        assert other in found


def test_pickle_error_without_a_spawned_worker_is_not_the_pool_class(db):
    """The same AttributeError with the worker's frames and name cut away is what loading a pickle
    saved from another script prints (torch.load of a whole model): no pool, no hang."""
    text, _ = sample("spawn_main_attr_vscode_jupyter_12485.txt")
    alone = "\n".join(line for line in text.splitlines() if line.startswith("AttributeError")) + "\n"
    assert "Can't get attribute" in alone
    assert "spawn-child-lacks-main-function" not in ids(alone, db)


def test_executor_worker_with_the_same_error_is_not_the_pool_hang(db):
    """A ProcessPoolExecutor's spawned worker (SpawnProcess-N) failing the same way breaks the pool:
    the caller gets BrokenProcessPool, it does not wait - not this hang."""
    text, _ = sample("spawn_main_attr_ipython_10894.txt")
    executor = text.replace("SpawnPoolWorker", "SpawnProcess").replace("multiprocessing\\pool.py", "x.py")
    assert "SpawnPoolWorker" not in executor and "pool.py" not in executor
    assert "spawn-child-lacks-main-function" not in ids(executor, db)


def test_errno_24_without_torch_sharing_is_not_the_class(db):
    """An open-file limit hit by any program (here the resource sharer's dup alone) does not name
    torch's descriptor sharing: only the shared-memory object line or torch's own message does."""
    text, _ = sample("fd_limit_maskrcnn_158.txt")
    start = text.index('Traceback (most recent call last):\n  File "/usr/lib/python3.6/multiprocessing/resource_sh')
    cut = text[start:]
    assert "Errno 24" in cut and "torch" not in cut
    assert "torch-mp-fd-sharing-limit" not in ids(cut, db)


def test_confidence_follows_what_the_text_proves(db):
    """Named by PyTorch or with the space error: certain; a bare creation line or a bare ancdata
    error: below the confident line or at it, never above the evidence."""
    assert finding(sample("fd_limit_neuralrecon_91.txt")[0], db, "torch-mp-fd-sharing-limit").confidence == 1.0
    text, _ = sample("fd_limit_ancdata_smoke_21.txt")
    assert finding(text, db, "torch-mp-fd-sharing-limit").confidence == 1.0  # torch's rebuild_storage_fd frames
    alone = "\n".join(line for line in text.splitlines() if "ancdata" in line and "RuntimeError" in line) + "\n"
    assert finding(alone, db, "torch-mp-fd-sharing-limit").confidence == 0.8
    text, _ = sample("nccl_shm_create_nccltests_166.txt")
    assert finding(text, db, "nccl-shm-segment-create-failed").confidence == 1.0
    bare = "\n".join(line for line in text.splitlines() if "failed to extend" not in line) + "\n"
    assert finding(bare, db, "nccl-shm-segment-create-failed").confidence < 0.8
    assert finding(sample("gloo_closed_pfedsd_3.txt")[0], db, "gloo-peer-connection-closed").confidence < 1.0
    # several causes print the same line: leads, not verdicts
    for name, sig in (("cublas_init_minigpt4_89.txt", "cublas-handle-init-failed"),
                      ("dl_timeout_pytorch_68643.txt", "dataloader-worker-timeout"),
                      ("dl_timeout_mxnet_18224.txt", "dataloader-worker-timeout"),
                      ("cudnn_init_tfmodels_7088.txt", "cudnn-handle-init-failed")):
        assert finding(sample(name)[0], db, sig).confidence < 0.8, name


@pytest.mark.parametrize("name", ["cuda_init_error_worker_i3d_7.txt", "cuda_init_error_worker_pytorch_2517.txt"])
def test_cuda_initialization_error_outside_a_worker_is_not_the_fork(db, name):
    """The same error with the worker's frames cut away is what a broken driver, a container without
    the GPU or a driver / library mismatch prints in the main process: no fork involved."""
    text, _ = sample(name)
    main_only = "\n".join(line for line in text.splitlines() if "_worker_loop" not in line) + "\n"
    assert "initialization error" in main_only and main_only != text
    assert "cuda-init-before-fork" not in ids(main_only, db)
