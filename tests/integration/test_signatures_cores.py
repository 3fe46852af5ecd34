"""Every core-testable signature on a real core: a fixture that really hangs or aborts with the
bug's call shape (tests/fixtures/sig_mimic.cpp, sig_py.py, libsig_*.cpp), snapshotted by real gdb
+ gdbext, matched by the real matcher.

Positive: the signature is found, with evidence on the key frames, and nothing else serious is.
Near miss: a real core of a similar but healthy shape (a joined thread, an idle OpenMP pool, a
server serving by design, ...), or the same real snapshot with the key frame removed, or with the
right frames split across two threads.  Cores are taken once per module and shared.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import (  # noqa: E402
    FIXTURES,
    core_at_abort,
    fixture_binary,
    gcore,
    gdb_batch,
    gdb_snapshot,
    pyenv_pythons,
    run_hanganalyze,
    start_hung,
)

from hanganalyze.analyze.match import match_snapshot  # noqa: E402
from hanganalyze.analyze.signatures import load_signatures  # noqa: E402
from hanganalyze_gdbext.model import Snapshot  # noqa: E402

SERIOUS = {"crash", "deadlock", "hang", "error"}
PY = pyenv_pythons().get("3.11")

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="needs gdb")


def _descendants(pid: int) -> List[int]:
    out: List[int] = []
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                for c in f.read().split():
                    out.append(int(c))
                    out.extend(_descendants(int(c)))
    except OSError:
        pass
    return out


class Cores:
    """Takes each fixture's core once (lazily) and keeps its snapshot dict."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.snaps: Dict[Tuple, dict] = {}
        self.paths: Dict[Tuple, Tuple[Path, Path]] = {}

    def _nccl_copy(self, version: str) -> str:
        """The NCCL mimic under a real NCCL file name, so the core shows libnccl.so.X.Y.Z."""
        src = fixture_binary("libsig_nccl.so")
        dst = self.tmp / ("nccl-%s" % version) / ("libnccl.so.%s" % version)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            shutil.copy(src, dst)
        return str(dst)

    def argv(self, key: Tuple) -> List[str]:
        lang, mode = key[0], key[2]
        if lang == "c":
            argv = [str(fixture_binary("sig_mimic")), mode]
            if mode.startswith("nccl-"):
                argv.append(self._nccl_copy(key[3] if len(key) > 3 else "2.28.9"))
            return argv
        py = pyenv_pythons().get(key[3]) if len(key) > 3 else PY
        assert py is not None
        fixture_binary("libsig_torch.so")
        return [str(py), str(FIXTURES / "sig_py.py"), mode]

    def core(self, key: Tuple) -> Tuple[Path, Path]:
        if key in self.paths:
            return self.paths[key]
        how = key[1]
        argv = self.argv(key)
        d = self.tmp / ("-".join(map(str, key)).replace("/", "_"))
        if how == "abort":
            core = core_at_abort(argv, d)
        else:
            h = start_hung(argv)
            try:
                target = h.pid
                if how == "child":
                    kids = _descendants(h.pid)
                    assert kids, "fixture %s forked no child" % (argv,)
                    target = kids[0]
                core = gcore(target, d)
            finally:
                kids = _descendants(h.pid)
                h.kill()
                for k in kids:
                    try:
                        os.kill(k, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        self.paths[key] = (core, Path(argv[0]))
        return self.paths[key]

    def snapshot(self, key: Tuple) -> dict:
        if key not in self.snaps:
            core, exe = self.core(key)
            self.snaps[key] = gdb_snapshot(core=core, exe=exe)
        return copy.deepcopy(self.snaps[key])


@pytest.fixture(scope="module")
def cores(tmp_path_factory):
    fixture_binary("sig_mimic")
    return Cores(tmp_path_factory.mktemp("sigcores"))


@pytest.fixture(scope="module")
def db():
    return load_signatures()


def findings(snap: dict, db):
    return match_snapshot(Snapshot.from_dict(snap), db)


# --------------------------------------------------------------------------------------------
# snapshot edits for near misses (applied to real snapshots)
# --------------------------------------------------------------------------------------------


def _fn_matches(frame: dict, patterns) -> bool:
    fn = frame.get("function") or ""
    return any(fnmatch.fnmatchcase(fn, p) for p in patterns)


def without(*patterns: str) -> Callable[[dict], dict]:
    """The same stacks minus the frames whose function matches one of the globs."""

    def edit(snap: dict) -> dict:
        for t in snap["processes"][0]["threads"]:
            t["frames"] = [f for f in t["frames"] if not _fn_matches(f, patterns)]
            t["python_frames"] = [f for f in t.get("python_frames", []) if not _fn_matches(f, patterns)]
        return snap

    return edit


def split_at(pattern: str) -> Callable[[dict], dict]:
    """Right frames, wrong thread: the frames from `pattern` outwards move to a new thread."""

    def edit(snap: dict) -> dict:
        threads = snap["processes"][0]["threads"]
        for t in list(threads):
            for i, f in enumerate(t["frames"]):
                if _fn_matches(f, [pattern]):
                    new = copy.deepcopy(t)
                    new["tid"] = (t["tid"] or 0) + 100000
                    new["frames"] = t["frames"][i:]
                    t["frames"] = t["frames"][:i]
                    threads.append(new)
                    return snap
        raise AssertionError("no frame %s to split at" % pattern)

    return edit


def both(*edits: Callable[[dict], dict]) -> Callable[[dict], dict]:
    """The edits one after the other."""

    def edit(snap: dict) -> dict:
        for e in edits:
            snap = e(snap)
        return snap

    return edit


def gil(state: str) -> Callable[[dict], dict]:
    """Every thread that holds the GIL is said not to (as if the binding had released it)."""

    def edit(snap: dict) -> dict:
        for t in snap["processes"][0]["threads"]:
            if (t.get("state") or {}).get("gil") == "held":
                t["state"]["gil"] = state
        return snap

    return edit


def add_thread_like(pattern: str, rename: Dict[str, str]) -> Callable[[dict], dict]:
    """Adds a copy of the thread containing `pattern` with some functions renamed."""

    def edit(snap: dict) -> dict:
        threads = snap["processes"][0]["threads"]
        for t in threads:
            if any(_fn_matches(f, [pattern]) for f in t["frames"] + t.get("python_frames", [])):
                new = copy.deepcopy(t)
                new["tid"] = (t["tid"] or 0) + 200000
                for f in new["frames"]:
                    f["function"] = rename.get(f.get("function"), f.get("function"))
                threads.append(new)
                return snap
        raise AssertionError("no thread with %s" % pattern)

    return edit


# --------------------------------------------------------------------------------------------
# cases: signature -> (core key, key frame(s) the evidence must name, near miss)
# near miss is either another core key (a real core of a similar, healthy or different shape)
# or an edit of the positive snapshot.
# --------------------------------------------------------------------------------------------

C = "c"
P = "py"

CASES: List[Tuple[str, Tuple, List[str], object]] = [
    ("pgnccl-collective-timeout", (C, "abort", "pg-timeout"), ["c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout"],
     without("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout")),
    ("pgnccl-watchdog-sticky-cuda-error", (C, "abort", "pg-sticky"), ["c10::cuda::c10_cuda_check_implementation"],
     without("c10::cuda::c10_cuda_check_implementation")),
    ("pgnccl-heartbeat-watchdog-stuck", (C, "abort", "pg-heartbeat"), ["c10d::ProcessGroupNCCL::heartbeatMonitor"],
     without("c10d::ProcessGroupNCCL::watchdogHandler", "c10d::ProcessGroupNCCL::ncclCommWatchdog")),
    ("nccl-destroy-with-live-cuda-graph", (C, "hang", "nccl-destroy"), ["commDestroySync", "ncclCommPollCallbacks",
                                                                        "c10d::ProcessGroupNCCL::shutdown"],
     without("ncclCommPollCallbacks", "ncclIntruQueueMpscDequeueAll*")),
    ("nccl-destroy-with-live-cuda-graph", (C, "hang", "nccl-destroy-atexit"),
     ["commDestroySync", "__run_exit_handlers"], (C, "hang", "nccl-destroy-atexit", "2.21.5")),
    ("pgnccl-destroy-hang", (C, "hang", "pg-dtor-join"), ["c10d::ProcessGroupNCCL::~ProcessGroupNCCL"],
     without("c10d::ProcessGroupNCCL::~ProcessGroupNCCL")),
    ("nccl-abort-join-hang", (C, "hang", "nccl-abort-join"), ["commFree", "ncclCommAbort", "__pthread_clockjoin_ex"],
     split_at("commFree")),
    ("c10d-store-rendezvous-hang", (C, "hang", "tcpstore"), ["c10d::tcputil::connect"],
     without("c10d::tcputil::connect", "c10d::TCPStore::*")),
    ("gloo-recv-timeout", (C, "hang", "gloo-recv"), ["gloo::transport::tcp::UnboundBuffer::waitRecv"],
     without("gloo::transport::tcp::UnboundBuffer::waitRecv")),
    ("xla-nccl-init-vs-cudamalloc", (C, "hang", "xla-init"), ["cudaMalloc", "ncclCommInitRank", "cudaMemcpy"],
     without("cudaMalloc")),
    ("tf-resourcemgr-clear-cleanup-deadlock", (C, "hang", "tf-clear"), ["tensorflow::ResourceMgr::Cleanup",
                                                                       "tensorflow::ResourceMgr::Clear"],
     # Clear on another thread and no tf.data function under Cleanup (with one, the one-side clause
     # answers at lower confidence: test_tf_resourcemgr_cleanup_one_side)
     both(split_at("tensorflow::ResourceMgr::Clear"),
          without("tensorflow::ScopedStepContainer::*", "tensorflow::CapturedFunction::RunInstantiated"))),
    ("tf-iteratorgetnext-interop-starvation", (C, "hang", "tf-interop"),
     ["tensorflow::data::IteratorGetNextOp::DoCompute"], (C, "hang", "tf-interop-idle")),
    ("tf-distributed-terminate-at-exit", (C, "abort", "tf-terminate-exit"), ["std::thread::~thread",
                                                                            "tensorflow::EagerContext::~EagerContext"],
     without("__run_exit_handlers", "__GI_exit", "exit")),
    ("tf-grpcserver-join-at-exit", (C, "hang", "tf-grpc-join"), ["tensorflow::GrpcServer::Join"],
     (C, "hang", "tf-grpc-serve")),
    ("std-thread-joinable-terminate", (C, "abort", "thread-terminate"), ["std::thread::~thread"],
     (C, "hang", "thread-join-ok")),
    ("openblas-fork", (C, "child", "openblas-fork"), ["exec_blas_async_wait", "exec_blas"],
     add_thread_like("exec_blas_async_wait", {"exec_blas_async_wait": "blas_thread_server"})),
    ("intel-omp-set-num-threads-in-worker", (C, "child", "kmp-fork"), ["__kmp_lock_suspend_mx", "__kmp_free_thread"],
     without("__kmp_lock_suspend_mx")),
    ("gnu-openmp-after-fork", (C, "child", "gomp-fork"), ["??"], (C, "hang", "gomp-parent")),
    ("dynamic-loader-lock-deadlock", (C, "hang", "dlopen-deadlock"),
     ["__static_initialization_and_destruction_*", "___pthread_mutex_lock"],
     without("_GLOBAL__sub_I_*", "__static_initialization_and_destruction_*", "call_init", "_dl_init")),
    ("cuda-api-holding-gil", (P, "hang", "cuda-gil"),
     ["cudaDeviceSynchronize", "PyEval_RestoreThread", "___pthread_cond_wait"], gil("no")),
    ("tensorimpl-decref-needs-gil", (P, "hang", "decref-gil"), ["(anonymous namespace)::concrete_decref_fn",
                                                               "c10::TensorImpl::release_resources"],
     without("*concrete_decref_fn*")),
    ("autograd-engine-gil", (P, "hang", "autograd-gil"), ["torch::autograd::PyNode::apply",
                                                         "torch::autograd::Engine::execute"], gil("no")),
    ("python-finalization-gil-reacquire", (P, "abort", "finalize-gil"),
     ["__GI___pthread_unwind", "take_gil", "std::terminate()"],
     split_at("take_gil")),
    ("python-shutdown-nondaemon-threads", (P, "hang", "nondaemon-exit"), ["_shutdown"], (P, "hang", "queue-idle")),
    ("dataloader-shutdown-hang", (P, "hang", "dataloader-shutdown"),
     ["_MultiProcessingDataLoaderIter._shutdown_workers"], without("*_shutdown_workers")),
    ("inductor-compile-workers-teardown", (P, "hang", "inductor-atexit"), ["shutdown_compile_workers"],
     without("atexit_callfuncs", "_PyAtExit_Call", "Py_FinalizeEx", "Py_RunMain")),
    ("mp-queue-join-before-drain", (P, "child", "mp-queue"), ["Queue._finalize_join", "Queue._feed"],
     without("Queue._feed", "_feed")),
    ("logging-lock-after-fork", (P, "child", "logging-fork"), ["Handler.acquire"],
     add_thread_like("Handler.acquire", {})),
]

IDS = ["%s[%s]" % (c[0], c[1][2]) for c in CASES]


def _needs(key: Tuple) -> None:
    if key[0] == P and PY is None:
        pytest.skip("needs pyenv Python 3.11")


@pytest.mark.parametrize("sig,key,key_frames,near", CASES, ids=IDS)
def test_signature_matches_real_core(cores, db, sig, key, key_frames, near):
    _needs(key)
    snap = cores.snapshot(key)
    found = findings(snap, db)
    by_id = {f.signature: f for f in found}
    assert sig in by_id, "expected %s, got %s" % (sig, sorted(by_id))
    f = by_id[sig]
    # nothing else serious fires on this core: signatures must be specific
    others = {x.signature for x in found if x.severity in SERIOUS and x.signature != sig}
    assert not others, "unexpected extra findings %s" % sorted(others)
    names = [e.function for e in f.evidence if e.frame is not None]
    for kf in key_frames:
        assert any(fnmatch.fnmatchcase(n, kf) for n in names), (kf, names)
    # evidence points at real frames of real threads
    procs = Snapshot.from_dict(snap).processes[0]
    for e in f.evidence:
        if e.frame is not None:
            t = procs.thread_by_tid(e.thread)
            assert t is not None
            frame = t.all_frames()[e.frame]
            assert (frame.function or "??") == e.function and e.text.startswith(e.function)
    assert f.threads and set(f.threads) <= {t.tid for t in procs.threads}
    assert f.fix and f.references and f.cause and f.summary.startswith(f.title)
    assert 0 < (f.confidence or 0) <= 1


@pytest.mark.parametrize("sig,key,key_frames,near", CASES, ids=IDS)
def test_signature_near_miss(cores, db, sig, key, key_frames, near):
    _needs(key)
    if isinstance(near, tuple):
        _needs(near)
        snap = cores.snapshot(near)
    else:
        snap = near(cores.snapshot(key))
    found = {f.signature for f in findings(snap, db)}
    assert sig not in found, "near miss still matched %s" % sig


def test_tf_resourcemgr_cleanup_one_side(cores, db):
    """A tf.data function's cleanup blocked on the ResourceMgr mutex, Clear not on its stack (cut, or
    on another thread): the signature at lower confidence, naming the same fix."""
    key = (C, "hang", "tf-clear")
    _needs(key)
    snap = split_at("tensorflow::ResourceMgr::Clear")(cores.snapshot(key))
    f = {x.signature: x for x in findings(snap, db)}.get("tf-resourcemgr-clear-cleanup-deadlock")
    assert f is not None and (f.confidence or 1.0) < 0.8


def test_stripped_libgomp_matches_through_fallback(cores, db):
    """Debian's libgomp is stripped: the match goes through the declared stripped fallback and
    says so (lower confidence, evidence marked stripped)."""
    snap = cores.snapshot((C, "child", "gomp-fork"))
    f = {x.signature: x for x in findings(snap, db)}["gnu-openmp-after-fork"]
    assert f.confidence is not None and f.confidence < 1.0
    assert any(e.stripped for e in f.evidence)
    assert "without symbols" in f.summary


def test_nccl_version_condition_on_real_core(cores, db):
    """The library version comes from the real file name in the core (libnccl.so.2.28.9)."""
    snap = cores.snapshot((C, "hang", "nccl-destroy"))
    f = {x.signature: x for x in findings(snap, db)}["nccl-destroy-with-live-cuda-graph"]
    assert any("libnccl.so.2.28.9" in e.text for e in f.evidence if e.frame is None)
    assert f.confidence == 1.0
    # watchdog thread blocked on the communicator's mutex is reported as extra evidence
    assert len(f.threads) == 2


@pytest.mark.parametrize("mode", ["http-idle", "queue-idle", "sleep-loop"])
def test_healthy_idle_python_process_has_no_finding(cores, db, mode):
    key = (P, "hang", mode)
    _needs(key)
    found = [f for f in findings(cores.snapshot(key), db) if f.severity in SERIOUS]
    assert not found, [f.signature for f in found]


@pytest.mark.parametrize("mode", ["gomp-parent", "thread-join-ok", "tf-grpc-serve", "tf-interop-idle"])
def test_healthy_native_process_has_no_finding(cores, db, mode):
    found = [f for f in findings(cores.snapshot((C, "hang", mode)), db) if f.severity in SERIOUS]
    assert not found, [f.signature for f in found]


@pytest.mark.parametrize("ver", sorted(set(pyenv_pythons()) - {"3.11"}))
def test_python_frame_signature_on_every_cpython(cores, db, ver):
    """Python frame names differ per version (co_name before 3.11, qualname after)."""
    found = {f.signature for f in findings(cores.snapshot((P, "hang", "nondaemon-exit", ver)), db)}
    assert "python-shutdown-nondaemon-threads" in found


#: The oldest and the newest CPython where each case happens.  A native thread that takes the GIL
#: during finalization is terminated (pthread_exit: "terminate called without an active exception")
#: up to 3.12; later 3.13 releases (3.13.15, as scripts/pythons.sh builds it) and 3.14 park it for
#: ever instead, so the abort case ends at 3.12.
GIL_CASES = [("hang", "cuda-gil", "cuda-api-holding-gil", ("3.8", "3.13")),
             ("abort", "finalize-gil", "python-finalization-gil-reacquire", ("3.8", "3.12"))]


@pytest.mark.parametrize("ver,how,mode,sig", [(v, how, mode, sig) for how, mode, sig, vers in GIL_CASES
                                               for v in vers if v in pyenv_pythons()])
def test_gil_signatures_on_oldest_and_newest_cpython(cores, db, ver, how, mode, sig):
    found = {f.signature for f in findings(cores.snapshot((P, how, mode, ver)), db)}
    assert sig in found


def test_system_python_stripped_interpreter(tmp_path, db):
    """Debian's stripped python3.11: wait_for_thread_shutdown is ?? there, the Python frames
    (read from memory) still identify the exit-time join."""
    sys_py = Path("/usr/bin/python3.11")
    if not sys_py.exists():
        pytest.skip("no system python3.11")
    h = start_hung([str(sys_py), str(FIXTURES / "sig_py.py"), "nondaemon-exit"])
    try:
        core = gcore(h.pid, tmp_path)
    finally:
        h.kill()
    snap = gdb_snapshot(core=core, exe=sys_py)
    ids = {f.signature for f in findings(snap, db)}
    assert "python-shutdown-nondaemon-threads" in ids


# --------------------------------------------------------------------------------------------
# the full CLI on real cores (driver + pipeline + renderer)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key,sig,code", [
    ((C, "hang", "nccl-destroy"), "nccl-destroy-with-live-cuda-graph", 3),  # severity hang
    ((C, "hang", "tf-clear"), "tf-resourcemgr-clear-cleanup-deadlock", 5),  # severity deadlock
    ((C, "abort", "thread-terminate"), "std-thread-joinable-terminate", 6),  # severity crash
    ((C, "hang", "nccl-destroy-atexit"), "nccl-destroy-with-live-cuda-graph", 3),
])
def test_cli_json_on_core(cores, key, sig, code):
    import json

    core, exe = cores.core(key)
    res = run_hanganalyze([core, "--exe", exe, "--format", "json"])
    assert res.returncode == code, res.stderr.decode()[-2000:]
    data = json.loads(res.stdout)
    ids = [f["signature"] for f in data["findings"]]
    assert sig in ids
    f = next(f for f in data["findings"] if f["signature"] == sig)
    assert f["evidence"] and f["fix"] and f["references"]


def test_cli_version_condition_rejects_old_nccl(cores):
    """NCCL 2.21 has no graph-callback wait: the same stack is not this signature there."""
    import json

    core, exe = cores.core((C, "hang", "nccl-destroy-atexit", "2.21.5"))
    res = run_hanganalyze([core, "--exe", exe, "--format", "json"])
    data = json.loads(res.stdout)
    assert "nccl-destroy-with-live-cuda-graph" not in [f["signature"] for f in data["findings"]]


# --------------------------------------------------------------------------------------------
# inside gdb: hang-analyze hands the snapshot to the installed analyzer (one matcher only)
# --------------------------------------------------------------------------------------------


def test_gdb_hang_analyze_prints_findings(cores):
    core, exe = cores.core((C, "hang", "tf-clear"))
    out = gdb_batch(["hang-analyze"], core=core, exe=exe)
    assert "tf-resourcemgr-clear-cleanup-deadlock" in out, out[-3000:]
    assert "Traceback" not in out


def test_gdb_hang_analyze_json_and_user_signatures(cores, tmp_path):
    import json

    d = tmp_path / "sigs"
    d.mkdir()
    (d / "mine.yaml").write_text(
        "signatures:\n"
        "  - id: my-nsync-wait\n"
        "    title: Waiting in nsync\n"
        "    severity: info\n"
        "    cause: A thread waits on an nsync mutex.\n"
        "    fix: [{kind: debug, text: Look at the owner.}]\n"
        "    references: [https://example.org/nsync]\n"
        "    match:\n"
        "      threads: [{rule: r, stack: [{function: nsync::nsync_mu_lock}]}]\n"
    )
    core, exe = cores.core((C, "hang", "tf-clear"))
    outfile = tmp_path / "findings.json"
    out = gdb_batch(["hang-analyze --format json --signatures %s -o %s" % (d, outfile)], core=core, exe=exe)
    assert "hang-analyze: wrote" in out, out[-3000:]
    data = json.loads(outfile.read_text())
    ids = [f["signature"] for f in data["findings"]]
    assert "tf-resourcemgr-clear-cleanup-deadlock" in ids and "my-nsync-wait" in ids


def test_gdb_hang_analyze_without_analyzer(cores, monkeypatch, tmp_path):
    core, exe = cores.core((C, "hang", "tf-clear"))
    monkeypatch.setenv("HANGANALYZE", str(tmp_path / "missing" / "hanganalyze"))
    out = gdb_batch(["hang-analyze"], core=core, exe=exe)
    assert "hang-analyze: the hanganalyze command is needed" in out
    assert "HANGANALYZE" in out and "Traceback" not in out


def test_gdb_hang_analyze_bad_option(cores):
    core, exe = cores.core((C, "hang", "tf-clear"))
    out = gdb_batch(["hang-analyze --format xml"], core=core, exe=exe)
    assert "--format must be one of" in out


def test_saved_hang_dump_is_reanalyzed(cores, tmp_path):
    """A hang-dump JSON file is accepted as input (snapshot-json) and matched afresh."""
    import json

    snap = cores.snapshot((C, "hang", "tf-clear"))
    p = tmp_path / "dump.json"
    p.write_text(json.dumps(snap))
    res = run_hanganalyze([p, "--format", "json"])
    assert res.returncode == 5, res.stderr  # a deadlock
    assert "tf-resourcemgr-clear-cleanup-deadlock" in [f["signature"] for f in json.loads(res.stdout)["findings"]]
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "hanganalyze/1", "processes": [')
    res = run_hanganalyze([bad])
    assert res.returncode == 2 and "not a hanganalyze/1 snapshot" in res.stderr.decode()
