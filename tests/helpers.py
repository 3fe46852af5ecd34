"""Shared test utilities: start a fixture that really hangs, take a real core, run real gdb.

Nothing here mocks gdb or cores: every snapshot comes from gdb + gdbext on a real process.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
BUILD = FIXTURES / "build"
LOAD_PY = REPO / "gdbext" / "load.py"
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))
SYSTEM_PY311 = Path("/usr/bin/python3.11")  # Debian's stripped build


#: Interpreters ``scripts/pythons.sh`` builds once per machine into this cache (tests never build),
#: outside the clone so that every worktree and CI run of a machine shares them.
PYTHONS_CACHE = Path(os.environ.get("HANGANALYZE_PYTHONS", str(Path.home() / ".cache" / "hanganalyze" / "pythons")))
#: Built like pyenv builds them (shared libpython3.X.so.1.0 with DWARF, RPATH): the same shape as a
#: pyenv interpreter, so a test written for one takes the other.
SHARED_NAMES = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
#: Built with libpython linked into the executable; a copy without debug info next to each.
BUILT_NAMES = ("3.14", "3.14t", "3.13t")


def _cached(name: str) -> Optional[Path]:
    exe = PYTHONS_CACHE / name / "bin" / ("python%s" % name)
    if (PYTHONS_CACHE / name / ".done").is_file() and exe.exists():
        return exe
    return None


def pyenv_pythons() -> Dict[str, Path]:
    """{"3.8": path, ...}: CPython 3.8-3.14 built with a shared libpython, first from the
    scripts/pythons.sh cache (a fresh machine has no pyenv), then from pyenv for a version the
    cache lacks."""
    found: Dict[str, Path] = {}
    for name in SHARED_NAMES:
        exe = _cached(name)
        if exe is not None:
            found[name] = exe
    vdir = PYENV_ROOT / "versions"
    if not vdir.is_dir():
        return found
    for d in sorted(vdir.iterdir()):
        parts = d.name.split(".")
        if len(parts) < 2 or not parts[0] == "3" or not parts[1].isdigit():
            continue
        minor = int(parts[1])
        if 8 <= minor <= 14:
            exe = d / "bin" / ("python3.%d" % minor)
            if exe.exists():
                found.setdefault("3.%d" % minor, exe)
    return found


def built_pythons() -> Dict[str, Path]:
    """{"3.14": exe, "nodebug-3.14": its copy without debug info, "3.13t": ..., ...} for every
    interpreter scripts/pythons.sh finished (CACHE/NAME/.done).  All link libpython statically;
    a name ending in "t" is a free-threaded build."""
    found: Dict[str, Path] = {}
    for name in BUILT_NAMES:
        exe = _cached(name)
        if exe is not None:
            found[name] = exe
            stripped = exe.with_name(exe.name + "-stripped")
            if stripped.exists():
                found["nodebug-%s" % name] = stripped
    return found


def requested_pythons() -> List[str]:
    """The builds the last finished scripts/pythons.sh run here was asked for (CACHE/requested)."""
    f = PYTHONS_CACHE / "requested"
    return f.read_text().split() if f.is_file() else []


def python_missing(name: str) -> Optional[Tuple[bool, str]]:
    """None when CPython ``name`` ("3.8", "3.13t", ...) is here (cache or pyenv); else (must_fail,
    why).  must_fail: scripts/pythons.sh was asked for it, did not build it and did not say it cannot
    be had (a broken set-up); otherwise the test skips with ``why`` (a machine with neither the cache
    nor pyenv: `make pythons` builds them)."""
    if name in pyenv_pythons() or name in built_pythons():
        return None
    why = unavailable_pythons().get(name)
    if why:
        return False, "CPython %s is not available on this machine: %s" % (name, why)
    if name in requested_pythons():
        return True, "CPython %s is not built although scripts/pythons.sh ran (cache %s)" % (name, PYTHONS_CACHE)
    return False, ("CPython %s is not on this machine: neither in the scripts/pythons.sh cache %s (run `make "
                   "pythons`) nor under %s/versions" % (name, PYTHONS_CACHE, PYENV_ROOT))


def need_python(name: str) -> Path:
    """The interpreter ``name``, or the calling test skips (fails: see python_missing) with the reason."""
    import pytest

    miss = python_missing(name)
    if miss is not None:
        (pytest.fail if miss[0] else pytest.skip)(miss[1])
    return {**pyenv_pythons(), **built_pythons()}[name]


def unavailable_pythons() -> Dict[str, str]:
    """{name: why} for the builds scripts/pythons.sh could not get here (CACHE/unavailable)."""
    out: Dict[str, str] = {}
    f = PYTHONS_CACHE / "unavailable"
    if f.is_file():
        for line in f.read_text().splitlines():
            name, _, why = line.partition(" ")
            if name:
                out[name] = why
    return out


def py_version(key: str) -> str:
    """"3.14" for "3.14", "3.14t", "nodebug-3.14t", "system-3.11", "stripped-3.9"."""
    return key.split("-", 1)[-1].rstrip("t")


def py_free_threaded(key: str) -> bool:
    return key.endswith("t")


def py_static(key: str) -> bool:
    """libpython linked into the executable (Debian's, and the scripts/pythons.sh builds)."""
    return key.startswith("system-") or key.split("-", 1)[-1] in BUILT_NAMES


def py_debug_info(key: str) -> bool:
    """CPython's DWARF is there (``stripped-*`` strips only libpython: the executable keeps its DWARF)."""
    return not key.startswith(("system-", "nodebug-"))


def own_memory_pythons() -> Dict[str, Path]:
    """The interpreters that run gdbext's readers on their own memory (``OWN_LAYOUT_PROBE``):
    pyenv's and the scripts/pythons.sh builds, with and without debug info."""
    found = pyenv_pythons()
    found.update(built_pythons())
    return found


#: Preamble of a probe run by an interpreter on itself: gdbext imported as the package ``g``
#: (without its gdb-only ``__init__``), ``read`` over /proc/self/mem, and this interpreter's own
#: layout as the walker computes it (``t``, ``features``: from 3.13 its ``_Py_DebugOffsets``).
OWN_LAYOUT_PROBE = r'''
import ctypes, importlib, sys, types
root = sys.argv[1]
pkg = types.ModuleType("g"); pkg.__path__ = [root]; sys.modules["g"] = pkg
tables = importlib.import_module("g.pyframes.tables"); objects = importlib.import_module("g.pyframes.objects")
walker = importlib.import_module("g.pyframes.walker")
mem_file = open("/proc/self/mem", "rb", buffering=0)
def read(addr, size):
    mem_file.seek(addr); return mem_file.read(size)
try:
    runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
except ValueError:
    runtime = 0
t, free_threaded, _ = walker.layout_for(sys.version_info[:2], objects.Memory(read), runtime)
assert t is not None, "no layout for %s" % sys.version
features = tables.features_for(sys.version_info[:2], free_threaded)
'''


def all_pythons() -> Dict[str, Path]:
    """pyenv versions plus Debian's stripped system python3.11 under the key "system-3.11", plus the
    scripts/pythons.sh builds (``built_pythons``)."""
    found = pyenv_pythons()
    if SYSTEM_PY311.exists():
        found["system-3.11"] = SYSTEM_PY311
    found.update(built_pythons())
    return found


class Hung:
    """A running fixture process; kill() is idempotent and is called by the `hung` pytest fixture."""

    def __init__(self, proc: subprocess.Popen, exe: str):
        self.proc = proc
        self.pid = proc.pid
        self.exe = exe

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def start_hung(
    argv: Sequence[str],
    ready: str = "READY",
    timeout: float = 30.0,
    settle: float = 0.3,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[Path] = None,
) -> Hung:
    """Start argv and wait until it prints a line containing `ready` (then `settle` s more so that
    threads reach their blocking calls).  Raises if it exits or never gets ready."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.Popen(
        list(map(str, argv)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=full_env,
        cwd=str(cwd) if cwd else None,
    )
    deadline = time.monotonic() + timeout
    buf = b""
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            if ready.encode() in buf:
                time.sleep(settle)
                return Hung(proc, str(argv[0]))
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("fixture %r not ready (output: %r)" % (list(argv), buf[-2000:]))


def gcore(pid: int, dest_dir: Path, timeout: float = 120.0) -> Path:
    """Take a core of a live process with gdb's gcore (the process keeps running)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    prefix = dest_dir / "core"
    subprocess.run(
        ["gcore", "-o", str(prefix), str(pid)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=timeout,
    )
    core = Path("%s.%d" % (prefix, pid))
    assert core.exists(), core
    return core


def core_at_abort(argv: Sequence[str], dest_dir: Path, timeout: float = 120.0) -> Path:
    """Run argv under gdb until it dies of a signal (e.g. SIGABRT) and write the core there."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    core = dest_dir / ("core.%s" % Path(argv[0]).name)
    args = " ".join("'%s'" % a for a in argv[1:])
    subprocess.run(
        ["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-ex", "set args %s" % args, "-ex", "run",
         "-ex", "gcore %s" % core, "--args", str(argv[0])],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
    )
    assert core.exists(), core
    return core


def gdb_batch(
    commands: List[str],
    core: Optional[Path] = None,
    exe: Optional[Path] = None,
    pid: Optional[int] = None,
    timeout: float = 180.0,
) -> str:
    """Run real gdb in batch mode with gdbext loaded; returns stdout+stderr."""
    argv = ["gdb", "-nx", "-batch", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off"]
    if exe is not None:
        argv += ["-ex", "file %s" % exe]
    if core is not None:
        argv += ["-ex", "core-file %s" % core]
    if pid is not None:
        argv += ["-ex", "attach %d" % pid]
    argv += ["-ex", "source %s" % LOAD_PY]
    for c in commands:
        argv += ["-ex", c]
    if pid is not None:
        argv += ["-ex", "detach"]
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return res.stdout.decode("utf-8", "replace")


def gdb_snapshot(
    core: Optional[Path] = None, exe: Optional[Path] = None, pid: Optional[int] = None, timeout: float = 180.0
) -> dict:
    """The hang-dump JSON of a core or live pid, straight from gdb + gdbext (no analyzer)."""
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        text = gdb_batch(["hang-dump %s" % out], core=core, exe=exe, pid=pid, timeout=timeout)
        data = Path(out).read_text()
        if not data:
            raise AssertionError("hang-dump wrote nothing; gdb said:\n" + text[-4000:])
        return json.loads(data)
    finally:
        os.unlink(out)


def sigint_default() -> None:
    """``preexec_fn`` of a child the test interrupts: SIGINT as in a terminal.  A test run started
    in the background of a non-interactive shell inherits SIGINT ignored, and so would the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_hanganalyze(args: Sequence[str], timeout: float = 300.0, stdin: Optional[bytes] = None):
    """Run the installed CLI as a user would (a subprocess), returning the CompletedProcess."""
    exe = shutil.which("hanganalyze")
    cmd = [exe] if exe else [sys.executable, "-m", "hanganalyze"]
    return subprocess.run(
        cmd + list(map(str, args)), input=stdin, capture_output=True, timeout=timeout
    )


def cli_json_report(args: Sequence[object], out: Path, codes: Sequence[int], timeout: float = 240.0) -> dict:
    """The CLI's JSON report of ``args`` written to ``out``, its exit code (one of ``codes``) as ``rc``."""
    res = run_hanganalyze(list(map(str, args)) + ["--format", "json", "-o", str(out)], timeout=timeout)
    assert res.returncode in codes, res.stderr.decode()[-2000:]
    data = json.loads(out.read_text())
    data["rc"] = res.returncode
    return data


#: One ELF64 program header: p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align.
PHDR = struct.Struct("<IIQQQQQQ")


def program_headers(path: Path) -> List[tuple]:
    """The program headers of a (little-endian ELF64) core, as PHDR tuples: for tests that cut or
    corrupt cores at chosen segments."""
    with open(path, "rb") as f:
        head = f.read(64)
        phoff = struct.unpack_from("<Q", head, 32)[0]
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return [PHDR.unpack_from(table, k * phentsize) for k in range(phnum)]


def fixture_binary(name: str) -> Path:
    """A compiled fixture from tests/fixtures/build (built by `make fixtures`)."""
    p = BUILD / name
    if not p.exists():
        subprocess.run(["make", "-s", "fixtures"], cwd=str(REPO), check=True, timeout=600)
    assert p.exists(), "fixture %s was not built" % p
    return p


def assert_one_line_error(res, code: Optional[int] = None, match: Optional[str] = None) -> str:
    """The promise for bad input: exactly one stderr line "hanganalyze: error: ...", a non-zero exit
    (``code`` when given), nothing on stdout.  Returns the line."""
    err = res.stderr.decode("utf-8", "replace")
    lines = err.splitlines()
    assert len(lines) == 1, "expected one stderr line, got:\n%s" % err[-3000:]
    assert lines[0].startswith("hanganalyze: error: "), lines[0]
    assert res.returncode != 0
    if code is not None:
        assert res.returncode == code, (res.returncode, lines[0])
    if match is not None:
        assert match in lines[0], lines[0]
    assert res.stdout == b""
    return lines[0]


#: A small valid user signature; tests derive broken or renamed variants from it by replacement.
GOOD_SIGNATURE_YAML = """\
signatures:
  - id: my-hang
    title: My own hang
    severity: hang
    cause: The worker waits for a reply that never comes.
    fix:
      - {kind: code, text: Add a timeout.}
    references: [https://example.org/bug/1]
    match:
      threads:
        - rule: worker
          stack:
            - {function: my_wait}
"""


#: the real dumps of the corpus (tests/data/realworld/, manifests beside them)
REALWORLD = Path(__file__).resolve().parent / "data" / "realworld"


def real_text(path: str) -> str:
    """A corpus dump's text, by its manifest path (``project/file.txt``)."""
    return (REALWORLD / path).read_text()


def sample_with_header(path: Path) -> Tuple[str, Optional[str]]:
    """(body, expected signature or None) of a signature sample: leading ``# `` lines are its header,
    ``# expect: ID`` (or ``nothing``) names what it must match; the rest is the real paste."""
    expect: Optional[str] = None
    body: List[str] = []
    header = True
    for line in path.read_text().splitlines():
        if header and line.startswith("# "):
            if line.startswith("# expect:"):
                word = line.split(":", 1)[1].split()[0]
                expect = None if word == "nothing" else word
            continue
        header = False
        body.append(line)
    return "\n".join(body) + "\n", expect


def reanalyzed_json(path: Path, out_dir: Path) -> Dict:
    """A saved JSON report analyzed again by the CLI (what CI re-checks of a device capture)."""
    out = out_dir / ("re-" + path.name)
    res = run_hanganalyze([str(path), "--format", "json", "-o", str(out)], timeout=120)
    assert res.returncode in (0, 3), res.stderr.decode("utf-8", "replace")[-2000:]
    return json.loads(out.read_text())


def wait_or_refused(text: str, db) -> Optional[str]:
    """The triage's wait of a pasted text, None when the text is refused (a near miss may be either)."""
    from hanganalyze.errors import InputError

    try:
        return text_verdict(text, db)[1]
    except InputError:
        return None


def crash_said(text: str, db) -> bool:
    """The triage says crashed from more than a traceback's own evidence (a traceback that raised, or
    one cut before its exception line, is "crashed" by its frames alone: ``from_ == "raised"``): a
    fatal signal, a crash line, an exception nothing caught.  Near misses of those assert its absence."""
    from hanganalyze.errors import InputError

    try:
        snap, wait = text_verdict(text, db)
    except InputError:
        return False
    tri = [f for f in snap.findings if f.signature == "triage"]
    return wait == "crashed" and tri[0].triage.from_ != "raised"


def text_verdict(text: str, db) -> Tuple[object, Optional[str]]:
    """(snapshot, triage wait) of a pasted text as the command analyzes it: the one way the unit
    tests of the corpus rounds read a paste (the wait is the first triage finding's, None without)."""
    from hanganalyze import pipeline
    from hanganalyze.acquire.text import parse_text

    snap = pipeline.analyze(parse_text(text), db)
    tri = [f for f in snap.findings if f.signature == "triage"]
    return snap, (tri[0].triage.wait if tri else None)


def text_or_log_findings(text: str, db) -> list:
    """The pipeline's findings on a pasted text; a text the reader refuses is analyzed as the log
    lines it is (the way a signature's log-only sample is read)."""
    from hanganalyze import pipeline
    from hanganalyze.acquire.text import parse_text
    from hanganalyze.acquire.text.log import join_broken
    from hanganalyze.errors import InputError
    from hanganalyze_gdbext.model import Process, Snapshot

    try:
        snap = parse_text(text)
    except InputError:
        snap = Snapshot(processes=[Process(source="text", messages=join_broken(
            [line for line in text.splitlines() if line.strip()]))])
    return pipeline.analyze(snap, db).findings
