"""Open round 10's native-stack misses (manifest-blind10.yaml), each mechanism on the round's real
paste and a near miss that changes the one thing the mechanism reads:

- a thread inside the CUDA driver that waits there for a mutex or rwlock waits for a lock (the host
  thread holding it is in the driver), not for the device (``waits.yaml``: gpu's ``unless_inside``);
- Windows' loader lock (ntdll's ``LdrpAcquireLoaderLock`` ...) is the loader-lock wait;
- WinDbg's ``!cs -l -o``: the owner's stack under the loader lock's entry is that thread's, and the
  loader lock's owner waiting for a lock of the program is the loader-lock deadlock;
- gdb's stop line on attaching is frame #0 of the attached (main) thread, ``wait()`` is a child wait,
  and a parent that forked while libgomp's pool runs is the GNU OpenMP fork hazard;
- a thread stopped in faulthandler's traceback dumper outside its write() crashed there.
"""

from __future__ import annotations

import pytest
from helpers import real_text, text_verdict

from hanganalyze.acquire.text import parse_text


def analyzed(text: str, db):
    return text_verdict(text, db)


def found(snap) -> dict:
    return {f.signature: f.confidence for f in snap.findings}


# --- a lock inside the GPU driver --------------------------------------------------------------

@pytest.mark.parametrize("path", ["pytorch/pytorch-60158-1.txt", "nccl/nccl-1108-1.txt",
                                  "tensorflow/tensorflow-8466-1.txt"])
def test_a_mutex_or_rwlock_wait_inside_the_driver_is_a_lock(path, db):
    """CUPTI's rwlock in libcuda (60158, 1108) and two libcuda mutexes taken in opposite orders
    (8466): before, the driver's unnamed frames made them GPU waits."""
    assert analyzed(real_text(path), db)[1] == "lock"


_DRIVER = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"


def _driver_stack(top: str) -> str:
    return ("#0  0x00007f00 in %s () from /lib/x86_64-linux-gnu/libc.so.6\n"
            "#1  0x00007f01 in ?? () from %s\n#2  0x00007f02 in ?? () from %s\n"
            "#3  0x00007f03 in cudaStreamSynchronize () from /usr/local/cuda/lib64/libcudart.so.12\n"
            "#4  0x00007f04 in main () at app.cu:10\n" % (top, _DRIVER, _DRIVER))


@pytest.mark.parametrize("top", ["ioctl", "sched_yield", "poll"])
def test_near_miss_the_driver_polling_its_device_stays_a_gpu_wait(top, db):
    assert analyzed(_driver_stack(top), db)[1] == "gpu"


def test_the_same_stack_over_a_mutex_is_the_lock(db):
    assert analyzed(_driver_stack("__lll_lock_wait"), db)[1] == "lock"


def test_near_miss_a_lock_taken_outside_the_driver_leaves_the_device_wait(db):
    # the program's own mutex further out (held, not waited for) says nothing of the wait
    text = ("#0  0x00007f00 in ioctl () from /lib/x86_64-linux-gnu/libc.so.6\n"
            "#1  0x00007f01 in ?? () from %s\n"
            "#2  0x00007f03 in cudaDeviceSynchronize () from /usr/local/cuda/lib64/libcudart.so.12\n"
            "#3  0x00007f04 in Engine::flush (this=0x1) at engine.cc:40\n"
            "#4  0x00007f05 in std::mutex::unlock (this=0x2) at mutex.h:10\n"
            "#5  0x00007f06 in main () at app.cu:10\n" % _DRIVER)
    assert analyzed(text, db)[1] == "gpu"


# --- Windows' loader lock ----------------------------------------------------------------------

def _k(rows) -> str:
    out = [" # Child-SP          RetAddr           Call Site"]
    for i, site in enumerate(rows):
        out.append("%02x 00000067`e0f3f%03x 00007ff8`8a19%04x %s" % (i, 0x278 + 8 * i, 0x2e2d + i, site))
    return "\n".join(out) + "\n"


_CS_WAIT = ["ntdll!NtWaitForSingleObject+0xa", "ntdll!RtlpWaitOnCriticalSection+0xe1",
            "ntdll!RtlpEnterCriticalSectionContended+0x93"]


def test_windows_loader_lock_wait_is_the_loader_lock(db):
    snap, wait = analyzed(real_text("gperftools/gperftools-812-1.txt"), db)
    assert wait == "loader-lock"


def test_windows_10s_parallel_loader_waiting_for_its_work_queue_is_the_loader_lock(db):
    text = _k(["ntdll!NtWaitForSingleObject+0x14", "ntdll!LdrpDrainWorkQueue+0x15e", "ntdll!LdrpLoadDllInternal+0xc2",
               "ntdll!LdrpLoadDll+0xa8", "ntdll!LdrLoadDll+0xe4", "KERNELBASE!LoadLibraryExW+0x161",
               "app!LoadPlugin+0x2a"])
    assert analyzed(text, db)[1] == "loader-lock"


def test_near_miss_a_dllmain_waiting_for_an_event_is_no_loader_lock_wait(db):
    # the thread holds the loader lock (inside DllMain) and waits for something else
    text = _k(["ntdll!NtWaitForSingleObject+0x14", "KERNELBASE!WaitForSingleObjectEx+0x8f", "plugin!Init+0x20",
               "plugin!DllMain+0x41", "ntdll!LdrpCallInitRoutine+0x61", "ntdll!LdrpInitializeNode+0x1d3",
               "ntdll!LdrpLoadDllInternal+0x19a", "ntdll!LdrpLoadDll+0xa8", "ntdll!LdrLoadDll+0xe4"])
    assert analyzed(text, db)[1] != "loader-lock"


def test_near_miss_a_critical_section_of_the_program_is_a_plain_lock(db):
    text = _k(_CS_WAIT + ["ntdll!RtlEnterCriticalSection+0x2c", "app!Cache::Lookup+0x3c4", "app!main+0x28a"])
    assert analyzed(text, db)[1] == "lock"


def test_the_loader_locks_owner_from_cs_waits_for_the_crts_lock(db):
    text = real_text("vswhere/vswhere-87-1.txt")
    snap, wait = analyzed(text, db)
    assert wait == "lock"
    assert found(snap).get("dynamic-loader-lock-deadlock", 0) >= 0.6
    # the owner's stack under "OwningThread Stack =" is thread 0x2878's, its x86 annotations dropped
    t = next(t for t in snap.processes[0].threads if t.frames)
    assert t.tid == 0x2878
    assert [f.function for f in t.frames][:4] == ["ZwWaitForSingleObject", "RtlpWaitOnCriticalSection",
                                                  "RtlEnterCriticalSection", "__acrt_lock"]


def test_near_miss_cs_of_a_program_lock_is_no_loader_deadlock(db):
    text = real_text("vswhere/vswhere-87-1.txt").replace("ntdll!LdrpLoaderLock+0x0", "app!g_cacheLock+0x0")
    snap, wait = analyzed(text, db)
    assert wait == "lock"
    assert "dynamic-loader-lock-deadlock" not in found(snap)


_LOCKS = ("CritSec %s+0 at 77e8c0e0\nWaiterWoken        No\nLockCount          1\nRecursionCount     1\n"
          "OwningThread       1c44\nEntryCount         0\nContentionCount    1\n*** Locked\n\n")
_OWNER_K = ("   1  Id: 1a2c.1c44 Suspend: 1 Teb: 00000000`00a1f000 Unfrozen\n"
            + _k(_CS_WAIT + ["ntdll!RtlEnterCriticalSection+0x3e", "plugin!Registry::Add+0x20", "plugin!DllMain+0x41"]))


def test_locks_shows_the_loader_lock_held_by_a_thread_waiting_for_a_program_lock(db):
    snap, wait = analyzed(_LOCKS % "ntdll!LdrpLoaderLock" + _OWNER_K, db)
    assert wait == "lock" and "dynamic-loader-lock-deadlock" in found(snap)


def test_near_miss_locks_shows_only_a_program_lock_held(db):
    snap, wait = analyzed(_LOCKS % "app!g_registryLock" + _OWNER_K, db)
    assert wait == "lock" and "dynamic-loader-lock-deadlock" not in found(snap)


def _two_threads(other: list) -> str:
    dllmain = _CS_WAIT + ["ntdll!RtlEnterCriticalSection+0x3e", "plugin!Registry::Add+0x20", "plugin!DllMain+0x41",
                          "plugin!dllmain_dispatch+0x8f", "ntdll!LdrpCallInitRoutine+0x61",
                          "ntdll!LdrpInitializeNode+0x1d3", "ntdll!LdrpPrepareModuleForExecution+0xbf",
                          "ntdll!LdrpLoadDllInternal+0x19a", "ntdll!LdrpLoadDll+0xa8", "ntdll!LdrLoadDll+0xe4",
                          "KERNELBASE!LoadLibraryExW+0x161", "app!LoadPlugin+0x2a"]
    return (".  0  Id: 1a2c.1b30 Suspend: 1 Teb: 00000000`00a1d000 Unfrozen\n" + _k(dllmain)
            + "   1  Id: 1a2c.1c44 Suspend: 1 Teb: 00000000`00a1f000 Unfrozen\n" + _k(other))


def test_a_dllmain_waiting_for_a_lock_whose_holder_waits_for_the_loader_is_the_deadlock(db):
    snap, _wait = analyzed(_two_threads(_CS_WAIT + ["ntdll!LdrpAcquireLoaderLock+0x2c", "ntdll!LdrpLoadDll+0x28a",
                                                    "ntdll!LdrLoadDll+0x99", "KERNELBASE!LoadLibraryExW+0xca",
                                                    "app!Registry::LoadCodec+0x10"]), db)
    assert "dynamic-loader-lock-deadlock" in found(snap)


def test_near_miss_the_other_thread_waits_for_a_program_lock_not_the_loader(db):
    snap, _wait = analyzed(_two_threads(_CS_WAIT + ["ntdll!RtlEnterCriticalSection+0x2c", "app!Queue::Pop+0x10",
                                                    "app!Worker+0x20"]), db)
    assert "dynamic-loader-lock-deadlock" not in found(snap)


# --- GNU OpenMP's pool in a process that forked ------------------------------------------------

def test_the_parent_waiting_for_its_forked_child_with_libgomps_pool(db):
    text = real_text("openblas/openblas-1456-1.txt")
    snap, wait = analyzed(text, db)
    assert wait == "child"
    assert 0 < found(snap).get("gnu-openmp-after-fork", 0) < 0.8  # the child itself is not in the paste
    main = next(t for t in snap.processes[0].threads if t.tid == 30393)
    assert [f.function for f in main.frames] == ["__libc_wait"]  # gdb's stop line on attaching


_POOL = """Thread 2 (Thread 0x7f583623d700 (LWP 4243)):
#0  futex_wait (val=16, addr=0x1a74b44) at ../../../src/libgomp/config/linux/x86/futex.h:45
#1  do_wait (val=16, addr=0x1a74b44) at ../../../src/libgomp/config/linux/wait.h:67
#2  gomp_barrier_wait_end (bar=0x1a74b40, state=16) at ../../../src/libgomp/config/linux/bar.c:48
#3  0x00007f583e6a3418 in gomp_thread_start (xdata=<optimized out>) at ../../../src/libgomp/team.c:122
#4  0x00007f583e8bd6ba in start_thread (arg=0x7f583623d700) at pthread_create.c:333
#5  0x00007f583e3d141d in clone () at ../sysdeps/unix/sysv/linux/x86_64/clone.S:109

"""


def test_near_miss_a_function_of_another_library_named_wait_is_no_child_wait(db):
    # Ray's Cython ``wait`` (_raylet.so) under ray.wait: a future, not glibc's wait()
    assert analyzed(real_text("ray/ray-22349-1.txt"), db)[1] == "future"


def test_near_miss_a_child_started_by_system_execs_a_program(db):
    text = _POOL + """Thread 1 (Thread 0x7f583ecdb780 (LWP 4242)):
#0  0x00007f583e8c6ede in __libc_wait (stat_loc=0x7fff52b80024) at ../sysdeps/unix/sysv/linux/wait.c:29
#1  0x00007f583e8c7000 in do_system (line=0x400a00 "sort data.txt") at ../sysdeps/posix/system.c:148
#2  0x0000000000400800 in main () at run.c:20
"""
    snap, wait = analyzed(text, db)
    assert wait == "child"
    assert "gnu-openmp-after-fork" not in found(snap)


def test_near_miss_a_process_with_the_pool_that_waits_for_no_child(db):
    text = _POOL + """Thread 1 (Thread 0x7f583ecdb780 (LWP 4242)):
#0  0x00007f583e8c6ede in __lll_lock_wait () from /lib/x86_64-linux-gnu/libpthread.so.0
#1  0x00007f583e8c7000 in pthread_mutex_lock () from /lib/x86_64-linux-gnu/libpthread.so.0
#2  0x0000000000400800 in main () at run.c:20
"""
    snap, wait = analyzed(text, db)
    assert wait == "lock"
    assert "gnu-openmp-after-fork" not in found(snap)


def test_near_miss_the_stop_line_belongs_only_to_the_attached_thread():
    text = real_text("openblas/openblas-1456-1.txt").replace("Attaching to process 30393", "Attaching to process 999")
    threads = parse_text(text).processes[0].threads
    assert not next(t for t in threads if t.tid == 30393).frames


# --- faulthandler's dumper faulting ------------------------------------------------------------

def test_faulthandlers_watchdog_stopped_in_its_frame_walk_crashed(db):
    assert analyzed(real_text("cpython/cpython-131580-1.txt"), db)[1] == "crashed"


_DUMPING = """#0  0x0000fffff7e1 in write () from /lib64/libc.so.6
#1  0x0000000000751 in _Py_write_noraise (fd=2, buf=0xffff, count=10) at Python/fileutils.c:1950
#2  0x0000000000762 in _Py_DumpASCII (fd=2, text=0xffff) at Python/traceback.c:850
#3  0x0000000000763 in dump_frame (fd=2, frame=0xfffff7fea1f0) at Python/traceback.c:920
#4  0x000000000076254c in dump_traceback (fd=2, tstate=0xaeb528, write_header=0) at Python/traceback.c:1007
#5  0x0000000000762710 in _Py_DumpTracebackThreads (fd=2, interp=0x0, current_tstate=0x0) at Python/traceback.c:1114
#6  0x00000000007773b4 in faulthandler_thread (unused=0x0) at ./Modules/faulthandler.c:631
#7  0x000000000075e77c in pythread_wrapper (arg=<optimized out>) at Python/thread_pthread.h:242
#8  0x0000fffff7def188 in start_thread () from /lib64/libc.so.6
"""


def test_near_miss_faulthandler_dumping_in_its_write_did_not_crash(db):
    assert analyzed(_DUMPING, db)[1] not in ("crashed", None)


def test_near_miss_a_programs_own_dump_frame_is_no_faulthandler(db):
    # (cut at its top: a lone ``bt`` from its #0 stopped in the program's code is a crash by itself)
    text = ("#1  dump_frame (fd=2, frame=0x1) at src/debug.c:10\n"
            "#2  0x0000000000400800 in report (ctx=0x2) at src/debug.c:40\n"
            "#3  0x0000000000400900 in main () at src/main.c:5\n")
    assert analyzed(text, db)[1] != "crashed"


def test_near_miss_an_unowned_critical_section_claims_no_stack():
    text = ("-----------------------------------------\nCritical section   = 0x770620c0 (app!g_lock+0x0)\n"
            "NOT LOCKED\nOwningThread       = 0x00000000\n"
            + _k(_CS_WAIT + ["ntdll!RtlEnterCriticalSection+0x2c", "app!main+0x28a"]))
    threads = parse_text(text).processes[0].threads
    assert len(threads) == 1 and threads[0].tid is None and len(threads[0].frames) == 5
