"""The runs of ``scripts/gpu_watch.sh``: ``hanganalyze watch`` around real jobs of
``tests/fixtures/gpu/nccl_job.py`` (NCCL on GPUs; HANG_BACKEND=gloo for the dry run on CPU).

    python scripts/gpu_watch_runs.py --out DIR [--runs 5] [--stall 10] [--watch-s 45] [--scenarios ...]

Per scenario, RUNS runs, the odd ones in wrapper mode (``hanganalyze watch ... -- torchrun ...``),
the even ones with ``--job`` attached to a running torchrun:

- ``straggler`` (rank BAD_RANK sleeps in ``load_next_batch``, the others wait in ``all_reduce``): must
  be captured: exit 3, a report written within ``--stall`` + 10 s of the hang's start (the rank's
  marker file), naming that rank and its frame; wrapper runs ``--then kill`` (nothing of the job
  left), ``--job`` runs ``--then keep`` (every rank still alive after the capture).
- ``healthy`` and ``slow`` (rank BAD_RANK sleeps 0.4 s a step): must be left alone: watched
  ``--watch-s`` seconds after the ranks are up, no report, the watcher still watching; then the job
  is ended (SIGTERM through the watcher in wrapper mode, to the launcher with ``--job``).  Their runs
  go in pairs at the same time (one healthy, one slow) to halve the device time.

Writes DIR/<scenario>.run<N>.result.json (what the run did and saw, with a digest of the report:
hang findings, the bad rank's main-thread Python frames), the report (<scenario>.run<N>.json), the
watcher's stderr (.err) and the job's output tail (.log); prints one line per run and a summary.
``tests/unit/test_gpu_watch_reports.py`` re-checks such a folder.  Exit 1 when a run got it wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "tests" / "fixtures" / "gpu" / "nccl_job.py"
TAG = "WATCH_RUN_TAG"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
HANG = ("hang", "deadlock")
LOG_TAIL = 60


def hanganalyze() -> List[str]:
    exe = shutil.which("hanganalyze")
    return [exe] if exe else [sys.executable, "-m", "hanganalyze"]


def _alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def tagged(tag: str) -> List[int]:
    """Live processes whose environment carries our run's tag (the launcher, its agent, the ranks)."""
    needle = ("%s=%s\0" % (TAG, tag)).encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open("/proc/%s/environ" % name, "rb") as f:
                    data = f.read() + b"\0"
            except OSError:
                continue
            if needle in data and _alive(int(name)):
                found.append(int(name))
    return sorted(found)


def _threads(pid: int) -> int:
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return 0


def kill_tagged(tag: str) -> None:
    for _ in range(3):
        left = tagged(tag)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)


def wait_for(cond, timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


def digest(report: Path, bad_rank: int) -> Optional[Dict[str, object]]:
    """What the test re-checks of a report: its hang findings, the trigger note, each rank's
    main-thread Python functions (innermost first)."""
    try:
        snap = json.loads(report.read_text())
    except (OSError, ValueError):
        return None
    ranks = {}
    for p in snap.get("processes", []):
        main = next((t for t in p.get("threads", []) if t.get("name") == "MainThread"), None)
        funcs = [f.get("function") for f in (main or {}).get("frames", []) if f.get("kind") == "python"]
        ranks[str(p.get("rank"))] = funcs[:12]
    return {
        "findings": [{"signature": f.get("signature"), "ranks": f.get("ranks"), "severity": f.get("severity")}
                     for f in snap.get("findings", []) if f.get("severity") in HANG],
        "note": (snap.get("warnings") or [""])[0][:300],
        "main_python_frames": ranks,
        "sources": sorted({p.get("source") for p in snap.get("processes", [])}),
    }


class Run:
    """One watched job, start to end, and what it did."""

    def __init__(self, args: argparse.Namespace, scenario: str, index: int, work: Path) -> None:
        self.args, self.scenario, self.index = args, scenario, index
        self.mode = "wrapper" if index % 2 else "job"
        self.then = "kill" if self.mode == "wrapper" else "keep"
        self.name = "%s.run%d" % (scenario, index)
        self.ready = work / self.name
        self.ready.mkdir(parents=True)
        self.report = Path(args.out) / (self.name + ".json")
        self.tag = uuid.uuid4().hex
        self.result: Dict[str, object] = {"scenario": scenario, "run": index, "mode": self.mode, "then": self.then,
                                          "stall": args.stall, "poll": args.poll, "nproc": args.nproc,
                                          "bad_rank": args.bad_rank, "backend": os.environ.get("HANG_BACKEND", "nccl")}

    def env(self) -> Dict[str, str]:
        env = dict(os.environ, HANG_READY_DIR=str(self.ready), PG_TIMEOUT=str(self.args.pg_timeout),
                   HANG_DIE_WITH_PARENT="1", PYTHONUNBUFFERED="1", **NO_MULTICAST, **{TAG: self.tag})
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
        return env

    def launcher(self) -> List[str]:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % self.args.nproc,
                str(JOB), self.scenario, str(self.args.bad_rank)]

    def watch_argv(self) -> List[str]:
        return hanganalyze() + ["watch", "--stall", str(self.args.stall), "--poll", str(self.args.poll),
                                "--then", self.then, "-o", str(self.report)]

    def markers(self) -> int:
        return len(list(self.ready.glob("rank*.pid")))

    def go(self) -> Dict[str, object]:
        out = Path(self.args.out)
        log = open(out / (self.name + ".log"), "wb")
        err = open(out / (self.name + ".err"), "wb")
        env = self.env()
        t0 = time.monotonic()
        job = None
        try:
            if self.mode == "wrapper":
                watcher = subprocess.Popen(self.watch_argv() + ["--"] + self.launcher(), env=env, stdout=log,
                                           stderr=err)
            else:
                job = subprocess.Popen(self.launcher(), env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
                # attach once the ranks run (a launcher with no worker yet is refused, exit 2)
                if not wait_for(lambda: len(tagged(self.tag)) > self.args.nproc, 150):
                    self.result["error"] = "the ranks did not start in 150 s"
                    return self.result
                watcher = subprocess.Popen(self.watch_argv() + ["--job", str(job.pid)], env=env,
                                           stdout=log, stderr=err)
            self.result["attached_after_s"] = round(time.monotonic() - t0, 2)
            if self.scenario == "straggler":
                self._hang(watcher, job)
            else:
                self._healthy(watcher, job, t0)
        finally:
            kill_tagged(self.tag)
            log.close()
            err.close()
            self._trim(out / (self.name + ".log"))
        return self.result

    def _hang(self, watcher: subprocess.Popen, job: Optional[subprocess.Popen]) -> None:
        limit = self.args.stall + 150
        try:
            rc = watcher.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            rc = None
            watcher.kill()
            watcher.wait()
        self.result["rc"] = rc
        marker = self.ready / ("rank%d.pid" % self.args.bad_rank)
        self.result["captured"] = self.report.exists()
        if self.report.exists() and marker.exists():
            self.result["latency_s"] = round(self.report.stat().st_mtime - marker.stat().st_mtime, 2)
        left = tagged(self.tag)
        if self.then == "kill":
            self.result["left_after_kill"] = len(left)
        else:  # keep: the launcher, its agent and every rank still there
            self.result["alive_after_keep"] = len(left)
            self.result["job_running_after_keep"] = job is not None and job.poll() is None
        self.result["digest"] = digest(self.report, self.args.bad_rank)

    def _healthy(self, watcher: subprocess.Popen, job: Optional[subprocess.Popen], t0: float) -> None:
        if not wait_for(lambda: self.markers() >= self.args.nproc or watcher.poll() is not None, 150):
            self.result["error"] = "the ranks were not marked ready in 150 s"
        up = time.monotonic()
        self.result["ranks_up_after_s"] = round(up - t0, 2)
        self._watch_tracing(watcher, up)
        self.result["watched_s"] = round(time.monotonic() - up, 2)
        self.result["watcher_still_watching"] = watcher.poll() is None
        self.result["captured"] = self.report.exists()
        # the end of the job: through the watcher (forwarded to torchrun) or to the launcher's session
        if job is None:
            watcher.send_signal(signal.SIGTERM)
        else:
            try:
                os.killpg(job.pid, signal.SIGTERM)
            except OSError:
                pass
        try:
            self.result["rc"] = watcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watcher.kill()
            self.result["rc"] = None
        self.result["captured"] = self.report.exists()

    def _watch_tracing(self, watcher: subprocess.Popen, up: float) -> None:
        """Wait ``--watch-s``, counting the watcher's captures of this job that found it moving (a
        candidate the samples dismissed: each one a few ptrace stops of every rank, the watcher's
        cost to a healthy job beyond its polls).  A capture runs in a thread of its own that lives
        as long as it does (``watch.capture``): the watcher's thread count going up is one."""
        episodes, busy_s, base = 0, 0.0, None
        above = False
        step = 0.1
        while time.monotonic() - up < self.args.watch_s and watcher.poll() is None:
            n = _threads(watcher.pid)
            if n:
                base = n if base is None else min(base, n)
                if n > base and not above:
                    episodes += 1
                above = n > base
                busy_s += step if above else 0.0
            time.sleep(step)
        self.result["dismissed_captures"] = episodes
        self.result["capturing_s_approx"] = round(busy_s, 1)

    @staticmethod
    def _trim(path: Path) -> None:
        lines = path.read_text(errors="replace").splitlines()
        path.write_text("\n".join(lines[-LOG_TAIL:]) + "\n")


def verdict(r: Dict[str, object]) -> List[str]:
    """What is wrong with one run's result (empty: right)."""
    bad: List[str] = []
    if r.get("error"):
        return [str(r["error"])]
    if r["scenario"] == "straggler":
        if r.get("rc") != 3 or not r.get("captured"):
            bad.append("not captured (rc %s)" % r.get("rc"))
        lat = r.get("latency_s")
        if lat is None or not 0 < lat <= r["stall"] + 10:  # type: ignore[operator]
            bad.append("latency %s s over stall + 10" % lat)
        d = r.get("digest") or {}
        want = r["bad_rank"]
        if not any(f["ranks"] == [want] for f in d.get("findings", [])):  # type: ignore[union-attr]
            bad.append("no hang finding names rank %s" % want)
        if "load_next_batch" not in (d.get("main_python_frames") or {}).get(str(want), []):  # type: ignore[union-attr]
            bad.append("rank %s not seen in load_next_batch" % want)
        if r["then"] == "kill" and r.get("left_after_kill"):
            bad.append("%s process(es) left after --then kill" % r["left_after_kill"])
        if r["then"] == "keep" and not r.get("job_running_after_keep"):
            bad.append("the job did not survive --then keep")
    else:
        if r.get("captured") or r.get("rc") == 3:
            bad.append("captured a %s job" % r["scenario"])
        if not r.get("watcher_still_watching") or r.get("watched_s", 0) < r.get("watch_s", 0):  # type: ignore[operator]
            bad.append("the watcher stopped before %s s" % r.get("watch_s"))
    return bad


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stall", type=float, default=10.0)
    ap.add_argument("--poll", type=float, default=1.0)
    ap.add_argument("--watch-s", type=float, default=45.0, help="how long a healthy or slow job is watched")
    ap.add_argument("--scenarios", default="straggler,healthy,slow")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--bad-rank", type=int, default=1)
    ap.add_argument("--pg-timeout", type=float, default=150.0, help="longer than a capture takes: the stall, "
                    "not the job's own watchdog, triggers it")
    ap.add_argument("--budget-s", type=float, default=1e9, help="skip the runs that would start after this")
    args = ap.parse_args(argv)
    os.environ.update(NO_MULTICAST)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    scenarios = [s for s in args.scenarios.split(",") if s]
    started = time.monotonic()
    results: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="gpuwatch-") as tmp:
        for i in range(1, args.runs + 1):
            batches = [["straggler"]] if "straggler" in scenarios else []
            batches.append([s for s in scenarios if s in ("healthy", "slow")])  # side by side
            for batch in [b for b in batches if b]:
                if time.monotonic() - started > args.budget_s:
                    print("skipped run %d of %s (budget)" % (i, ",".join(batch)), flush=True)
                    continue
                runs = [Run(args, sc, i, Path(tmp)) for sc in batch]
                threads = [threading.Thread(target=r.go) for r in runs]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                for r in runs:
                    r.result["watch_s"] = args.watch_s
                    r.result["problems"] = verdict(r.result)
                    Path(args.out, r.name + ".result.json").write_text(json.dumps(r.result, indent=1) + "\n")
                    results.append(r.result)
                    print("%s %s/%s: rc=%s captured=%s latency=%s dismissed=%s %s" % (
                        r.name, r.mode, r.then, r.result.get("rc"), r.result.get("captured"),
                        r.result.get("latency_s", "-"), r.result.get("dismissed_captures", "-"),
                        "; ".join(r.result["problems"]) or "ok"), flush=True)  # type: ignore[arg-type]
    for sc in scenarios:
        mine = [r for r in results if r["scenario"] == sc]
        lat = sorted(r["latency_s"] for r in mine if "latency_s" in r)  # type: ignore[type-var]
        print("%s: %d/%d right%s" % (sc, sum(not r["problems"] for r in mine), len(mine),
                                     ", latency %s s (stall %.0f s)" % (lat, args.stall) if lat else ""))
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
