"""One input in, one Snapshot out: a core, a live pid, a text file, stdin, a FIFO, a snapshot JSON,
a flight-recorder dump.

Deciding what a file is happens here, from its first bytes (never its name): an ELF core goes to
``engine.py`` (the direct reader or gdb, as a pid does), a flight-recorder pickle to its
restricted reader, a ``hanganalyze/1`` JSON is read as is, and anything else that is text goes
to the text parsers.  A compressed file (zstd, lz4, xz, gzip, bzip2) is decompressed first
(``compressed.py``): a core to a sparse temporary file, text in memory.  Binary data is refused
with one line.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import List, Optional

from hanganalyze.acquire import engine
from hanganalyze.corefile import compressed_kind
from hanganalyze.deadline import Deadline
from hanganalyze.elf import is_elf
from hanganalyze.errors import InputError
from hanganalyze.output import MAX_STDIN_BYTES, read_stdin
from hanganalyze_gdbext.model import Snapshot


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


def acquire(target: Optional[str], pid: Optional[int], request: engine.EngineRequest,
            exe: Optional[Path] = None, input_format: Optional[str] = None):
    """Turn the user's input (core, pid or text) into a Snapshot.  ``request``: how a core or a
    pid is read (``engine.py``; its timeout also bounds a FIFO's silence); ``exe``: ``--exe`` for
    a core; ``input_format``: ``--input-format`` for a text."""
    if pid is not None:
        if target:
            raise InputError("give either a core/text file or --pid, not both")
        return engine.from_pid(pid, request)
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
        return _from_text(_read_fifo(path, request.timeout), input_format)
    if path.stat().st_size == 0:
        raise InputError("%s is empty" % path)
    if _is_elf(path) and input_format is None:
        # gdb starts first; the core's notes are read while it starts (snapshot_from_core)
        return engine.from_core(path, request, exe)  # the direct reader or gdb: engine.choose

    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    packed = compressed_kind(head[:8])
    if packed:
        # systemd-coredump's .zst, a .gz log: decompressed (a core to a sparse temporary file)
        from hanganalyze.acquire import compressed  # here: only a compressed input needs it (start-up time)

        def core(decompressed: Path):
            return engine.from_core(decompressed, request, exe)

        return compressed.acquire_compressed(path, packed[0], input_format, core,
                                             lambda text: _from_text(text, input_format), progress=request.progress)
    if input_format is None:
        from hanganalyze.acquire import flight_recorder as fr  # here: never for a live run (start-up time)

        if fr.looks_like_flight_recorder(head):
            return Snapshot(processes=[fr.read_flight_recorder(path)])
        if _is_binary(path):
            raise InputError("%s is neither an ELF core nor a text file (binary data)" % path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    if input_format is None:
        from hanganalyze.acquire import ncclras  # here: only a text input (start-up time)

        if ncclras.looks_like_ras(text[:4096]):  # saved NCCL RAS queries (ncclras, nc localhost 28028)
            return ncclras.ras_snapshot(text, str(path))
        from hanganalyze.acquire import torch_debug as td  # here: only a TORCH_DEBUG folder (start-up time)

        if td.looks_like_debug_dump(text[:65536]):  # PyTorch's debug server's dump: every rank's stacks
            return td.read_debug_dump(text, str(path))
        if td.looks_like_rank_traceback(text[:4096]):  # one rank's answer of that server
            return td.read_rank_traceback(text)
    return _from_text(text, input_format)


def _read_fifo(path: Path, timeout: float) -> str:
    """A named pipe (``hanganalyze <(kubectl logs pod)`` passes ``/dev/fd/63``): read as text like
    stdin, bounded, never blocking on the open, and ending when no writer has sent anything for
    ``timeout`` seconds, so a pipe nobody writes to ends in one line instead of a hang."""
    import select  # here: only a named pipe needs it (a live run does not import it)

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
    from hanganalyze.acquire import snapshot_json  # here: only a JSON input (start-up time of a live run)

    if input_format == snapshot_json.FORMAT_NAME or (
        input_format in (None, "auto") and snapshot_json.looks_like_snapshot(text)
    ):
        return snapshot_json.read_snapshot(text)
    from hanganalyze.acquire import ncclras  # here: only a text input (start-up time of a live run)

    if input_format in (None, "auto") and ncclras.looks_like_ras(text[:4096]):  # RAS output piped in
        return ncclras.ras_snapshot(text, "stdin")
    from hanganalyze.acquire import gpustate  # here: only a text input (start-up time of a live run)

    if input_format == gpustate.FORMAT_NAME or (input_format in (None, "auto") and gpustate.looks_like(text)):
        return gpustate.read_gpustate(text)  # nvidia-smi / kernel-log Xid lines: Snapshot.gpu, no process
    from hanganalyze.acquire.text import parse_text  # here: only a text input (the parsers cost a live run)

    snap = parse_text(text, input_format)
    if snap.gpu is None:  # kernel-log Xid lines pasted beside the stacks (a bug report): Snapshot.gpu too
        snap.gpu = gpustate.xids_beside(text)
    return snap
