"""Lines that only a hang or crash report writes to a log: how the text reader recognises a log
without frames (``acquire/text/log.py``) and how triage tells a log-only process worth a finding
from an empty one (``analyze/triage.py``).  Searched anywhere in a line; linear patterns only.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Dict, List, Optional

from hanganalyze import datapaths
from hanganalyze.linememo import by_content

#: Lines that only a hang or crash report writes (searched anywhere in a line).
KNOWN_PATTERNS = [
    r"Watchdog caught collective operation timeout",
    # ... the rest of torch's report of it (a paste's chunk that starts below its first line), and the
    # flight recorder's analysis of a collective some ranks never finished
    r"ran for \d+ milliseconds before timing out|failure detected by watchdog at work sequence id",
    r"PG status: last enqueued work: \d+|Timeout at collective: \w+, #\d+|\] joined but didn't finish collective #\d+",
    r"ProcessGroupNCCL'?s? watchdog",
    r"\[PG \S* ?Rank \d+\].*(timeout|Timeout|heartbeat|watchdog)",
    r"ProcessGroupNCCL\.cpp:\d+",
    r"ProcessGroupWrapper\.cpp:\d+",
    r"\bNCCL (INFO|WARN)\b",
    # NCCL 2.0-2.3's records had no "NCCL" word: "host:pid:tid [dev] misc/ibvwrap.cu:61 WARN msg"
    r"^\S+:\d+:\d+ \[\d+\] [\w/]+\.(?:cu|cc|cpp|h):\d+ (?:WARN|INFO) ",
    r"subset of ranks are waiting for remainder of ranks",
    r"One or more tensors were submitted to be reduced",
    r"[Rr]endezvous\b.*\bmay be stuck",
    r"Waiting to connect to client mesh master\b",  # torch_xla's mesh service (the TPU job's rendezvous)
    r"This thread has been waiting for \d+",
    r"Detected mismatch between collectives",
    # the flight recorder's analysis script's report of a collective whose records disagree across ranks
    r"^Collective sequence number: \d+ has errors$|Culprit rank \d+; Error type: [A-Z_]+",
    r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]",  # glog / abseil
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]",  # TensorFlow's logging
    r"^\[[IWEF] \S+\.(cpp|cc|h):\d+\]",  # c10 logging
    r"Fatal Python error: ",
    # CPython 3.10+'s fatal error path lists the extension modules loaded (under the tracebacks)
    r"^Extension modules: \w",
    # gdb's line where a fatal signal stopped the process (live) or ended it (a core)
    r"(?:received|terminated with) signal SIG(?:SEGV|ABRT|BUS|FPE|ILL|TRAP|SYS)\b",
    # a stack dump's thread header (faulthandler's, gdb py-bt's) left as a line: its frames were unreadable
    # (several processes writing one stderr at once), but only a crash or a hang dump writes it
    r"\(most recent call first\):",
    r"terminate called (without an active exception|after throwing|recursively)",
    # an IDE's (PyCharm's) line for a process a signal or a Windows fault ended, fish's, zsh's job line
    r"Process finished with exit code -?\d+ \((?:interrupted by signal \d+: SIG[A-Z]+|0x[Cc]000[0-9A-Fa-f]{4})\)",
    r"terminated by signal SIG(?:SEGV|ABRT|BUS|FPE|ILL)\b",
    # an exit status or a "died by signal N" line of a fatal signal, Windows' fault codes as numbers, Ray's
    # crashed worker, a C++ pure virtual call (the same lines as waits.yaml's crashed messages)
    r"\b(?:[Ee]xit(?:ed)?|[Rr]eturned|completed|finished|terminated)\b[^\n]{0,40}?\b(?:code|status|value)\b[\s:=]*"
    r"(?:-(?:4|6|7|8|11)|13[2-6]|139)\b(?!\s*(?:ms|s|seconds|%))",
    r"\b(?:exited|terminated|killed|died|crashed)\b (?:with|by|on|due to|from) (?:a |the )?(?:fatal )?signal:? ?"
    r"(?:4|6|7|8|11|SIG(?:SEGV|ABRT|BUS|FPE|ILL))\b",
    # (a debugger's first-chance report is not one: a handler may take the exception)
    r"^(?!.{0,300}(?:\bException thrown\b|[Ff]irst[- ]chance)).{0,2000}?"
    r"\b(?:0x[Cc]0000005|-1073741819|3221225477|0x[Cc]0000374|-1073740940|3221226356|0x[Cc]0000409|-1073740791|"
    r"3221226505)\b",
    r"WorkerCrashedError|The worker died unexpectedly while executing this task|\bpure virtual method called\b",
    # Tcl aborting a process whose Tk objects a thread other than the interpreter's deleted (tkinter)
    r"Tcl_AsyncDelete: async handler deleted by the wrong thread",
    # torch elastic's agent in a rendezvous round; c10d's store client failing to resolve the master's name
    r"Rendezvous'ing worker group|Attempting to join next rendezvous|Keep-alive key \S+ is not renewed|"
    r"Rende?z?vous version \d+ is incomplete",
    r"\[c10d\] The (?:IPv[46] )?network addresses? of .{1,300}? cannot be retrieved \(gai error",
    # gRPC's channel reaching no address of its target; JAX's coordination agent failing on it
    r"UNAVAILABLE: ?failed to connect to all addresses|WatchTasksAsync failed for task \d+",
    # Home Assistant's list of the non-daemon threads its exit waits for
    r"^Found \d+ non-daemonic threads?\.",
    # a service's own shutdown record that it waits for one of its threads to stop (celery's "Consumer:
    # Waiting for broadcast thread to shutdown..."): a timestamped record, not a sentence of prose
    r"^\S{0,3}\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d.{0,120}?\bWaiting for (?:the )?(?:\w+ ){0,3}threads? to "
    r"(?:finish|exit|shut ?down|stop|terminate|end)\b",
    # vLLM V1's front end while its engine-core processes have not come up
    r"Waiting for \d+ local, \d+ remote core engine proc\(s\) to start",
    r"^\[\d+\]\s+(?:[+-]\s+)?\d+ (?:segmentation fault|abort|bus error)",
    # a fatal check's stack (glog / abseil, Ray's RAY_CHECK), MPI's fatal error handler, a rank's MPI_Abort,
    # Ray's driver on a worker dead of a system error; faulthandler's Windows line cut at its start
    r"Check failed: |\*\*\* Check failure stack trace: \*\*\*|\*\*\* StackTrace Information \*\*\*",
    r"MPI_ERRORS_ARE_FATAL \(processes in this communicator will now abort|MPI_ABORT was invoked on rank \d+",
    r"A worker died or was killed while executing a task by an unexpected system error",
    r"^fatal exception: (?:access violation|stack overflow|illegal instruction|in page error|int divide by zero)",
    r"Unhandled exception caught in c10/util/AbortHandler\.h",  # c10's terminate handler, then abort()
    # a macOS crash report's exception and termination lines; a raylet that could not register a worker
    r"^Exception Type:\s+EXC_(?:BAD_ACCESS|BAD_INSTRUCTION|BREAKPOINT|CRASH|ARITHMETIC|GUARD)\b",
    r"^Termination:\s+SIGNAL / SIG",
    r"Failed to register worker \w+ to Raylet",
    # Qt's abort for a running QThread destroyed, Apple's frameworks' assertion, a CUDA check's exception
    r"QThread: Destroyed while thread (?:'[^']{0,200}' )?is still running|(?:^|: )failed assertion [`']",
    r"^(?:.{0,200}\s)?Failed: \S+\.cuh?:\d+ '[^']{1,200}'\s*$",
    r"CreateSession still waiting for response from worker: /job:",  # TF 1.x's master, a task missing
    # mpirun's lines for a rank that exited with an error or a signal (the job aborted after it)
    r"Primary job\s+terminated normally, but \d+ process(?:es)? returned|mpirun noticed that process rank \d+ with PID",
    # a scheduler or a container runtime that ended the job (Slurm, srun, Ray's dead actor, a container's exit code)
    r"slurmstepd: error: \*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+|^srun: error: \S+: tasks? [\d,\-]+: \w",
    r"The actor is dead because its worker process has died|\. Ray killed this worker \(ID: ",
    r"\"?exitCode\"?:\s*(?:13[4-9])\b|\"?reason\"?:\s*\"?OOMKilled\b|^\s*Exit Code:\s+13[4-9]\b",
    # a Rust panic (its thread's end; the process's under panic=abort or in the main thread), the Rust runtime's abort
    r"^thread '[^']{0,200}'(?: \(\d{1,10}\))? panicked at |\bpanicked while processing panic\b|^fatal runtime error: ",
    # the shells' line for a process SIGKILL ended (the OOM killer mostly, or a kill -9)
    r"^(?:Killed|zsh: killed\s+\S.*|\[\d+\]\s+(?:[+-]\s+)?(?:\d+ )?Killed\s+\S.*|"
    r".{0,200}: line \d+: +\d+ Killed\s+\S.*)$",
    r"Segmentation [Ff]ault|Aborted \(core dumped\)|Bus error \(core dumped\)",
    # bash's line for a process the signal ended without a core file (no "(core dumped)"), tcsh's "Abort"
    r"^(?:Aborted|Abort|Illegal instruction|Bus error|Floating point exception)(?: \(core dumped\))?$",
    # macOS shells' lines for a process killed by a signal (bash / zsh print the signal's number)
    r"^(?:Abort trap|Illegal instruction|Bus error|Segmentation fault|Floating point exception): \d{1,2}$",
    # the shells' lines for the other fatal signals, glibc's fatal heap checks and assert() (both abort)
    r"\b(?:Illegal instruction|Floating point exception|Trace/breakpoint trap)\s*\(core dumped\)",
    r"^zsh: segmentation fault|\b(?:double free or corruption|free\(\): invalid pointer|malloc\(\): corrupted)",
    r"\b(?:malloc_consolidate|_int_malloc|_int_free|realloc|free)\(\): (?:invalid chunk size|unaligned fastbin chunk "
    r"detected|invalid old size|invalid next size|double free detected in tcache \d)",
    r"\bcorrupted (?:size vs\. prev_size|double-linked list)|munmap_chunk\(\): invalid pointer|stack smashing detected",
    r"CUDA error: ?out of memory\b|cuda runtime error \(2\) : out of memory",
    r"Fatal glibc error: |: Assertion `.{1,400}' failed\.$",
    # valgrind's memory errors and its line for the signal that ended the process
    r"^(?:==\d+== )?(?:Invalid (?:read|write) of size \d+|Invalid free\(\) / delete)",
    r"^(?:==\d+== )?Jump to the invalid address stated",
    r"Process terminating with default action of signal \d+ \(SIG",
    # an uncaught exception's abort: Cocoa's NSException, libc++abi's C++ exception (macOS's "terminate called")
    r"\*\*\* Terminating app due to uncaught exception\b",
    r"libc\+\+abi(?:\.dylib)?: terminat(?:ing|e called) (?:due to|with) (?:an )?uncaught exception",
    # faulthandler.dump_traceback_later()'s header over the dump it writes when its timeout expires
    # (pytest's faulthandler_timeout): a thread that did not finish in time (a paster's comment may follow)
    r"^Timeout \(\d{1,4}:\d\d:\d\d(?:\.\d+)?\)!(?:\s|$)",
    r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\) (is killed by signal|exited unexpectedly)",  # torch's DataLoader
    # torch's DataLoader worker's own signal handler, for the same deaths
    r"Unexpected (bus error|segmentation fault|floating-point exception) encountered in worker",
    r"DEADLINE_EXCEEDED|Deadline Exceeded",
    r"torch\.distributed\.\S+ ?(Error|Exception|Timeout)",
    r"^Process \d+: .+$",  # py-spy's header (its dump may have failed: "failed to get os threadid")
    r"^Error: failed to (get|find|open|read) ",  # py-spy's own errors
    r"[Ii]nitializing (distributed|ddp): GLOBAL_RANK: \d+, MEMBER: \d+/\d+",  # Lightning's rendezvous banner
    r"Waiting in store based barrier to initialize process group for rank: \d+",  # c10d, before 2.1
    r"^\s*(\*\*\* )?SIG(SEGV|BUS|ABRT|FPE|ILL)\b",  # a crash handler's first line (glog's "*** SIGSEGV received")
    r"Initializing TorchBackend in DeepSpeed with backend",  # DeepSpeed's rendezvous banner (init_distributed)
    r"Objects [0-9a-f]{16,} are still not local after",  # Ray's ray.get waiting for an object (plasma store)
    r"\b(Active|Sleeping)\b.{0,200}\bnccl\w*Kernel\w*\(",  # cuda-gdb's "info cuda kernels" row of a NCCL kernel
    r"Windows fatal exception: |Access violation - code c0000005|^Faulting application name: ",  # Windows crashes
    r"^FAILURE_BUCKET_ID:\s+\S",  # WinDbg's !analyze of a dump (a crash's, or a hang's: its bucket says HANG)
    # SGLang's scheduler watchdog (a forward batch that did not finish) and its launcher's line for a dead child;
    # vLLM's executor when a worker does not answer
    r"[Ww]atchdog timeout \(self\.watchdog_timeout=\d+|Received sigquit from a child proces",
    r"RPC call to \w+ timed out",
    # uWSGI's harakiri: the master killed a worker whose request outlasted --harakiri (a hang, or a slow request)
    r"\bHARAKIRI ON WORKER \d+",
    # ... gunicorn's arbiter killing a worker that missed its heartbeat for --timeout (a hang or a slow request)
    r"\bWORKER TIMEOUT \(pid:\d+\)",
    # the kernel's line for a process a fault killed (dmesg, journalctl -k): a segfault, a general
    # protection fault or an invalid opcode, with the faulting library; compute-sanitizer's (cuda-memcheck's)
    # invalid access of a kernel; UBSan's runtime error (a report, the process goes on)
    r"\b\S{1,100}\[\d{1,10}\]: segfault at [0-9a-f]{1,16} ip [0-9a-f]{1,16} sp [0-9a-f]{1,16} error \d+|"
    r"\btraps: \S{1,100}\[\d{1,10}\] (?:general protection(?: fault)?|trap invalid opcode|trap divide error) ip:",
    r"^=+ +Invalid __(?:global|shared|local)__ (?:read|write|atomic) of size \d+|^=+ +Program hit cudaError\w+",
    r"^\S{1,500}:\d{1,7}:\d{1,5}: runtime error: ",
    # TensorFlow's coordinator giving up joining its threads at the end (a queue runner that never ends);
    # CPython's regrtest naming a test still running after minutes (its line every 30 s: evidence over time)
    r"Coordinator stopped with threads still running: ",
    r"^\d{1,3}:\d\d:\d\d load avg: [\d.]+ running(?: \(\d+\))?: \S+ \(\d+ min \d+ sec\)",
    # pytest-timeout's banner over the stacks it dumps (a chunk may end before them); a supervisor's (a CI
    # step's, a harness's) line that it killed a run past its time limit
    r"^\+{5,} Timeout \+{5,}$",
    # GitHub Actions ending a job: past its time limit (timeout-minutes), or cancelled (the limit, a
    # newer run of the same group, or by hand: the log's last lines before it show where it stood)
    r"has exceeded the maximum execution time of \d+ minutes|^(?:\S+\s+)?##\[error\]The operation was canceled\.$",
    # WinDbg's !analyze of a crash dump: its exception record's code (an access violation, a heap
    # corruption, a fast fail), in the forms the analysis prints it
    r"\bExceptionCode\(?:? ?\(?[Cc]0000(?:005|374|409)\b|\bDEBUG_FLR_EXCEPTION_CODE\([Cc]0000(?:005|374|409)\)|"
    r"^EXCEPTION_CODE(?:_STR)?:\s+\(?(?:NTSTATUS\)\s+)?(?:0x)?[Cc]0000(?:005|374|409)\b",
    r"(?i:\btime(?:d)? ?out\b(?: after \d+ ?(?:s|sec|seconds|m|min|minutes))?[^\n]{0,40}\bkill(?:ed|ing)\b|"
    r"\bkill(?:ed|ing)\b[^\n]{0,60}\b(?:after|on|due to) (?:a |the )?time ?out\b)",
    r"Process \d+ \(.{1,100}\) of user \d+ dumped core\b|^!{3,} Segfault encountered !{3,}$",
    r"NCCL operation \w+\(.{0,300}\) failed: |"
    r"Execution of replica \d+ failed: (?:INTERNAL|RESOURCE_EXHAUSTED|Resource exhausted)",
    # vLLM's V0 engine client, each time its poll for the engine process's output times out empty; V1's
    # client while its engine core process has not come up
    r"Waiting for output from MQLLMEngine|Waiting for \d+ core engine proc\(s\) to start",
    # vLLM's periodic engine stats with no prompt and no generated token in the interval while requests
    # run: the engine stopped stepping (or one step outlasted the interval); pastes shorten the words
    r"prompt (?:throughput|tp):? +0\.0\b.{0,60}?generation (?:throughput|tp):? +0\.0\b.{0,60}?Running: [1-9]\d* reqs",
    # a launcher's line for a rank killed by a signal: DeepSpeed's, torchrun's, vLLM's
    r"sigkill_handler\].{0,4000} exits with return code = -\d+|\(exitcode: -\d+\) local_rank: \d+",
    r"exitcode\s*: -\d+ \(pid: \d+\)|Worker proc \S+ died unexpectedly|WorkerProc failed to start",
    # a macOS crash report's exception line (its threads may be cut from the paste), the Objective-C
    # runtime's fork-safety abort, a sanitizer's report header
    r"^Exception Type:\s+EXC_\w+\s+\(SIG[A-Z]{2,6}\)",
    r"may have been in progress in another thread when fork\(\) was called",
    r"==\d+==\s?ERROR: (Address|Thread|Memory|Leak|UndefinedBehavior)Sanitizer",
    # ... and the lines of its report below that header (a paste cut above it)
    r"^Address 0x[0-9a-f]{4,16} is located in stack of thread T\d+",
    r"^SUMMARY: (?:Address|Thread|Memory|UndefinedBehavior)Sanitizer: \S",
    # a crash reporter's header over the stack it writes on a fatal signal (Datadog's crashtracker)
    r"^Stack Trace \(Datadog Crashtracker [\d.]+\)$",
    # XLA's TPU client when a program does not finish (a TPU hang: a deadlock between cores or a stuck program)
    r"TPU Execute is taking a long time",
    # macOS spindump's report of an application that stopped answering (its header, the threads cut)
    r"^Event:\s+hang$|\(process was unresponsive for \d+ seconds before sampling\)",
    # Windows Error Reporting's signature of a window that stopped answering (its message loop blocked)
    r"^\s*(?:Problem )?Event Name:\s+AppHang\w*",
    # Qt's warning as a thread emits a signal over a BlockingQueuedConnection to its own thread (it then
    # waits on a semaphore only its own, now blocked, event loop would release)
    r"Dead lock detected while activating a BlockingQueuedConnection",
    # issue 32, the logs of ML jobs: NCCL's errors as torch raises them (no NCCL_DEBUG line) and its
    # transport's own words; torch elastic's agent and failure summary; the c10d store; CUDA's sticky
    # kernel errors; DeepSpeed's launcher for any exit; vLLM's engine and SGLang's scheduler dying;
    # Ray's dead actors and its memory monitor; the kernel's OOM killer
    r"NCCL error in: \S+|\bncclUnhandledCudaError\b|\bncclSystemError\b|\bncclInternalError\b|\bncclRemoteError\b",
    r"NET/IBP? ?: ?Got completion from peer|Bootstrap ?: ?no (?:NCCL_SOCKET_IFNAME )?(?:socket )?interface found",
    r"ChildFailedError|Sending process \d+ closing signal SIG[A-Z]+|Signal \d+ \(SIG[A-Z]+\) received by PID \d+",
    # vLLM's shared-memory ring buffer with no free block (the engine writing) or no new step (a worker reading)
    r"No available (?:shared memory broadcast )?block found in \d+ seconds?",
    # abseil's failure signal handler's banner (XLA, TensorFlow, JAX, torch_xla): a crash signal, or a
    # SIGTERM "from PID N" that a launcher, a scheduler or a user sent a process that hung
    r"^\*\*\* SIG[A-Z]+ received by PID \d+ \(TID \d+\)",
    r"RendezvousTimeoutError|RendezvousClosedError|The server socket has failed to (?:listen|bind)",
    r"\[c10d\][^\n]{0,300}?(?:failed|timed out|[Tt]imeout|Connection reset by peer|Broken pipe)",
    r"CUDA error: (?:an illegal memory access|device-side assert|misaligned address|an illegal instruction)",
    r"CUDA error: unspecified launch failure",
    # Ray's object store finding /dev/shm smaller than it asks for (it falls back to disk, slowly; a
    # container's 64 MB /dev/shm)
    r"System memory request exceeds memory available in /dev/shm",
    r"CUDA kernel errors might be asynchronously reported at some other API call",
    r"CUBLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|ALLOC_FAILED)|cudaErrorIllegalAddress",
    r"sigkill_handler\] Killing subprocess \d+",
    r"Engine core proc \S+ died unexpectedly|EngineDeadError|Scheduler hit an exception",
    r"The actor died unexpectedly before finishing this task|RayActorError",
    r"Task was killed due to the node running low on memory",
    r"System memory low at node with IP \S+\. Used memory .{0,80} exceeds threshold",
    # Go's runtime finding every goroutine blocked (it exits: a deadlock of channels or locks)
    r"^fatal error: all goroutines are asleep - deadlock!",
    # asyncio's default executor that did not join its threads at the loop's shutdown (a thread still runs)
    r"The executor did not finish(?:ing)? joining its threads within \d+ seconds",
    # a thread pool's own warning that every worker is busy while jobs queue up (Home Assistant's WorkerPool)
    r"All \d+ (?:worker )?threads are busy and \d+ (?:jobs|tasks) (?:are )?(?:pending|queued)",
    r"Workers? \(tasks / actors\) killed due to memory pressure|[Oo]ut of memory: Killed process \d+",
]
#: ``KNOWN_LINES``: the patterns as one regex.  ``EACH_KNOWN``: each pattern alone: a line broken
#: in two by a paste is joined where the two halves make a known line that neither half is
#: (``acquire/text/log.py``).  Both are compiled on first use (``__getattr__``): a run over a live
#: process with no log compiles neither (start-up time, issue 21).
_LAZY = {
    "KNOWN_LINES": lambda: re.compile("|".join(KNOWN_PATTERNS)),
    "EACH_KNOWN": lambda: [re.compile(p) for p in KNOWN_PATTERNS],
}


def __getattr__(name: str) -> Any:
    make = _LAZY.get(name)
    if make is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = globals()[name] = make()
    return value
#: The note faulthandler's parser leaves when a dump marks a current thread (a fatal error or an
#: explicit dump_traceback): triage reads it to tell a crash from a hang.
CURRENT_NOTE = "faulthandler marked a current thread (written on a fatal error, or by faulthandler.dump_traceback())"
#: The note systemd-coredump's reader leaves on a report whose signal line the paste cut: the report is
#: written only for a process that dumped core, and its first stack is the thread that took the signal
#: (a fatal one; SIGQUIT, how a hung process is made to dump core, is the one exception).
DUMPED_NOTE = ("a systemd-coredump report with its signal line cut: the process dumped core on a signal its first "
               "thread took (a fatal signal; a SIGQUIT sent by hand to a hung process dumps core too)")
#: The note systemd-coredump's reader leaves on a chunk of its stack rows cut above every thread header
#: (elfutils' "#N 0xADDR name (lib + 0xOFF)" rows, a form no debugger prints): the process dumped core,
#: but which thread took the signal the chunk does not say (``crashframes.crash_not_shown``).
DUMPED_CUT_NOTE = ("systemd-coredump stack rows cut above their thread's header: the process dumped core (a fatal "
                   "signal, or a SIGQUIT sent by hand), but the chunk does not say which thread took the signal")
#: gdb's "Thread N received signal SIGSEGV" over ``bt``s of other threads only (thread N's frames and
#: its stop line cut from the paste): the crash is thread N's, which the text does not show.
SIGNAL_THREAD_CUT_NOTE = ("gdb's signal line names a thread whose frames the text leaves out: the crash is that "
                          "thread's, not one the text shows")
#: The note QGIS's crash report reader leaves: QGIS's crash handler writes its stack only when the
#: application crashed, and the stack is the crashing thread's (acquire/text/qgiscrash.py).
QGIS_NOTE = "a QGIS crash report (its crash handler writes the crashing thread's stack): the application crashed"
#: The note on a traceback under threading's "Exception in thread NAME:" (its excepthook): the
#: exception left the thread's run(), nothing caught it, the thread ended (the process may go on).
EXCEPTHOOK_NOTE = "threading's excepthook printed it (Exception in thread ...): nothing caught it, the thread ended"
#: The note on a traceback under multiprocessing's "Process NAME:" (BaseProcess._bootstrap): the
#: child's run() raised, nothing in the child caught it, the child process ended (exit code 1).
MP_CHILD_NOTE = "multiprocessing printed it (Process ...:): nothing in the child caught it, the child process ended"
#: Notes that make a process's current thread the crashed one where no log line says so.
CURRENT_NOTES = (CURRENT_NOTE, DUMPED_NOTE, QGIS_NOTE)
#: The note macOS's crash report reader leaves on a text that is ReportCrash's (its ``Thread N:``
#: headers, or its rows' tab between the image and the address): macOS writes such a report only
#: for a process that crashed, so the process crashed even where the paste holds none of the
#: crashing thread's lines (triage: ``crashframes.crash_not_shown``).
REPORT_NOTE = ("a macOS crash report (ReportCrash writes one when a process crashes): the process crashed, "
               "though the thread that crashed is not in the text")
#: How the notes of a thread on a GPU start (cuda-gdb's device focus in a ``bt``, its ``info cuda threads``
#: rows): its frames are a kernel's, so where no frame name places its wait elsewhere (an NCCL kernel's
#: collective), the triage reads it as the GPU work that does not finish.
DEVICE_NOTE = "cuda-gdb device"
#: gdb's thread header without thread debugging (``Thread 1 (process 60961)``: libthread_db was not
#: loaded): gdb lists the threads it knows, which may be the main one alone (``analyze/absence.py``).
NO_THREAD_DB_NOTE = "gdb without thread debugging: its thread list may leave threads out"
#: How the note on a live process read alone (``--pid``) that has child processes starts
#: (``acquire/many.py``): the report shows it among the process's facts, and the triage's advice
#: for a parent (``analyze/programkind.py``'s ``parent`` kind) reads it.
CHILDREN_NOTE = "child processes not in this report: "


@lru_cache(maxsize=None)
def _data_patterns() -> List[re.Pattern[str]]:
    """The log-line regexes of the signature database (``messages:`` in ``signatures/*.yaml``): a
    line a known bug's signature names is a known line too, so a log is never refused for lacking
    one of the lines above (a Horovod stall's later lines, filelock's debug log of a lock never
    acquired).  Of the triage table's, only its crashed category's (a crash's own lines); its waits'
    read a log once it is one, and some are words prose uses ("deadlock"): a sentence is no evidence
    of a wait.  Read only on the refusal path (no dump format and no pattern above recognised the
    text)."""
    import yaml  # here: only on the refusal path

    found: List[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "messages" and isinstance(value, list):
                    # the first line of each alternative: the others may be context a signature also
                    # wants ("_inductor" anywhere beside "Attempting to use a closed pool"), no hang's
                    for item in value[:1]:
                        rx = item.get("regex") if isinstance(item, dict) else item
                        if isinstance(rx, str):
                            found.append(rx)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    try:
        folder = datapaths.builtin_signatures()
        files = sorted(folder.glob("*.yaml"))
    except Exception:  # noqa: BLE001 - no data folder: the patterns above only
        folder, files = None, []
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in files:
        try:
            walk(yaml.load(path.read_text(encoding="utf-8"), Loader=loader))
        except (OSError, yaml.YAMLError):
            continue  # a broken file is the signature loader's error to report, not this one's
    # ... and the triage's lines of a process that crashed (a shell's, a kernel's, a runtime's fatal
    # line; Windows' error report's exception code): a crash's own words, never a hang's prose, and
    # each one is a whole answer ("the log says this process crashed")
    try:
        table = yaml.load((folder / "triage" / "waits.yaml").read_text(encoding="utf-8"), Loader=loader)
        # (not the catch-all of bare words, "SIGSEGV", "Bus error", "Check failed": a log's prose says
        # them too, Ray's list of a dead worker's possible causes among them)
        found.extend(rx for rx in (table.get("crashed") or {}).get("messages") or []
                     if isinstance(rx, str) and "\\bSIGSEGV\\b" not in rx)
    except (OSError, TypeError, AttributeError, yaml.YAMLError):
        pass
    out = []
    for rx in found:
        try:
            out.append(re.compile(rx))
        except re.error:
            continue
    return out


def _count(lines: List[str], hit: Callable[[str], bool]) -> int:
    """How many of ``lines`` ``hit`` accepts, each distinct line tested once: a long log repeats its
    lines (a progress bar, NCCL's INFO spam, a loop's warning), and the patterns cost per line."""
    seen: Dict[str, bool] = {}
    n = 0
    for line in lines:
        ok = seen.get(line)
        if ok is None:
            ok = seen[line] = bool(hit(line))
        n += ok
    return n


@by_content
def data_known_lines(lines: List[str]) -> int:
    """How many lines a signature's log pattern finds (``_data_patterns``)."""
    pats = _data_patterns() if lines else []
    return _count(lines, lambda line: any(p.search(line) for p in pats)) if pats else 0


@by_content
def known_lines(lines: List[str]) -> int:
    """How many known log lines the text holds."""
    if not lines:
        return 0
    return _count(lines, (globals().get("KNOWN_LINES") or __getattr__("KNOWN_LINES")).search)


#: A Python exception line on a line of its own: ``ValueError: msg``, ``torch.OutOfMemoryError: msg``,
#: under torchrun's ``[rank1]: `` prefix or pytest's ``E   `` (the last line of a traceback whose frames a
#: paste cut, or a program's own print of the error).  A class name that ends as exceptions do.
EXCEPTION_LINE = re.compile(r"^(?:\[rank\d{1,6}\]:\s?|E\s+)?"
                            # a launcher's or an engine's record prefix: vLLM's and Ray's "(Worker_TP0 pid=12)",
                            # vLLM's "ERROR 12-29 15:21:11 [file.py:751]" (older: "file.py:145]")
                            r"(?:\([\w:.\-]{1,80}(?: [\w=.:,\-]{1,60}){0,3}\)\s?)?"
                            r"(?:(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
                            r"\[?[\w./\-]{1,200}:\d{1,6}\] ?)?(?:(?:[A-Za-z_]\w{0,80}\.){0,8}"
                            r"[A-Z]\w{0,80}(?:Error|Exception|Failure|Interrupt|Exit)|_?queue\.Empty)"
                            r"(?::(?:\s.{0,2000})?)?$")


def exception_line(lines: List[str]) -> Optional[int]:
    """The index of the first Python exception line among ``lines`` (each stripped), None if none."""
    for i, line in enumerate(lines[:20000]):
        s = line.strip()
        if s[:1].isalpha() or s[:1] in "[_(":
            if EXCEPTION_LINE.match(s):
                return i
    return None
