#!/usr/bin/env python3
"""Fuzzing campaign (issue 13): mutated cores, texts, snapshot JSON and signature YAML through
hanganalyze, checking the promises of docs/robustness.md on every run.

    python scripts/fuzz.py [--seed 13] [--scale 1.0] [--workdir DIR] [--keep]   (make fuzz)

Seeded and reproducible: input N of a category is built from ``Random("SEED:CATEGORY:N")`` and
the seeds (real cores of hung fixtures taken at the start, the repository's text samples and
signature files, real snapshot JSON of those cores), so a failing input can be rebuilt alone with
``--only CATEGORY:N``.

Categories (default counts, 8,800 inputs in all at ``--scale 1``):

* ``core-notes`` (2,000, in-process): a real core with its ELF header, program headers or one note
  of each type (NT_PRSTATUS, NT_PRFPREG, NT_PRPSINFO, NT_AUXV, NT_SIGINFO, NT_FILE, NT_X86_XSTATE,
  gdb's own) mutated, read by ``corefile.read_core`` and ``check_executable``, the code the CLI
  runs on every core before any debugger;
* ``text`` (3,000), ``snapshot-json`` (2,000), ``signature-yaml`` (1,200), in-process through
  ``hanganalyze.cli.run`` (the CLI's own entry, argv in, exit code out): pasted stacks, hang-dump
  and report JSON, signature files (``--signatures`` on a real paste, and ``signatures validate``);
* ``core-cli`` (600, the installed ``hanganalyze`` command, with gdb or the default engine): cores
  mutated in the ELF header, program headers, notes, the threads' stacks (around each thread's
  stack pointer) and the interpreter's memory (around ``_PyRuntime`` and in the heap) of a
  CPython 3.11 process.

Every run must end with exit 0/3 and a report, or exit 2/4 and exactly one ``hanganalyze: error:``
line, no report and no temporary file left; never a traceback, never past its time limit; the
input file's checksum is the same before and after.  In-process runs happen in a worker process
watched by this one: a run that uses more than ``--hang`` CPU seconds (or ten times that in wall
time: a niced worker on a busy machine may wait long for a CPU) is a hang; the worker is killed
and restarted after that input.  A CLI run on a core may take ``--cli-hang`` seconds (each of its
gdb steps has ``--timeout 30``, so the command ends long before unless it hangs).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

from fuzz_mutate import Core, mutate_core, mutate_strings, mutate_text, mutate_tree, patched, pyruntime_address  # noqa: E402

CATEGORIES = {  # name: (count at scale 1, how)
    "core-notes": (2000, "inproc"),
    "text": (3000, "inproc"),
    "snapshot-json": (2000, "inproc"),
    "signature-yaml": (1200, "inproc"),
    "core-cli": (600, "cli"),
}
CORE_PARTS = ("elf-header", "program-headers", "notes", "thread-stacks", "interpreter-memory")
VERDICTS_OK = ("ok",)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):$", re.M)

# ------------------------------------------------------------------------------------ helpers


def sha(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (and its reaped children), from /proc."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def check_run(rc: Optional[int], stdout: bytes, stderr: bytes, outdir: Path, report: Optional[Path],
              inputs: Dict[Path, str], tmpdir: Optional[Path]) -> Tuple[str, str]:
    """(verdict, detail) for one finished run."""
    err = stderr.decode("utf-8", "replace")
    if _TRACEBACK.search(err):  # Python's own header line (the input's text may quote the word)
        return "traceback", err[-800:]
    for p, before in inputs.items():
        if not p.exists() or sha(p) != before:
            return "input-modified", str(p)
    if rc in (0, 3, 5, 6):  # no hang, hang, deadlock, crash (README "Exit codes")
        if report is not None and (not report.exists() or report.stat().st_size == 0):
            return "no-report", "rc %s" % rc
        said = "".join(x for x in err.splitlines(True) if not x.startswith("hanganalyze: wrote "))  # -o's one line
        if said.strip():
            return "stderr-on-success", said[-400:]
    elif rc in (2, 4):
        lines = err.splitlines()
        if len(lines) != 1 or not lines[0].startswith("hanganalyze: error: "):
            return "multi-line-error", err[-800:]
        if stdout:
            return "stdout-on-error", stdout[-200:].decode("utf-8", "replace")
        left = sorted(os.listdir(outdir)) if outdir.exists() else []
        if left:
            return "report-left-behind", ", ".join(left)
    else:
        return "bad-exit-code", "rc %s: %s" % (rc, err[-400:])
    if tmpdir is not None and tmpdir.exists() and os.listdir(tmpdir):
        return "temp-left-behind", ", ".join(sorted(os.listdir(tmpdir))[:5])
    return "ok", ""


# ------------------------------------------------------------------------------------ seeds


def make_seeds(work: Path, log: Callable[[str], None]) -> Dict[str, Any]:
    """Real cores of hung fixtures, their real snapshot JSON, texts and signature files."""
    from helpers import FIXTURES, all_pythons, fixture_binary, gcore, gdb_snapshot, start_hung

    seeds: Dict[str, Any] = {}
    cores = work / "seeds"
    cores.mkdir(parents=True, exist_ok=True)
    for name, argv in (("cxx", [str(fixture_binary("cxx_mutex_deadlock"))]),
                       ("py", None)):
        if argv is None:
            py = all_pythons().get("3.11") or all_pythons().get("system-3.11")
            if py is None:
                log("no CPython 3.11 here: no Python core (interpreter-memory mutations use the C++ core's heap)")
                continue
            argv = [str(py), str(FIXTURES / "py_deadlock.py"), "--rlock"]
        h = start_hung(argv)
        try:
            core = gcore(h.pid, cores / name)
        finally:
            h.kill()
        seeds["core-" + name] = core
        snap = gdb_snapshot(core=core, exe=Path(argv[0]))
        (cores / ("%s.hang-dump.json" % name)).write_text(json.dumps(snap))
        res = subprocess.run([shutil.which("hanganalyze") or "hanganalyze", str(core), "--format", "json"],
                             capture_output=True, timeout=300)
        if res.stdout.startswith(b"{"):
            (cores / ("%s.report.json" % name)).write_bytes(res.stdout)
        log("seed core %s: %s (%d bytes)" % (name, core, core.stat().st_size))
    texts = sorted(p for p in (REPO / "tests" / "data" / "text").rglob("*") if p.is_file() and p.suffix in
                   (".txt", ".json") and p.stat().st_size < 400_000)
    # sealed blind rounds are never run before they are scored
    texts += sorted(p for p in (REPO / "tests" / "data" / "realworld").rglob("*.txt")
              if p.stat().st_size < 400_000 and not any(d.startswith("sealed") for d in p.parts))
    seeds["texts"] = [str(p) for p in texts]
    jsons = sorted(str(p) for p in cores.glob("*.json"))
    jsons += sorted(str(p) for p in (REPO / "tests" / "data" / "gpu_job").glob("*.job.json"))
    seeds["jsons"] = jsons
    seeds["yamls"] = sorted(str(p) for p in (REPO / "signatures").glob("*.yaml"))
    seeds["paste"] = str(REPO / "tests" / "data" / "text" / "gdb_mutex_hang_bt.txt")
    return seeds


# ------------------------------------------------------------------------------------ in-process runs


class _Stdout(io.StringIO):
    """sys.stdout stand-in with a ``buffer`` (write_output writes bytes to stdout's buffer)."""

    def __init__(self):
        super().__init__()
        self.buffer = io.BytesIO()


def run_cli_inprocess(argv: List[str]) -> Tuple[Optional[int], bytes, bytes]:
    from hanganalyze import cli

    out, err = _Stdout(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.run(argv)
        except SystemExit as e:  # not expected: run() returns codes
            rc = e.code if isinstance(e.code, int) else 99
        except Exception:  # noqa: BLE001 - that is what we look for
            import traceback

            err.write(traceback.format_exc())
            rc = None
    return rc, (out.getvalue().encode() + out.buffer.getvalue()), err.getvalue().encode("utf-8", "replace")


def build_inproc(category: str, i: int, seed: int, seeds: Dict[str, Any], scratch: Path):
    """(run function returning (verdict, detail, rc), description) for input i of a category."""
    rng = random.Random("%d:%s:%d" % (seed, category, i))
    outdir = scratch / "out"
    indir = scratch / "in"
    for d in (outdir, indir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    fmt = rng.choice(("text", "md", "html", "json"))
    report = outdir / ("report." + {"text": "txt"}.get(fmt, fmt))
    if category == "core-notes":
        from hanganalyze.acquire.sysroot import mapped_file_table
        from hanganalyze.corefile import check_executable, read_core
        from hanganalyze.errors import InputError

        keys = [k for k in ("core-cxx", "core-py") if k in seeds]
        key = keys[i % len(keys)]
        core = seeds["_cores"][key]
        part = ("elf-header", "program-headers", "notes", "notes", "notes")[i % 5]
        patches = mutate_core(core, part, rng)

        def run():
            with patched(core.path, patches):
                before = sha(core.path)
                try:
                    info = read_core(core.path)
                    check_executable(info, None)
                    mapped_file_table(info)
                    info.truncation_warning()
                    rc = 0
                except InputError as e:  # the CLI prints it as one line, exit 2
                    rc = 2
                    if not str(e).strip():
                        return "empty-error", repr(e), rc
                except Exception:  # noqa: BLE001
                    import traceback

                    return "traceback", traceback.format_exc()[-800:], None
                if sha(core.path) != before:
                    return "input-modified", str(core.path), rc
            return "ok", "", rc

        return run, "%s %s" % (key, part)
    if category == "text":
        texts = seeds["texts"]
        src = Path(texts[rng.randrange(len(texts))])
        other = Path(texts[rng.randrange(len(texts))]).read_bytes()
        data = mutate_text(src.read_bytes(), rng, other)
        inp = indir / ("paste" + rng.choice((".txt", ".log", "", ".json")))
        inp.write_bytes(data)
        argv = [str(inp), "--format", fmt, "-o", str(report)]
        if rng.random() < 0.2:
            from hanganalyze.acquire.text import FORMAT_NAMES

            argv += ["--input-format", rng.choice(list(FORMAT_NAMES) + ["auto", "snapshot-json"])]
        if rng.random() < 0.1:
            argv.append("--redact")
        desc = "from %s" % src.name
    elif category == "snapshot-json":
        jsons = seeds["jsons"]
        src = Path(jsons[rng.randrange(len(jsons))])
        if rng.random() < 0.15:
            data = mutate_text(src.read_bytes(), rng, b"")
        else:
            data = json.dumps(mutate_tree(json.loads(src.read_text()), rng)).encode()
        inp = indir / "snapshot.json"
        inp.write_bytes(data)
        argv = [str(inp), "--format", fmt, "-o", str(report)] + (["--redact"] if rng.random() < 0.1 else [])
        desc = "from %s" % src.name
    elif category == "signature-yaml":
        import yaml

        yamls = seeds["yamls"]
        src = Path(yamls[rng.randrange(len(yamls))])
        sigdir = indir / "sigs"
        sigdir.mkdir()
        # ids of their own: a copy of a built-in file would only ever be refused as a duplicate
        own = src.read_bytes().replace(b"- id: ", b"- id: fz-")
        if rng.random() < 0.35:
            data = mutate_text(own, rng, Path(yamls[rng.randrange(len(yamls))]).read_bytes())
        else:
            original = yaml.safe_load(own.decode())
            tree = mutate_strings(original, rng) if rng.random() < 0.5 else mutate_tree(original, rng)
            try:
                data = yaml.safe_dump(tree, sort_keys=False).encode() if rng.random() < 0.9 else \
                    json.dumps(tree).encode()
            except RecursionError:  # PyYAML's dumper cannot write a deep nest: write it as JSON (YAML too)
                data = json.dumps(tree).encode()
            if rng.random() < 0.1:
                data += b"\nbomb: &a [x, x, x, x, x, x, x, x]\nb2: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n" \
                        b"b3: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nb4: [*c, *c, *c, *c, *c, *c, *c, *c]\n"
        inp = sigdir / src.name
        inp.write_bytes(data)
        paste = indir / "paste.txt"
        shutil.copy(seeds["paste"], paste)
        if rng.random() < 0.4:
            argv = ["signatures", rng.choice(("validate", "list")), "--signatures", str(sigdir)]
            report = None
        else:
            argv = [str(paste), "--signatures", str(sigdir), "--format", fmt, "-o", str(report)]
        desc = "from %s" % src.name
    else:
        raise ValueError(category)
    inputs = {p: sha(p) for p in indir.rglob("*") if p.is_file()}

    def run():
        rc, stdout, stderr = run_cli_inprocess(argv)
        verdict, detail = check_run(rc, b"" if report is None else stdout, stderr, outdir, report, inputs, None)
        return verdict, detail, rc

    return run, desc


def worker(args) -> int:
    """Run inputs [start, end) of one in-process category; one JSON line per input."""
    seeds = json.loads(Path(args.seeds).read_text())
    seeds["_cores"] = {}
    for key in ("core-cxx", "core-py"):
        if key in seeds:
            private = Path(args.scratch) / ("%s.core" % key)
            if not private.exists():
                shutil.copy(seeds[key], private)
            seeds["_cores"][key] = Core(private)
    os.environ["XDG_CACHE_HOME"] = str(Path(args.scratch) / "cache")
    for i in range(args.start, args.end):
        sys.stdout.write(json.dumps({"i": i, "start": True}) + "\n")
        sys.stdout.flush()
        t0 = time.monotonic()
        run, desc = build_inproc(args.category, i, args.seed, seeds, Path(args.scratch) / "run")
        verdict, detail, rc = run()
        sys.stdout.write(json.dumps({"i": i, "verdict": verdict, "detail": detail, "rc": rc, "desc": desc,
                                     "s": round(time.monotonic() - t0, 3)}) + "\n")
        sys.stdout.flush()
    return 0


# ------------------------------------------------------------------------------------ the campaign


class Campaign:
    def __init__(self, args):
        self.args = args
        self.work = Path(args.workdir)
        self.results: Dict[str, Dict[str, int]] = {}
        self.problems: List[str] = []
        self.slowest: Dict[str, float] = {}
        self.exit_codes: Dict[str, Dict[str, int]] = {}

    def log(self, msg: str) -> None:
        sys.stdout.write(msg + "\n")
        sys.stdout.flush()

    def record(self, category: str, i: int, verdict: str, detail: str, desc: str, seconds: float = 0.0,
               rc: Optional[int] = None) -> None:
        counts = self.results.setdefault(category, {})
        counts[verdict] = counts.get(verdict, 0) + 1
        codes = self.exit_codes.setdefault(category, {})
        codes[str(rc)] = codes.get(str(rc), 0) + 1
        self.slowest[category] = max(self.slowest.get(category, 0.0), seconds)
        if verdict != "ok":
            line = "%s:%d [%s] %s: %s" % (category, i, desc, verdict, " | ".join(str(detail).splitlines()[-3:]))
            self.problems.append(line)
            self.log("PROBLEM " + line)

    def inproc(self, category: str, indices: List[int], seeds_file: Path) -> None:
        scratch = self.work / ("scratch-" + category)
        scratch.mkdir(parents=True, exist_ok=True)
        todo = list(indices)
        while todo:
            start, end = todo[0], todo[-1] + 1
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", category, "--seed", str(self.args.seed),
                   "--seeds", str(seeds_file), "--scratch", str(scratch), "--start", str(start), "--end", str(end)]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            current, buf, started, msg_cpu = None, b"", time.monotonic(), None
            done = set()
            while True:
                r, _, _ = select.select([proc.stdout], [], [], 1.0)
                if r:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        msg = json.loads(line)
                        if msg.get("start"):
                            current, started, msg_cpu = msg["i"], time.monotonic(), cpu_seconds(proc.pid)
                        else:
                            done.add(msg["i"])
                            self.record(category, msg["i"], msg["verdict"], msg["detail"], msg["desc"], msg["s"],
                                        msg.get("rc"))
                            current = None
                if msg_cpu is None and current is not None:
                    msg_cpu = cpu_seconds(proc.pid)
                if current is not None:
                    used = cpu_seconds(proc.pid) - (msg_cpu or 0.0)
                    waited = time.monotonic() - started
                    # CPU time, not wall time, decides: on a shared machine a niced worker can wait
                    # minutes for a CPU; the wall-clock bound is only a backstop
                    if used > self.args.hang or waited > self.args.hang * 10:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        self.record(category, current, "hang", "no result after %.0f s of CPU (%.0f s)"
                                    % (used, waited), "in-process")
                        done.add(current)
                        break
            proc.wait()
            err = proc.stderr.read().decode("utf-8", "replace")
            left = [i for i in todo if i not in done]
            if left and proc.returncode not in (0, -9):
                # the harness itself failed on this input (never the product: its runs are caught)
                crashed = current if current is not None else left[0]
                self.record(category, crashed, "worker-crashed", err[-800:], "in-process")
                done.add(crashed)
            todo = [i for i in todo if i not in done]

    def cli_core(self, indices: List[int], seeds: Dict[str, Any]) -> None:
        exe = shutil.which("hanganalyze") or "hanganalyze"
        helptext = subprocess.run([exe, "--help"], capture_output=True, timeout=60).stdout.decode()
        engines = [None, "gdb"] if "--engine" in helptext else [None]
        scratch = self.work / "scratch-core-cli"
        scratch.mkdir(parents=True, exist_ok=True)
        cores = {}
        for key in ("core-cxx", "core-py"):
            if key in seeds:
                private = scratch / ("%s.core" % key)
                if not private.exists():
                    shutil.copy(seeds[key], private)
                cores[key] = Core(private)
        runtime = pyruntime_address(cores["core-py"].path) if "core-py" in cores else None
        for i in indices:
            rng = random.Random("%d:core-cli:%d" % (self.args.seed, i))
            part = CORE_PARTS[i % len(CORE_PARTS)]
            key = "core-py" if "core-py" in cores and (part == "interpreter-memory" or i % 2) else "core-cxx"
            core = cores[key]
            patches = mutate_core(core, part, rng, runtime if key == "core-py" else None)
            engine = engines[(i // len(CORE_PARTS)) % len(engines)]
            fmt = rng.choice(("text", "md", "html", "json"))
            outdir, tmpdir = scratch / "out", scratch / "tmp"
            for d in (outdir, tmpdir):
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
            report = outdir / ("report." + {"text": "txt"}.get(fmt, fmt))
            argv = [exe, str(core.path), "--format", fmt, "-o", str(report), "--timeout", "30"]
            if engine:
                argv += ["--engine", engine]
            desc = "%s %s engine=%s" % (key, part, engine or "default")
            with patched(core.path, patches):
                before = sha(core.path)
                t0 = time.monotonic()
                proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                        env=dict(os.environ, TMPDIR=str(tmpdir),
                                                 XDG_CACHE_HOME=str(scratch / "cache")))
                try:
                    out, err = proc.communicate(timeout=self.args.cli_hang)
                    verdict, detail = check_run(proc.returncode, out, err, outdir, report, {core.path: before},
                                                tmpdir)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    verdict, detail = "hang", "killed after %d s" % self.args.cli_hang
                self.record("core-cli", i, verdict, detail, desc, time.monotonic() - t0, proc.returncode)
                self.results.setdefault("core-cli/engine=%s" % (engine or "default"), {}).setdefault(verdict, 0)
                self.results["core-cli/engine=%s" % (engine or "default")][verdict] += 1
                self.results.setdefault("core-cli/" + part, {}).setdefault(verdict, 0)
                self.results["core-cli/" + part][verdict] += 1

    def run(self) -> int:
        t0 = time.monotonic()
        self.work.mkdir(parents=True, exist_ok=True)
        seeds = make_seeds(self.work, self.log)
        seeds_file = self.work / "seeds.json"
        seeds_file.write_text(json.dumps({k: (str(v) if isinstance(v, Path) else v) for k, v in seeds.items()}))
        only = None
        if self.args.only:
            cat, _, idx = self.args.only.partition(":")
            only = (cat, int(idx))
        for category, (count, how) in CATEGORIES.items():
            n = max(1, int(round(count * self.args.scale)))
            indices = list(range(n))
            if only is not None:
                if only[0] != category:
                    continue
                indices = [only[1]]
            if self.args.categories and category not in self.args.categories.split(","):
                continue
            c0 = time.monotonic()
            if how == "inproc":
                self.inproc(category, indices, seeds_file)
            else:
                self.cli_core(indices, seeds)
            self.log("%-16s %5d inputs (%s) in %.0f s: %s" % (
                category, len(indices), "in-process" if how == "inproc" else "real CLI runs",
                time.monotonic() - c0, self.results.get(category, {})))
        total = sum(sum(v.values()) for k, v in self.results.items() if "/" not in k)
        bad = sum(n for k, v in self.results.items() if "/" not in k for verdict, n in v.items() if verdict != "ok")
        self.log("")
        self.log("fuzz seed %d: %d inputs, %d problems, %.0f s" % (self.args.seed, total, bad, time.monotonic() - t0))
        for k in sorted(self.results):
            self.log("  %-34s %s" % (k, json.dumps(self.results[k], sort_keys=True)))
        self.log("  exit codes (0: no finding, 3: finding, 2: input error, 4: analysis failed):")
        for k in sorted(self.exit_codes):
            self.log("  %-34s %s" % (k, json.dumps(self.exit_codes[k], sort_keys=True)))
        kinds: Dict[str, int] = {}
        for p in self.problems:
            verdict = p.split("]", 1)[1].split(":", 1)[0].strip()
            kinds[verdict] = kinds.get(verdict, 0) + 1
        for v in ("traceback", "hang", "multi-line-error", "report-left-behind", "temp-left-behind", "input-modified"):
            self.log("  %-20s %d" % (v, kinds.get(v, 0)))
        self.log("  slowest run per category: %s" % ", ".join("%s %.1f s" % kv for kv in sorted(self.slowest.items())))
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return 1 if bad else 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every category's count")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work folder (seeds, scratch)")
    ap.add_argument("--only", default=None, help="CATEGORY:N: rebuild and run one input")
    ap.add_argument("--categories", default=None, help="comma-separated subset")
    ap.add_argument("--hang", type=float, default=60.0,
                    help="CPU seconds an in-process run may take (wall clock: ten times that)")
    ap.add_argument("--cli-hang", type=float, default=600.0,
                    help="seconds a CLI run on a core may take (its gdb steps have --timeout 30 each)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seeds", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--scratch", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--end", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        args.category = args.worker
        return worker(args)
    if args.workdir is None:
        args.workdir = tempfile.mkdtemp(prefix="hanganalyze-fuzz-")
    return Campaign(args).run()


if __name__ == "__main__":
    sys.exit(main())
