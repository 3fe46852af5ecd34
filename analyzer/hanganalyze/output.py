"""Where a report goes, and reading stdin: checked up front, written so a failure never destroys
anything or leaves a half-written report under the final name.

Checked before analysis starts, because gdb may run for minutes first: the output folder exists and
is writable, and ``-o`` does not name the input (``hanganalyze core -o core`` would replace the core
with its own report).  Regular files are written to a temporary file and renamed; anything else
(``/dev/null``, a FIFO, a terminal) is written in place, since renaming over it would replace a
device node with a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from pathlib import Path
from typing import Optional

from hanganalyze.deadline import Deadline
from hanganalyze.errors import InputError, UsageError

#: Text read from stdin is bounded: ``hanganalyze - < /dev/zero`` must end with an error, not eat memory.
MAX_STDIN_BYTES = 256 * 1024 * 1024


def _same_file(a: Path, b: Path) -> bool:
    try:
        sa, sb = a.stat(), b.stat()
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output(output: Optional[Path], target: Optional[str]) -> None:
    """Refuse an output that cannot be written, or that is the input, before any work is done."""
    if output is None:
        return
    if target and target != "-" and _same_file(output, Path(target)):
        raise InputError("-o %s is the input file: choose another name for the report" % output)
    if output.is_dir():
        raise InputError("cannot write %s: it is a directory" % output)
    parent = output.resolve().parent if not output.exists() else None
    if parent is not None:
        if not parent.is_dir():
            raise InputError("cannot write %s: folder %s does not exist" % (output, parent))
        if not os.access(str(parent), os.W_OK | os.X_OK):
            raise InputError("cannot write %s: folder %s is not writable" % (output, parent))


def _encode_for(stream, data: str) -> bytes:
    """Bytes for a terminal or pipe whatever its encoding (LANG=POSIX, PYTHONIOENCODING=ascii)."""
    return data.encode(getattr(stream, "encoding", None) or "utf-8", "backslashreplace")


def write_output(data: str, output: Optional[Path]) -> None:
    if not data.endswith("\n"):
        data += "\n"
    if output is None:
        buf = getattr(sys.stdout, "buffer", None)
        try:
            if buf is not None:
                sys.stdout.flush()
                buf.write(_encode_for(sys.stdout, data))
                buf.flush()
            else:
                sys.stdout.write(data)
                sys.stdout.flush()
        except BrokenPipeError:
            # `hanganalyze core | head`: the reader has what it wanted; silence the final flush too.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return
    try:
        mode = output.stat().st_mode if output.exists() else None
        if mode is not None and stat.S_ISFIFO(mode):
            with os.fdopen(_open_fifo_for_writing(output), "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(data)
            return
        if mode is not None and not stat.S_ISREG(mode):
            with open(output, "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(data)
            return
        _write_atomically(data, output.resolve())
    except OSError as e:
        raise InputError("cannot write %s: %s" % (output, e.strerror or e)) from None


#: How long ``-o FIFO`` waits for a reader: a plain open() of a FIFO nobody reads blocks forever.
FIFO_READER_WAIT = 10.0


def _open_fifo_for_writing(path: Path) -> int:
    """A blocking write descriptor on the FIFO once it has a reader; InputError after FIFO_READER_WAIT s."""
    wait = FIFO_READER_WAIT
    deadline = Deadline(wait)
    while True:
        try:
            fd = os.open(str(path), os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            if deadline.passed():
                raise InputError("cannot write %s: nobody reads this FIFO (waited %g s)" % (path, wait)) from None
            time.sleep(0.05)
    os.set_blocking(fd, True)  # the reader sets the pace from here on
    return fd


def _write_atomically(data: str, output: Path) -> None:
    import tempfile  # here: its imports (shutil, random, bz2, lzma) cost a one-sample run ~8 ms

    fd, tmp = tempfile.mkstemp(prefix=".%s." % output.name, dir=str(output.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would surprise whoever shares the report
        os.replace(tmp, output)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_stdin(limit: int = MAX_STDIN_BYTES) -> str:
    """All of stdin as text, at most ``limit`` bytes (an endless stream is an error, not a hang)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        return sys.stdin.read(limit)
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputError("stdin holds more than %d MiB: save it to a file and trim it" % (limit // (1024 * 1024)))
    return data.decode("utf-8", errors="replace")


#: ``-o``'s file name extensions and the format each means when ``--format`` is not given (no
#: extension: text).  Any other one is refused: ``-o x.pdf`` must not silently write text.
OUTPUT_SUFFIXES = {".html": "html", ".htm": "html", ".json": "json", ".md": "md", ".txt": "text", ".text": "text",
                   ".log": "text", "": "text"}


def default_format(output: Optional[Path]) -> str:
    """html for -o x.html, json for .json, md for .md, text otherwise (a terminal)."""
    if output is not None:
        return OUTPUT_SUFFIXES.get(output.suffix.lower(), "text")
    return "text"


def check_output_suffix(output: Optional[Path], fmt: Optional[str]) -> None:
    """Refuse ``-o`` with an extension that names no format (``x.pdf``), unless ``--format`` says
    which one to write or the target is no regular file (a device, a fifo)."""
    if output is None or fmt is not None or output.suffix.lower() in OUTPUT_SUFFIXES:
        return
    if output.exists() and not output.is_file():
        return
    known = ", ".join(sorted({k for k in OUTPUT_SUFFIXES if k}))
    raise UsageError("-o %s: unknown extension %s (known: %s; or give --format)" % (output, output.suffix, known))


def wrote(output: Path, fmt: str) -> None:
    """The one line that says where the report went.  Unlike ``progress`` it is written when stderr
    is no terminal too (a script must learn where its report is; stdout, the report's pipe when
    there is no -o, stays clean)."""
    sys.stderr.write("hanganalyze: wrote %s (%s)\n" % (output, fmt))
    sys.stderr.flush()
