"""The command line under hostile or unlucky input, with real files, real cores and real gdb.

Promise: one ``hanganalyze: error:`` line on stderr, a non-zero exit, nothing on stdout, never a
traceback, never a hang past the timeout, never a destroyed input.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import assert_one_line_error, fixture_binary, gcore, run_hanganalyze, sigint_default, start_hung  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

EXIT_INPUT, EXIT_TOOL = 2, 4
HANGANALYZE = shutil.which("hanganalyze") or "hanganalyze"

GDB_PASTE = b"""Thread 2 (Thread 0x7f0 (LWP 12)):
#0  0x00007f1 in __lll_lock_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f2 in pthread_mutex_lock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x0000401 in worker () at app.cpp:10

Thread 1 (Thread 0x7f3 (LWP 11)):
#0  0x00007f4 in __pthread_clockjoin_ex () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x0000402 in main () at app.cpp:20
"""


one_line = assert_one_line_error


def run(args, timeout=60.0, **kw):
    return subprocess.run([HANGANALYZE] + [str(a) for a in args], capture_output=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    h = start_hung([str(fixture_binary("cxx_mutex_deadlock"))])
    try:
        return gcore(h.pid, tmp_path_factory.mktemp("cli_robust"))
    finally:
        h.kill()


def _script(tmp_path: Path, name: str, body: str, mode: int = 0o755) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(mode)
    return p


# ------------------------------------------------------------------------------ targets


def test_fifo_without_writer_does_not_block(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    one_line(run([fifo, "--timeout", "3"], timeout=20), EXIT_INPUT)


def test_fifo_with_a_writer_is_read_as_text(tmp_path):
    paste = tmp_path / "paste.txt"
    paste.write_bytes(GDB_PASTE)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", 'exec cat "$0" > "$1"', str(paste), str(fifo)])
    try:
        res = run([fifo], timeout=30)
    finally:
        writer.kill()
        writer.wait()
    assert res.returncode in (0, 3, 5, 6), res.stderr
    assert b"pthread_mutex_lock" in res.stdout


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null", "/proc/self/mem"])
def test_special_files_are_one_line(target):
    t0 = time.monotonic()
    one_line(run([target], timeout=30), EXIT_INPUT)
    assert time.monotonic() - t0 < 20


def test_symlink_loop(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    one_line(run([tmp_path / "a"]), EXIT_INPUT)


def test_huge_text_file_is_bounded(tmp_path):
    """50 MB of text that is no dump: refused in seconds, not parsed for minutes."""
    p = tmp_path / "big.txt"
    line = b"2026-01-01 12:00:00 INFO nothing to see here, just a log line of a training job\n"
    with open(p, "wb") as f:
        f.write(line * (50_000_000 // len(line)))
    t0 = time.monotonic()
    one_line(run([p], timeout=120), EXIT_INPUT, "is a log with no stack frame and no line a hang")
    assert time.monotonic() - t0 < 30


def test_binary_on_stdin():
    rng = random.Random(3)
    res = run(["-"], input=bytes(rng.getrandbits(8) for _ in range(100_000)))
    one_line(res, EXIT_INPUT)


def test_elf_header_then_garbage(core, tmp_path):
    """A valid ELF core header followed by random bytes (program headers included)."""
    rng = random.Random(5)
    p = tmp_path / "core.garbage"
    p.write_bytes(core.read_bytes()[:64] + bytes(rng.getrandbits(8) for _ in range(1 << 16)))
    one_line(run([p]), EXIT_INPUT)


def _phdrs(data: bytes):
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for k in range(phnum):
        p_type, _f, p_offset, _v, _p, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + k * phentsize)
        yield p_type, p_offset, p_filesz


def test_core_truncated_at_each_boundary(core, tmp_path):
    """Cut after the program headers, inside the first PT_LOAD, at and inside the notes of a gcore'd
    core (notes last): always 'is incomplete' (the notes are not all there)."""
    data = core.read_bytes()
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    segs = list(_phdrs(data))
    load = next(s for s in segs if s[0] == 1)
    note = next(s for s in segs if s[0] == 4)
    cuts = {phoff + phnum * phentsize, load[1] + 100, note[1], note[1] + note[2] // 2, note[1] + note[2] - 1}
    p = tmp_path / "core.cut"
    for cut in sorted(cuts):
        p.write_bytes(data[:cut])
        one_line(run([p]), EXIT_INPUT, "is incomplete: cut ")


@pytest.mark.parametrize("cut", [16, 64, 1000])
def test_core_truncated_in_the_headers_says_incomplete(core, tmp_path, cut):
    p = tmp_path / "core.cut"
    p.write_bytes(core.read_bytes()[:cut])
    one_line(run([p]), EXIT_INPUT, "is incomplete: cut ")


def test_corrupt_notes_never_crash(core, tmp_path):
    """Bytes flipped inside PT_NOTE (seeded): a report or one error line, never a traceback."""
    data = bytearray(core.read_bytes())
    note = next(s for s in _phdrs(bytes(data)) if s[0] == 4)
    rng = random.Random(11)
    p = tmp_path / "core.flipped"
    for _ in range(5):
        d = bytearray(data)
        for _ in range(30):
            d[note[1] + rng.randrange(note[2])] = rng.getrandbits(8)
        p.write_bytes(bytes(d))
        res = run([p, "--format", "json", "--timeout", "60"], timeout=120)
        assert b"Traceback" not in res.stderr
        if res.returncode not in (0, 3, 5, 6):
            one_line(res)


# ------------------------------------------------------------------------------ --exe / --gdb


def test_exe_is_a_directory(core, tmp_path):
    one_line(run([core, "--exe", tmp_path]), EXIT_INPUT, "--exe")


def test_exe_of_another_program_is_flagged_at_the_top(core):
    """--exe naming an unrelated binary: the report's first lines say so and name the executable
    the core ran (not only a note at the bottom of a report that otherwise reads as sound)."""
    res = run([core, "--exe", "/bin/ls"], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    head = res.stdout.decode().splitlines()[:6]
    assert any(ln.startswith("WARNING: the core was made by ") and "--exe names /bin/ls (build-id" in ln
               for ln in head), head


@pytest.mark.parametrize("body, match", [
    ("exit 1\n", "exited with status 1"),
    ("exit 0\n", "exited with status 0"),
])
def test_gdb_that_exits_at_once(core, tmp_path, body, match):
    one_line(run([core, "--gdb", _script(tmp_path, "g", body), "--timeout", "10"]), EXIT_TOOL, match)


def test_gdb_not_executable(core, tmp_path):
    one_line(run([core, "--gdb", _script(tmp_path, "g", "exit 0\n", mode=0o644)]), EXIT_INPUT)


@pytest.mark.parametrize("body", [
    'while read l; do echo "^done,garbage{{{"; echo "~\\"x\\""; echo "1^done,bogus"; done\n',
    'while read l; do t=${l%%[!0-9]*}; echo "${t}^done,bogus"; done\n',
    'while read l; do t=${l%%[!0-9]*}; echo "${t}^error,msg=\\"\\\\"; done\n',
    "head -c 100000 /dev/urandom; sleep 30\n",
])
def test_gdb_printing_garbage_mi(core, tmp_path, body):
    """A --gdb that answers with malformed MI (pygdbmi used to raise TypeError on these)."""
    fake = _script(tmp_path, "g", body)
    fake.write_text(fake.read_text().replace("#!/bin/sh", "#!/bin/bash"))
    one_line(run([core, "--gdb", fake, "--timeout", "3"], timeout=60))


def test_nan_timeout_with_a_hung_gdb_ends(core, tmp_path):
    marker = "6%d.%d" % (os.getpid(), random.randrange(10**6))  # a sleep nobody else runs
    fake = _script(tmp_path, "g", "exec sleep %s\n" % marker)
    try:
        res = run([core, "--gdb", fake, "--timeout", "nan"], timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("--timeout nan: still waiting after 10 s")
    finally:  # killed hanganalyze leaves its gdb (own session) behind: end it
        for pid in _pids_with_arg(marker):
            os.kill(pid, signal.SIGKILL)
    one_line(res, EXIT_INPUT)


def _pids_with_arg(arg: str):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if arg.encode() in Path("/proc/%s/cmdline" % d).read_bytes():
                    out.append(int(d))
            except OSError:
                pass
    return out


# ------------------------------------------------------------------------------ -o


@pytest.mark.parametrize("where", ["missing/dir/report.html", ".", "/proc/self/report.html", "/proc/version"])
def test_unwritable_output_is_one_line(core, tmp_path, where):
    out = where if where.startswith("/") else str(tmp_path / where)
    one_line(run([core, "-o", out]), EXIT_INPUT)


def test_output_equal_to_input_keeps_the_core(core, tmp_path):
    copy = tmp_path / "core.copy"
    shutil.copy2(core, copy)
    size = copy.stat().st_size
    res = run([copy, "-o", copy], timeout=120)
    assert copy.stat().st_size == size and copy.read_bytes()[:4] == b"\x7fELF", "the core was overwritten"
    one_line(res, EXIT_INPUT)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_output_to_a_device_keeps_the_device(core, tmp_path):
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private copy of /dev/null
    res = run([core, "-o", null], timeout=120)
    assert stat.S_ISCHR(null.stat().st_mode), "the device node was replaced by a regular file"
    assert res.returncode in (0, 3, 5, 6)


# ------------------------------------------------------------------------------ --pid


@pytest.mark.parametrize("pid", ["0", "-1", "99999999"])
def test_bad_pids(pid):
    one_line(run(["--pid", pid]), EXIT_INPUT)


def test_kernel_thread_pid_is_one_line():
    if not Path("/proc/2/comm").exists() or Path("/proc/2/comm").read_text().strip() != "kthreadd":
        pytest.skip("pid 2 is not kthreadd here")
    one_line(run(["--pid", "2"]), EXIT_INPUT)


def test_pid_beyond_pid_t():
    one_line(run(["--pid", str(2**31)]), EXIT_INPUT)


def test_own_pid_is_refused():
    try:
        res = subprocess.run(["sh", "-c", 'exec "$0" --pid $$ --timeout 5', HANGANALYZE],
                             capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("hanganalyze --pid <itself> hung (killed after 10 s)")
    one_line(res, EXIT_INPUT)


def test_pid_that_exits_before_attach(tmp_path):
    late_gdb = _script(tmp_path, "g", 'sleep 1.5\nexec gdb "$@"\n')
    proc = subprocess.Popen(["sleep", "0.5"])
    try:
        res = run(["--pid", proc.pid, "--gdb", late_gdb])
    finally:
        proc.wait()
    line = one_line(res, EXIT_INPUT)
    assert "exited" in line


def test_sigint_during_live_analysis(tmp_path):
    """Ctrl-C while gdb is attached: one line, exit 4, the target left running and untraced."""
    slow_gdb = _script(tmp_path, "g", 'exec gdb "$@" -iex "python import gdb, time; '
                                      'gdb.events.new_objfile.connect(lambda e: time.sleep(0.3))"\n')
    h = start_hung([str(fixture_binary("cxx_mutex_deadlock"))])
    try:
        p = subprocess.Popen([HANGANALYZE, "--pid", str(h.pid), "--gdb", str(slow_gdb)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_default)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        res = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        one_line(res, EXIT_TOOL, "interrupted")
        status = Path("/proc/%d/status" % h.pid).read_text()
        assert "TracerPid:\t0\n" in status
        assert "State:\tT" not in status and "State:\tt" not in status
        assert h.alive()
    finally:
        h.kill()


# ------------------------------------------------------------------------------ stdin / stdout


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_endless_stdin_is_bounded():
    with open("/dev/zero", "rb") as zero:
        try:
            res = subprocess.run([HANGANALYZE, "-"], stdin=zero, capture_output=True, timeout=60,
                                 preexec_fn=_limit_memory)
        except subprocess.TimeoutExpired:
            pytest.fail("still reading /dev/zero after 60 s")
    one_line(res, EXIT_INPUT)


def test_ascii_stdout(core):
    res = subprocess.run([HANGANALYZE, str(core)], capture_output=True, timeout=120,
                         env=dict(os.environ, PYTHONIOENCODING="ascii"))
    assert b"Traceback" not in res.stderr, res.stderr[-500:]
    assert res.returncode in (0, 3, 5, 6)


def test_undecodable_bytes_on_stdin_to_every_format(tmp_path):
    """Bytes that are not UTF-8 in a paste (read with surrogateescape): reports still write."""
    paste = GDB_PASTE.replace(b"worker", b"work\xff\xfeer")
    for fmt in ("md", "html", "txt", "json"):
        out = tmp_path / ("r." + fmt)
        res = subprocess.run([HANGANALYZE, "-", "-o", str(out)] + (["--format", "text"] if fmt == "txt" else []),
                             input=paste, capture_output=True, timeout=60, env=dict(os.environ, LC_ALL="C.UTF-8"))
        assert res.returncode in (0, 3, 5, 6), res.stderr[-1000:]
        out.read_bytes().decode("utf-8")  # strict


def test_gdb_paste_still_works():
    """Control: the paste the stdin tests use is analyzed normally."""
    res = run_hanganalyze(["-"], stdin=GDB_PASTE, timeout=60)
    assert res.returncode in (0, 3, 5, 6), res.stderr
    assert b"pthread_mutex_lock" in res.stdout


@pytest.fixture(scope="module")
def newline_exe_core(tmp_path_factory):
    """A core of an executable whose folder name holds a newline, a quote and a backslash."""
    d = tmp_path_factory.mktemp("nl") / 'we ird\ndir "q" \\x'
    d.mkdir()
    app = d / "app"
    shutil.copy2(fixture_binary("cxx_mutex_deadlock"), app)
    h = start_hung([str(app)])
    try:
        return app, gcore(h.pid, d.parent)
    finally:
        h.kill()


def test_core_of_an_executable_with_a_newline_in_its_path(newline_exe_core):
    _app, core = newline_exe_core
    res = run([core], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr[-500:]


def test_exe_option_with_a_newline_in_its_path(newline_exe_core):
    app, core = newline_exe_core
    res = run([core, "--exe", app], timeout=120)
    assert res.returncode in (0, 3, 5, 6), res.stderr[-500:]
