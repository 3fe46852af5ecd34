"""Compressed inputs, read directly: systemd-coredump stores cores as ``.zst`` (``.lz4`` and ``.xz``
on older systems), and cores and logs travel as ``.gz``.

The format is known from the first bytes (``corefile.compressed_kind``), never the name.  The
stream is decompressed once, in bounded chunks:

* what starts with an ELF header goes to a private temporary file (``$TMPDIR``, mode 0600) that
  gdb then reads like any core.  Runs of zeros (aligned 64 KiB blocks) are skipped with ``seek``
  instead of written, so a mostly empty core (GPU processes, big idle heaps) stays sparse on disk.
  Free space is checked with ``statvfs`` as the file grows: when it runs low the run stops with
  one line ("not enough space in TMPDIR ... set TMPDIR") instead of filling the disk.  The file
  is removed whatever happens (errors, Ctrl-C), and the report names the compressed file, never
  the temporary one;
* anything else is read into memory as text, bounded like stdin (``output.MAX_STDIN_BYTES``).

A truncated or corrupt stream is an input error naming the file and what is wrong; nothing that
was decompressed before it is analyzed.

Libraries: the standard library's ``gzip``, ``lzma`` and ``bz2``, and ``zstandard`` and ``lz4``.
zstd is fed through ``decompressobj`` in small pieces because its stream reader ends silently at a
truncated frame; the pieces bound the memory a highly compressed run of zeros can expand to.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, List, Optional, Tuple

from hanganalyze.elf import is_elf
from hanganalyze.errors import HangAnalyzeError, InputError
from hanganalyze.output import MAX_STDIN_BYTES

#: Decompressed bytes asked for at a time (and the size of what the zstd reader yields).
CHUNK = 1 << 20
#: Compressed bytes given to zstd at a time: zstd expands at most 32768x (1 GiB of zeros is
#: 32 KiB), so one piece yields at most 32 MiB.
ZSTD_FEED = 1024
#: Zero runs of this size, aligned in the file, are holes (a filesystem block is 4 KiB: any
#: multiple keeps holes aligned; 64 KiB keeps the comparisons few).
HOLE_BLOCK = 64 * 1024
#: Free space checked every time this much more was written.
CHECK_EVERY = 64 << 20
#: Free space left for everything else on the TMPDIR filesystem: decompression stops before it.
MIN_FREE_BYTES = 512 << 20

_ZERO = bytes(HOLE_BLOCK)
TEMP_PREFIX = "hanganalyze-core-"

Progress = Optional[Callable[[str], None]]


class _Corrupt(Exception):
    """The stream is truncated or corrupt (message: what is wrong)."""


def _mb(n: float) -> str:
    return "%.1f MB" % (n / 1e6)


# ------------------------------------------------------------------------------- the streams


def _reader(kind: str, fh: BinaryIO):
    """A file object whose read(n) returns at most n decompressed bytes and raises EOFError when
    the stream ends before its end mark (all of these read concatenated streams too)."""
    if kind == "gzip":
        import gzip  # here: only the codec of this input (start-up time)

        return gzip.GzipFile(fileobj=fh, mode="rb")
    if kind == "xz":
        import lzma  # here: only the codec of this input (start-up time)

        return lzma.LZMAFile(fh, "rb")
    if kind == "bzip2":
        import bz2  # here: only the codec of this input (start-up time)

        return bz2.BZ2File(fh, "rb")
    if kind == "lz4":
        import lz4.frame  # optional dependency (pip install lz4)

        return lz4.frame.LZ4FrameFile(fh, "rb")
    raise InputError("%s: unsupported compression" % kind)


def _zstd_chunks(fh: BinaryIO) -> Iterator[bytes]:
    """zstd frames one after the other; a frame the file ends inside is truncation."""
    import zstandard  # optional dependency (pip install zstandard)

    dctx = zstandard.ZstdDecompressor()
    obj = None  # the frame being decoded (None: between frames)
    out: List[bytes] = []
    size = 0
    while True:
        raw = fh.read(CHUNK)
        if not raw:
            break
        view = memoryview(raw)
        for i in range(0, len(raw), ZSTD_FEED):
            piece = view[i : i + ZSTD_FEED]
            while piece:
                if obj is None:
                    obj = dctx.decompressobj()
                data = obj.decompress(piece)
                piece = b""
                if data:
                    out.append(data)
                    size += len(data)
                if obj.eof:  # the frame ended: what follows is the next frame
                    piece = obj.unused_data
                    obj = None
            if size >= CHUNK:
                yield b"".join(out)
                out, size = [], 0
    if obj is not None:
        raise EOFError("the file ends inside a zstd frame")
    if out:
        yield b"".join(out)


def _chunks(kind: str, fh: BinaryIO) -> Iterator[bytes]:
    """The decompressed stream in chunks; _Corrupt for a truncated or corrupt stream."""
    import zlib  # here: only the codec of this input (start-up time)

    errors: Tuple[type, ...] = (OSError, ValueError, RuntimeError, zlib.error)
    try:
        import lzma  # here: only the codec of this input (start-up time)

        errors += (lzma.LZMAError,)
        if kind == "zstd":
            import zstandard  # optional dependency (pip install zstandard)

            errors += (zstandard.ZstdError,)
    except ImportError:  # pragma: no cover - lzma is built without liblzma on some Pythons
        pass
    try:
        if kind == "zstd":
            yield from _zstd_chunks(fh)
            return
        reader = _reader(kind, fh)
        while True:
            data = reader.read(CHUNK)
            if not data:
                return
            yield data
    except EOFError:
        raise _Corrupt("truncated %s data: the file ends before the end of the compressed stream" % kind) from None
    except errors as e:
        raise _Corrupt("corrupt %s data (%s)" % (kind, " ".join(str(e).split()) or type(e).__name__)) from None


# ------------------------------------------------------------------------------- the core file


@dataclasses.dataclass
class Decompressed:
    """A core decompressed into a temporary file (removed when the ``decompressed_core`` block ends)."""

    path: Path
    kind: str
    compressed_size: int
    apparent_size: int
    disk_size: int

    def note(self) -> str:
        return "core decompressed from %s (%s -> %s apparent, %s on disk)" % (
            self.kind, _mb(self.compressed_size), _mb(self.apparent_size), _mb(self.disk_size))


def _free_bytes(fd: int) -> int:
    st = os.fstatvfs(fd)
    return st.f_bavail * st.f_frsize


class _SparseWriter:
    """Writes a stream to ``fd``, seeking over aligned all-zero blocks; watches the free space."""

    def __init__(self, fd: int, on_full: Callable[[int, int], None]) -> None:
        self.fd = fd
        self.on_full = on_full  # (bytes written so far, bytes free) -> raises
        self.offset = 0  # apparent size so far
        self.written = 0  # bytes really written (allocated)
        self._pending = bytearray()
        self._next_check = 0

    def _check_space(self) -> None:
        if self.written >= self._next_check:
            free = _free_bytes(self.fd)
            if free < MIN_FREE_BYTES:
                self.on_full(self.written, free)
            # never let one check period cross the reserve
            self._next_check = self.written + min(CHECK_EVERY, max(HOLE_BLOCK, (free - MIN_FREE_BYTES) // 2))

    @staticmethod
    def _is_hole(data: bytes, i: int, stop: int) -> bool:
        block = data[i : min(i + HOLE_BLOCK, stop)]  # a copy, then memcmp (a memoryview compares bytewise)
        return block == (_ZERO if len(block) == HOLE_BLOCK else bytes(len(block)))

    def _emit(self, data: bytes, start: int, stop: int) -> None:
        """data[start:stop], whole blocks (the last one may be short: end of stream), at self.offset."""
        i = start
        while i < stop:
            if self._is_hole(data, i, stop):
                i += HOLE_BLOCK
                continue
            j = i + HOLE_BLOCK
            while j < stop and not self._is_hole(data, j, stop):
                j += HOLE_BLOCK
            j = min(j, stop)
            self._check_space()
            base = self.offset - start  # file offset of data[0]
            with memoryview(data) as view:
                done = i
                while done < j:
                    try:
                        done += os.pwrite(self.fd, view[done:j], base + done)
                    except OSError as e:
                        if e.errno in (errno.ENOSPC, errno.EDQUOT):
                            self.on_full(self.written, _free_bytes(self.fd))
                        raise
            self.written += j - i
            i = j
        self.offset += stop - start

    def write(self, chunk: bytes) -> None:
        start = 0
        pending = self._pending
        if pending:  # complete the block begun by the last chunk
            start = min(len(chunk), HOLE_BLOCK - len(pending))
            pending += chunk[:start]
            if len(pending) < HOLE_BLOCK:
                return
            self._emit(bytes(pending), 0, HOLE_BLOCK)
            pending.clear()
        stop = start + (len(chunk) - start) // HOLE_BLOCK * HOLE_BLOCK
        self._emit(chunk, start, stop)
        pending += chunk[stop:]

    def close(self) -> None:
        if self._pending:
            self._emit(bytes(self._pending), 0, len(self._pending))
            self._pending = bytearray()
        os.ftruncate(self.fd, self.offset)  # a trailing hole still counts in the size


def _space_error(src: Path, fh: BinaryIO, compressed: int, tmpdir: str):
    def on_full(written: int, free: int) -> None:
        done = max(1, fh.tell())
        # what the rest will take if it is like what came so far (at least what was written)
        need = max(written + MIN_FREE_BYTES, written * compressed / done + MIN_FREE_BYTES)
        raise InputError(
            "not enough space in TMPDIR (%s) to decompress %s: need at least %.1f GB, %.1f GB free; "
            "set TMPDIR to a folder on a larger disk" % (tmpdir, src, need / 1e9, (free + written) / 1e9)
        )

    return on_full


@contextmanager
def decompressed_core(src: Path, kind: str, fh: BinaryIO, chunks: Iterator[bytes], first: bytes,
                      tmpdir: Optional[str] = None) -> Iterator[Decompressed]:
    """Write ``first`` and the rest of ``chunks`` to a sparse private temporary file; yields it
    and removes it when the block ends, whatever ends it."""
    tmpdir = tmpdir or tempfile.gettempdir()
    compressed = os.fstat(fh.fileno()).st_size
    try:
        fd, name = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=tmpdir)
    except OSError as e:
        raise InputError("cannot create a temporary file in TMPDIR (%s) to decompress %s: %s"
                         % (tmpdir, src, e.strerror or e)) from None
    try:
        try:
            writer = _SparseWriter(fd, _space_error(src, fh, compressed, tmpdir))
            writer.write(first)
            for chunk in chunks:
                writer.write(chunk)
            writer.close()
            disk = os.fstat(fd).st_blocks * 512
        except _Corrupt as e:
            raise InputError("%s: %s" % (src, e)) from None
        except OSError as e:
            raise InputError("cannot write the decompressed core of %s to TMPDIR (%s): %s"
                             % (src, tmpdir, e.strerror or e)) from None
        finally:
            os.close(fd)
        yield Decompressed(Path(name), kind, compressed, writer.offset, disk)
    finally:
        try:
            os.unlink(name)
        except OSError:
            pass


# ------------------------------------------------------------------------------- entry point


def _renamed(obj, pairs: List[Tuple[str, str]]):
    """``obj`` with the temporary file's name replaced by the compressed file's in every string."""
    if isinstance(obj, str):
        for old, new in pairs:
            if old in obj:
                obj = obj.replace(old, new)
        return obj
    if isinstance(obj, list):
        obj[:] = [_renamed(x, pairs) for x in obj]
    elif isinstance(obj, dict):
        for k in list(obj):
            obj[k] = _renamed(obj[k], pairs)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            setattr(obj, f.name, _renamed(getattr(obj, f.name), pairs))
    return obj


def _name_pairs(tmp: Path, src: Path) -> List[Tuple[str, str]]:
    olds = {str(tmp), os.path.realpath(str(tmp))}
    return [(old, str(src)) for old in sorted(olds, key=len, reverse=True)]


def acquire_compressed(
    path: Path,
    kind: str,
    input_format: Optional[str],
    core: Callable[[Path], object],
    text: Callable[[str], object],
    progress: Progress = None,
    text_limit: Optional[int] = None,
    tmpdir: Optional[str] = None,
):
    """Decompress ``path`` (format ``kind``): an ELF core goes through ``core(decompressed_path)``
    (its Snapshot gets a note and the compressed file's name), anything else through ``text``."""
    limit = text_limit or MAX_STDIN_BYTES
    if progress:
        progress("decompressing %s (%s)" % (path, kind))
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    with fh:
        chunks = _chunks(kind, fh)
        try:
            first = b""
            for chunk in chunks:  # enough to tell an ELF core from text
                first += chunk
                if len(first) >= 8192:
                    break
            if not first:
                raise InputError("%s is %s-compressed and holds nothing" % (path, kind))
            if is_elf(first) and input_format is None:
                with decompressed_core(path, kind, fh, chunks, first, tmpdir) as d:
                    try:
                        snap = core(d.path)
                    except HangAnalyzeError as e:
                        msg = _renamed(str(e), _name_pairs(d.path, path))
                        raise type(e)(msg) from None
                    _renamed(snap.warnings, _name_pairs(d.path, path))
                    for proc in snap.processes:
                        for f in dataclasses.fields(proc):
                            if f.name != "threads":  # frames name mapped files, never the core
                                setattr(proc, f.name, _renamed(getattr(proc, f.name), _name_pairs(d.path, path)))
                        proc.notes.append(d.note())
                return snap
            parts = [first]
            size = len(first)
            for chunk in chunks:
                parts.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise InputError("%s decompresses to more than %d MiB of text: decompress it and trim it"
                                     % (path, limit // (1024 * 1024)))
        except _Corrupt as e:
            raise InputError("%s: %s" % (path, e)) from None
    data = b"".join(parts)
    if input_format is None and (is_elf(data) or b"\0" in data[:8192]):
        raise InputError("%s is %s-compressed, and what it holds is neither an ELF core nor a text file "
                         "(binary data)" % (path, kind))
    return text(data.decode("utf-8", errors="replace"))
