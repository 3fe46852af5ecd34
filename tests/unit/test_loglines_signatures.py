"""Logs of ML jobs (issue 32): a log with no stack that holds a known line is read, never refused;
the line names its bug class where it is specific enough (a signature with ``messages``) and the
triage says whether it tells a wait or a death; a log with no known line is told what it lacks and
what to capture.  Texts: tests/data/loglines/, real lines from public threads (the URL heads each
file); near misses are real lines of the same threads that use the same words for something else."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from helpers import sample_with_header

from hanganalyze import pipeline
from hanganalyze.acquire.text import parse_text
from hanganalyze.acquire.text.detect import LOG_WITHOUT_KNOWN_LINE
from hanganalyze.errors import InputError
from hanganalyze_gdbext.model import Snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "loglines"

#: (file, key phrase: every line holding it is removed for the near miss)
CASES = [
    ("nccl_ib_error12_nccl_1405.txt", "Got completion from peer"),
    ("nccl_ib_error12_old_nccl_1664.txt", "Got completion from peer"),
    ("nccl_no_socket_interface_mambatree_14.txt", "no socket interface"),
    ("nccl_ibv_create_qp_nccl_562.txt", "ibv_create_qp"),
    ("nccl_socket_connect_sglang_5594.txt", "socketStartConnect"),
    ("nccl_cuda_oom_opensora_386.txt", "out of memory"),
    ("elastic_sigkill_colossalai_3514.txt", "exitcode: -9"),
    ("elastic_sigkill_summary_cppo_6.txt", "9 ("),  # the exitcode line and the signal line
    ("elastic_sigabrt_mmseg_3106.txt", "6 ("),
    ("elastic_sigbus_colossalai_3556.txt", "exitcode: -7"),
    ("elastic_sigsegv_megatron_1880.txt", "11 ("),
    ("c10d_port_in_use_pytorch_85604.txt", "errno: 98"),
    ("c10d_port_in_use_new_vllm_39015.txt", "EADDRINUSE"),
    ("ray_oom_flingbot_11.txt", "memory"),  # the task's error and the raylet's kill line: each alone names it
    ("ray_oom_raylet_wmpo_3.txt", "killed due to memory pressure"),
    ("cuda_device_assert_lmeval_2293.txt", "ssert"),  # the kernel's Assertion lines and the error: each alone names it
    ("cuda_illegal_access_tegnas_19.txt", "illegal memory access"),
    ("gpu_oom_cuda_error_iim_28.txt", "out of memory"),  # a CUDA call's own error, not the allocator's
    ("gpu_oom_thc_runtime_error_motifs_58.txt", "out of memory"),  # PyTorch 0.4's THC error
]
#: Signatures this module tests with a real text and a near miss (test_signature_coverage).
COVERED = sorted({"nccl-ib-completion-error", "nccl-no-socket-interface", "nccl-ib-resource-setup-failed",
                  "nccl-socket-connect-failed", "nccl-cuda-out-of-memory", "rank-killed-sigkill", "rank-died-of-signal",
                  "c10d-store-port-in-use", "ray-memory-monitor-killed-worker", "cuda-device-side-assert",
                  "cuda-illegal-memory-access", "sglang-scheduler-watchdog-timeout", "gpu-out-of-memory"})
SERIOUS = {"crash", "deadlock", "hang", "error"}


def read(name: str) -> Tuple[str, Optional[str]]:
    """(body, expected signature or None): header lines start with '# '."""
    return sample_with_header(DATA / name)


def analyze(text: str, db) -> Snapshot:
    return pipeline.analyze(parse_text(text), db)


def signatures(text: str, db) -> List[str]:
    return [f.signature for f in analyze(text, db).findings]


def wait_of(snap: Snapshot) -> Optional[str]:
    return next((f.triage.wait for f in snap.findings if f.signature == "triage"), None)


def test_every_file_is_listed_and_sourced():
    listed = {c[0] for c in CASES} | set(TRIAGE) | {"deepspeed_exit1_5302.txt", "near_misses.txt",
                                                            "cuda_illegal_in_watchdog_lmdeploy_3048.txt"}
    assert {p.name for p in DATA.glob("*.txt")} == listed
    for p in DATA.glob("*.txt"):
        assert p.read_text().startswith("# source: https://github.com/"), p.name
    assert {read(name)[1] for name, _ in CASES} | {"sglang-scheduler-watchdog-timeout"} == set(COVERED)


@pytest.mark.parametrize("name,key", CASES)
def test_log_line_names_its_class(db, name, key):
    """The log alone (no stack) is read, not refused, and the line's class is the finding."""
    text, expect = read(name)
    found = signatures(text, db)
    assert expect in found, found
    # the other log-line classes stay quiet: each line says one thing
    assert not (set(found) & set(COVERED)) - {expect}, found


@pytest.mark.parametrize("name,key", CASES)
def test_near_miss_without_the_key_line(db, name, key):
    text, expect = read(name)
    kept = "\n".join(line for line in text.splitlines() if key not in line) + "\n"
    assert kept != text
    try:
        found = signatures(kept, db)
    except InputError:
        return  # nothing known left: refused with what to capture (test_log_without_known_line...)
    assert expect not in found


def test_real_lines_with_the_same_words_match_nothing(db):
    """NCCL's INFO lines about the same transport and bootstrap, another CUDA failure inside NCCL,
    the store's client failing to connect: no log-line class fires."""
    text, expect = read("near_misses.txt")
    assert expect is None
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            found = signatures(line + "\n", db)
        except InputError:
            continue
        assert not set(found) & set(COVERED), (line, found)


def test_a_rank_that_exited_with_an_error_is_no_signal(db):
    """DeepSpeed's launcher for a rank that exited with 1: a known line (not refused), no signal's death."""
    text, _ = read("deepspeed_exit1_5302.txt")
    snap = analyze(text, db)
    assert not {"rank-killed-sigkill", "rank-died-of-signal"} & {f.signature for f in snap.findings}
    assert wait_of(snap) is not None  # read as a log, with the triage's answer


def test_sigkill_is_a_lead_and_a_death_not_a_hang(db):
    """Signal 9 is mostly the OOM killer, not always: below the confident line; the triage says crashed."""
    for name in ("elastic_sigkill_colossalai_3514.txt", "elastic_sigkill_summary_cppo_6.txt"):
        snap = analyze(read(name)[0], db)
        f = next(f for f in snap.findings if f.signature == "rank-killed-sigkill")
        assert f.severity == "crash" and f.confidence < 0.8
        assert "dmesg" in " ".join(f.fix)
        assert wait_of(snap) == "crashed"


def test_other_signals_are_a_lead_naming_the_signal(db):
    """SIGABRT / SIGBUS / SIGSEGV: the class says what each means, below the confident line."""
    for name, words in (("elastic_sigabrt_mmseg_3106.txt", "SIGABRT"), ("elastic_sigbus_colossalai_3556.txt", "-7"),
                        ("elastic_sigsegv_megatron_1880.txt", "SIGSEGV")):
        snap = analyze(read(name)[0], db)
        f = next(f for f in snap.findings if f.signature == "rank-died-of-signal")
        assert f.severity == "crash" and f.confidence < 0.8
        assert any(words in e.text for e in f.evidence), [e.text for e in f.evidence]
        assert wait_of(snap) == "crashed"


#: Logs whose line tells the triage a wait or a death, with no bug class of their own (file -> wait).
TRIAGE = {
    "vllm_rpc_timeout_21899.txt": "future",            # the executor waited for a worker's answer
    "elastic_rendezvous_timeout_avhubert_19.txt": "collective",  # the agents' rendezvous
    "ray_actor_died_18586.txt": "crashed",              # the actor is gone
    "ray_oom_flingbot_11.txt": "crashed",
    "cuda_device_assert_lmeval_2293.txt": "crashed",
    "cuda_illegal_access_tegnas_19.txt": "crashed",
    "nccl_ib_error12_nccl_1405.txt": "crashed",         # NCCL's IB error completion: the rank's communicator fails
    "nccl_socket_connect_sglang_5594.txt": "crashed",   # ... but SGLang's scheduler died of it
    "c10d_store_reset_sglang_20859.txt": "collective",  # the store's client lost its server
    # an exit status that is a fatal signal's, Windows' access violation as a number, Ray's dead worker,
    # a C++ pure virtual call (std::terminate aborts next)
    "crash_exit_134_oneflow_2855.txt": "crashed",
    "crash_0xc0000005_ddddocr_86.txt": "crashed",
    "crash_ray_worker_died_5316.txt": "crashed",
    "crash_pure_virtual_yosys_2587.txt": "crashed",
}


@pytest.mark.parametrize("name,wait", sorted(TRIAGE.items()))
def test_triage_reads_the_line(db, name, wait):
    snap = analyze(read(name)[0], db)
    assert wait_of(snap) == wait
    triage = next(f for f in snap.findings if f.signature == "triage")
    assert "the log says" in triage.summary


def test_log_lines_are_never_refused():
    """Every real text here holds a known line: each one is an input (issue 32: no refusal)."""
    for p in sorted(DATA.glob("*.txt")):
        if p.name == "near_misses.txt":
            continue
        snap = parse_text(read(p.name)[0])
        assert snap.processes and any(proc.messages for proc in snap.processes), p.name


def test_log_without_known_line_says_what_to_capture():
    """A training log with no line a hang or crash leaves: one line naming what it lacks and the
    concrete captures (native stacks of one process, every rank of a job, the flight recorder)."""
    log = "\n".join("2024-05-01 10:00:%02d,123 - INFO - Epoch 1 step %d loss 2.%02d" % (i, 100 * i, i)
                    for i in range(1, 9)) + "\n"
    with pytest.raises(InputError) as err:
        parse_text(log)
    msg = str(err.value)
    assert msg == LOG_WITHOUT_KNOWN_LINE and "\n" not in msg
    for needed in ("no stack frame", "py-spy dump --native --pid", "hanganalyze --job", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        assert needed in msg, needed


def test_illegal_access_in_the_watchdog_is_the_watchdogs_class_and_the_fault(db):
    """The same error raised in ProcessGroupNCCL's watchdog is pgnccl-watchdog-sticky-cuda-error (how
    the fault surfaced) and the illegal access itself (what it was): both, since open round 30, whose
    labels name the fault (vllm-8177)."""
    text, expect = read("cuda_illegal_in_watchdog_lmdeploy_3048.txt")
    assert "an illegal memory access" in text
    found = signatures(text, db)
    assert expect in found and "cuda-illegal-memory-access" in found, found


#: SGLang's scheduler watchdog in two threads of the open corpus (tests/data/realworld, URLs in its manifests)
SGLANG = ["sglang/sglang-3752-1.txt", "sglang/sglang-7553-1.txt"]


@pytest.mark.parametrize("name", SGLANG)
def test_sglang_scheduler_watchdog_is_a_lead(db, name):
    text = (Path(__file__).resolve().parents[1] / "data" / "realworld" / name).read_text()
    f = next(f for f in analyze(text, db).findings if f.signature == "sglang-scheduler-watchdog-timeout")
    assert f.severity == "hang" and f.confidence < 0.8  # compilation on a first batch looks the same
    # the watchdog's lines: its timeout and its py-spy dump of the schedulers (or the dump's failure)
    kept = "\n".join(line for line in text.splitlines()
                     if "watchdog_timeout=" not in line and "Pyspy " not in line) + "\n"
    try:
        assert "sglang-scheduler-watchdog-timeout" not in signatures(kept, db)
    except InputError:
        pass  # nothing known left


def test_sglang_watchdog_option_is_no_timeout(db):
    """The option on a launch command (sglang#8232's description) names the same words; with the
    launcher's known line of sglang#3752 beside it the log is read, and the class stays quiet."""
    text = ("  --watchdog-timeout 1000000 \\\n"
            "[2025-03-09 00:57:20] Received sigquit from a child proces. It usually means the child failed.\n")
    found = signatures(text, db)
    assert "triage" in found and "sglang-scheduler-watchdog-timeout" not in found


@pytest.mark.parametrize("code", ["137", "1", "130", "0"])
def test_an_exit_status_of_no_fatal_signal_is_no_crash(db, code):
    """Near miss of the exit-status line: SIGKILL's 137 (how a hung process is often ended), an error's
    1, a Ctrl-C's 130 and success are no crash; the real text's 134 (SIGABRT) is one."""
    text = read("crash_exit_134_oneflow_2855.txt")[0]
    assert wait_of(analyze(text, db)) == "crashed"
    with pytest.raises(InputError):  # no line a hang or crash leaves: the refusal that says what to capture
        analyze(text.replace("exit code 134", "exit code %s" % code), db)
