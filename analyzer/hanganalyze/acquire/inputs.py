"""One input in, one Snapshot out: a core, a live pid, a text file, stdin, a FIFO, a snapshot JSON,
a flight-recorder dump.

Deciding what a file is happens here, from its first bytes (never its name): an ELF core goes to
gdb, a flight-recorder pickle to its restricted reader, a ``hanganalyze/1`` JSON is read as is,
and anything else that is text goes to the text parsers.  A compressed file (zstd, lz4, xz, gzip,
bzip2) is decompressed first (``compressed.py``): a core to a sparse temporary file, text in
memory.  Binary data is refused with one line.
"""

from __future__ import annotations

import os
import platform
import stat
from pathlib import Path
from typing import Callable, List, Optional

from hanganalyze.elf import is_elf
from hanganalyze.errors import InputError
from hanganalyze.output import read_stdin

Progress = Optional[Callable[[str], None]]


def _quiet(msg: str) -> None:
    """Default progress: nothing."""


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return is_elf(f.read(4))
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None


def _is_binary(path: Path) -> bool:
    """NUL bytes in the first 8 KiB: not text (stack dumps never have them), so not for the parsers."""
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(8192)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None


def acquire(
    target: Optional[str],
    pid: Optional[int],
    exe: Optional[Path],
    gdb: str,
    timeout: float,
    input_format: Optional[str],
    gdb_busy: Optional[Callable[[], None]] = None,
    progress: Progress = None,
    options=None,
    engine: str = "auto",
):
    """Turn the user's input (core, pid or text) into a Snapshot.  ``gdb_busy`` is called once
    gdb has its work queued (a moment to do other work); ``options`` (sysroot.GdbOptions): gdb's
    --sysroot, --solib-search-path and --debuginfod."""
    progress = progress or _quiet
    if pid is not None:
        if target:
            raise InputError("give either a core/text file or --pid, not both")
        if choose_engine(engine, gdb, options) == "direct":
            from hanganalyze.direct.acquire import snapshot_from_pid

            snap = _try_direct("pid %d" % pid, lambda: snapshot_from_pid(pid, timeout=timeout), engine, gdb,
                               progress)
            if snap is not None:
                return snap
        from hanganalyze.acquire.gdblive import snapshot_from_pid

        progress("attaching to pid %d with %s" % (pid, gdb))
        return snapshot_from_pid(pid, gdb=gdb, timeout=timeout, progress=progress, gdb_busy=gdb_busy, options=options)
    if not target:
        raise InputError("nothing to analyze: give a core file, a text file ('-' for stdin) or --pid PID")
    if target == "-":
        return _from_text(read_stdin(), input_format)
    path = Path(target)
    if not path.exists():
        raise InputError("%s: no such file" % path)
    if path.is_dir():
        raise InputError("%s is a directory, not a core or text file" % path)
    if stat.S_ISFIFO(path.stat().st_mode):
        return _from_text(_read_fifo(path, timeout), input_format)
    if path.stat().st_size == 0:
        raise InputError("%s is empty" % path)
    if _is_elf(path) and input_format is None:
        # gdb starts first; the core's notes are read while it starts (snapshot_from_core)
        return _from_core(path, exe, gdb, timeout, gdb_busy, progress, options, engine)
    from hanganalyze.acquire.corefile import compressed_kind

    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    packed = compressed_kind(head[:8])
    if packed:
        # systemd-coredump's .zst, a .gz log: decompressed (a core to a sparse temporary file)
        from hanganalyze.acquire.compressed import acquire_compressed

        def core(decompressed: Path):
            return _from_core(decompressed, exe, gdb, timeout, gdb_busy, progress, options, engine)

        return acquire_compressed(path, packed[0], input_format, core, lambda text: _from_text(text, input_format),
                                  progress=progress)
    if input_format is None:
        from hanganalyze.acquire.flight_recorder import looks_like_flight_recorder, read_flight_recorder

        if looks_like_flight_recorder(head):
            from hanganalyze_gdbext.model import Snapshot

            return Snapshot(processes=[read_flight_recorder(path)])
        if _is_binary(path):
            raise InputError("%s is neither an ELF core nor a text file (binary data)" % path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    return _from_text(text, input_format)


ENGINES = ("auto", "direct", "gdb")


def choose_engine(engine: str, gdb: str, options) -> str:
    """``auto``: the direct reader (seconds and GBs less than gdb on PyTorch processes) unless the
    user named a debugger (``--gdb cuda-gdb``), asked for gdb's file search (``--sysroot``,
    ``--solib-search-path``, ``--debuginfod``), or this is not x86-64."""
    if engine not in ENGINES:
        raise InputError("--engine must be one of %s (got %r)" % (", ".join(ENGINES), engine))
    if engine != "auto":
        return engine
    if gdb != "gdb" or platform.machine() not in ("x86_64", "AMD64"):
        return "gdb"
    if options is not None and (getattr(options, "elsewhere", False) or getattr(options, "debuginfod", False)):
        return "gdb"
    return "direct"


def _try_direct(what: str, read, engine: str, gdb: str, progress):
    """The direct reader's snapshot, or None when it gave up and gdb should read it instead (with
    ``--engine direct``, its reason is the one-line error).  A user error is an error either way."""
    progress("reading %s directly" % what)
    try:
        return read()
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - DirectUnsupported, or a bug: gdb still reads it
        if engine == "direct":
            raise InputError("--engine direct cannot read %s: %s" % (what, _one_line(e))) from None
        progress("direct reader gave up (%s): using %s" % (_one_line(e), gdb))
    return None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:200]


def _from_core(path: Path, exe, gdb: str, timeout: float, gdb_busy, progress, options, engine: str):
    from hanganalyze.acquire import gdbcore

    info = None
    if choose_engine(engine, gdb, options) == "direct":
        from hanganalyze.acquire.corefile import read_core
        from hanganalyze.direct.acquire import snapshot_from_core, usable_for_core

        info = read_core(path)
        if usable_for_core(info, exe) or engine == "direct":
            snap = _try_direct(str(path), lambda: snapshot_from_core(path, info, exe=exe, options=options), engine,
                               gdb, progress)
            if snap is not None:
                return snap
    progress("running %s on %s" % (gdb, path))
    # ``info``, when the direct engine's choice read it already, spares gdb's flow a second reading
    return gdbcore.snapshot_from_core(
        path, info, exe=exe, gdb=gdb, timeout=timeout, progress=progress, gdb_busy=gdb_busy, options=options
    )


def _read_fifo(path: Path, timeout: float) -> str:
    """A named pipe (``hanganalyze <(kubectl logs pod)`` passes ``/dev/fd/63``): read as text like
    stdin, bounded, never blocking on the open, and ending when no writer has sent anything for
    ``timeout`` seconds, so a pipe nobody writes to ends in one line instead of a hang."""
    import select
    import time

    from hanganalyze.acquire.deadline import Deadline
    from hanganalyze.output import MAX_STDIN_BYTES

    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    chunks: List[bytes] = []
    total = 0
    deadline = Deadline(timeout)
    try:
        while True:
            left = deadline.left()
            if left <= 0:
                if chunks:
                    break  # the writer went quiet: analyze what came
                raise InputError("%s: nothing was written to the pipe within %g s" % (path, timeout))
            select.select([fd], [], [], min(left, 0.5))
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue  # a writer is there, nothing to read yet
            except OSError as e:
                raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
            if chunk:
                chunks.append(chunk)
                total += len(chunk)
                if total > MAX_STDIN_BYTES:
                    raise InputError("%s holds more than %d MiB: save it to a file and trim it"
                                     % (path, MAX_STDIN_BYTES // (1024 * 1024)))
                deadline.restart()
            elif chunks:
                break  # end of file after data: the writer closed the pipe
            else:
                time.sleep(0.05)  # no writer yet (end of file without one): wait for it
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if is_elf(data):
        raise InputError("%s is a pipe: give an ELF core as a file (gdb reads it by offset)" % path)
    if b"\0" in data[:8192]:
        raise InputError("%s is neither an ELF core nor a text file (binary data)" % path)
    return data.decode("utf-8", errors="replace")


def _from_text(text: str, input_format: Optional[str]):
    """A hanganalyze/1 JSON snapshot (hang-dump, hang-analyze) as is; anything else to the parsers."""
    from hanganalyze.acquire import snapshot_json

    if input_format == snapshot_json.FORMAT_NAME or (
        input_format in (None, "auto") and snapshot_json.looks_like_snapshot(text)
    ):
        return snapshot_json.read_snapshot(text)
    from hanganalyze.acquire.text import parse_text

    return parse_text(text, input_format)
