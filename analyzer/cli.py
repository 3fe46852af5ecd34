"""The ``hanganalyze`` command line: acquire a snapshot, analyse it, render it.

Kept thin on purpose (as pystack's ``__main__``): every step lives in its own module, and this
file only turns options into calls and errors into one-line messages with documented exit codes.

The options are parsed with argparse, not typer: typer 0.29 builds a pydantic adapter for every
parameter on each run, 0.15-0.25 s of start-up on a 2-core machine, which is a fifth of what
pystack needs for a whole 200-thread core (``bench/bench_stacks.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from hanganalyze import __version__
from hanganalyze.errors import EXIT_FINDING, EXIT_INPUT, EXIT_OK, EXIT_TOOL, HangAnalyzeError, InputError
from hanganalyze.output import check_output, read_stdin, write_output

ELF_MAGIC = b"\x7fELF"
SERIOUS = ("crash", "deadlock", "hang", "error")


FORMATS = ("html", "md", "json", "text")


def progress(msg: str) -> None:
    """Progress goes to stderr, and only to a terminal: pipes and CI logs stay clean."""
    if sys.stderr.isatty():
        sys.stderr.write("hanganalyze: %s\n" % msg)
        sys.stderr.flush()


def fail(msg: str, code: int) -> int:
    """Print the one-line error; return the exit code for the caller to return."""
    sys.stderr.write("hanganalyze: error: %s\n" % " ".join(str(msg).split()))
    return code


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
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
):
    """Turn the user's input (core, pid or text) into a Snapshot.  ``gdb_busy`` is called once
    gdb has its work queued (a moment to do other work)."""
    from hanganalyze.acquire import gdbdriver

    if pid is not None:
        if target:
            raise InputError("give either a core/text file or --pid, not both")
        progress("attaching to pid %d with %s" % (pid, gdb))
        return gdbdriver.snapshot_from_pid(pid, gdb=gdb, timeout=timeout, progress=progress, gdb_busy=gdb_busy)
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
        progress("running %s on %s" % (gdb, path))
        return gdbdriver.snapshot_from_core(
            path, None, exe=exe, gdb=gdb, timeout=timeout, progress=progress, gdb_busy=gdb_busy
        )
    if input_format is None:
        from hanganalyze.acquire.corefile import compressed_kind

        with open(path, "rb") as f:
            packed = compressed_kind(f.read(8))
        if packed:
            raise InputError(
                "%s is %s-compressed: decompress it first (%s FILE, or coredumpctl dump PID -o core)"
                % (path, packed[0], packed[1])
            )
        if _is_binary(path):
            raise InputError("%s is neither an ELF core nor a text file (binary data)" % path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    return _from_text(text, input_format)


def _read_fifo(path: Path, timeout: float) -> str:
    """A named pipe (``hanganalyze <(kubectl logs pod)`` passes ``/dev/fd/63``): read as text like
    stdin, bounded, never blocking on the open, and ending when no writer has sent anything for
    ``timeout`` seconds, so a pipe nobody writes to ends in one line instead of a hang."""
    import select
    import time

    from hanganalyze.output import MAX_STDIN_BYTES

    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e)) from None
    chunks: List[bytes] = []
    total = 0
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if chunks:
                    break  # the writer went quiet: analyse what came
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
                deadline = time.monotonic() + timeout
            elif chunks:
                break  # end of file after data: the writer closed the pipe
            else:
                time.sleep(0.05)  # no writer yet (end of file without one): wait for it
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if data.startswith(ELF_MAGIC):
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


class BackgroundLoad:
    """The signature database, loaded in a thread once ``start()`` is called, or at the latest in
    ``result()``.  The driver calls ``start`` once gdb has all its work queued: from then on this
    process only waits for gdb, so the load (a cached one is ~0.03 s of CPU, a full validation
    ~0.2 s) takes the GIL from nobody, where starting it earlier slowed the core-notes reading."""

    def __init__(self, extra_dirs: List[Path]) -> None:
        self._dirs = extra_dirs
        self._result: dict = {}
        self._thread = None

    def _work(self) -> None:
        from hanganalyze import pipeline

        try:
            self._result["db"] = pipeline.load_signature_db(self._dirs)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread as is
            self._result["error"] = e

    def start(self) -> None:
        if self._thread is None:
            import threading

            self._thread = threading.Thread(target=self._work, name="load-signatures", daemon=True)
            self._thread.start()

    def result(self):
        self.start()
        self._thread.join()
        if "error" in self._result:
            raise self._result["error"]
        return self._result["db"]


class UsageError(Exception):
    """A bad command line; shown as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting: a bad command line is one line,
    like any other bad input."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def _analyze_parser() -> _Parser:
    ap = _Parser(
        prog="hanganalyze",
        description="Analyze a core, a live process or pasted text and report the known bugs it matches.",
        epilog="hanganalyze signatures list|validate [--signatures DIR]: list or validate signature databases.",
    )
    ap.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="A core file, or a text file of gdb/py-spy/pystack/faulthandler output ('-' = stdin).",
    )
    ap.add_argument("--pid", "-p", type=int, help="Analyze a live process (read-only, then detached).")
    ap.add_argument("--exe", type=Path, help="Executable of the core (default: found from the core).")
    ap.add_argument(
        "--format", "-f", dest="fmt", choices=FORMATS, help="Output format (default: html with -o, else text)."
    )
    ap.add_argument("--output", "-o", type=Path, help="Write the report to this file.")
    ap.add_argument("--gdb", default="gdb", help="gdb to use (e.g. cuda-gdb).")
    ap.add_argument("--timeout", type=float, default=120.0, help="Seconds allowed for each gdb step.")
    ap.add_argument(
        "--signatures", type=Path, action="append", default=[], help="Extra signature folder (repeatable)."
    )
    ap.add_argument(
        "--input-format",
        help="Force the text format: auto, gdb, pybt, pyspy, pyspy-json, pystack, faulthandler, traceback, "
        "log (any text as log lines), snapshot-json (a hang-dump JSON file).",
    )
    ap.add_argument("--redact", action="store_true", help="Replace user names, hosts, IPs and secrets.")
    ap.add_argument("--version", action="store_true", help="Print the version and exit.")
    return ap


def _signatures_parser(command: str) -> _Parser:
    helps = {
        "list": "List every signature (built-in and from --signatures folders).",
        "validate": "Validate signature files against the schema; exit 2 with file:line on the first error.",
    }
    ap = _Parser(prog="hanganalyze signatures %s" % command, description=helps[command])
    ap.add_argument(
        "--signatures", type=Path, action="append", default=[], help="Extra signature folder (repeatable)."
    )
    return ap


def _usage_message(message: str) -> str:
    """argparse's wording, made to say what is wrong in the words the docs use."""
    prefix = "unrecognized arguments: "
    if message.startswith(prefix):
        extra = message[len(prefix) :].split()
        options = [a for a in extra if a.startswith("-") and a != "-"]
        if options:
            return "No such option: %s" % options[0]
        return "unexpected extra argument (%s)" % " ".join(extra)
    return message


def default_format(output: Optional[Path]) -> str:
    """html for -o x.html, json for .json, md for .md, text otherwise (a terminal)."""
    if output is not None:
        suffix = output.suffix.lower()
        if suffix in (".html", ".htm"):
            return "html"
        if suffix == ".json":
            return "json"
        if suffix == ".md":
            return "md"
    return "text"


def analyze(args: argparse.Namespace) -> int:
    """Analyze a core, a live process or pasted text and report the known bugs it matches."""
    from hanganalyze import pipeline

    fmt = args.fmt or default_format(args.output)
    try:
        if not (args.timeout > 0 and math.isfinite(args.timeout)):  # NaN would never time out
            raise InputError("--timeout must be a positive number of seconds (got %s)" % args.timeout)
        check_output(args.output, args.target)
        db_load = BackgroundLoad(args.signatures)
        snapshot = acquire(args.target, args.pid, args.exe, args.gdb, args.timeout, args.input_format, db_load.start)
        db = db_load.result()
        progress("matching %d thread(s) against signatures" % sum(len(p.threads) for p in snapshot.processes))
        snapshot = pipeline.analyse(snapshot, db)
        if args.redact:
            from hanganalyze.analyse.redact import redact as do_redact

            snapshot = do_redact(snapshot)
        from hanganalyze.render import render

        data = render(snapshot, fmt)
        write_output(data, args.output)
    except HangAnalyzeError as e:
        return fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_TOOL)
    if args.output is not None:
        progress("wrote %s" % args.output)
    if any(f.severity in SERIOUS for f in snapshot.findings):
        return EXIT_FINDING
    return EXIT_OK


def signatures_command(command: str, dirs: List[Path]) -> int:
    """``signatures list``: one line per signature; ``signatures validate``: a count, or exit 2."""
    from hanganalyze import pipeline

    try:
        db = pipeline.load_signature_db(dirs, use_cache=False)
    except HangAnalyzeError as e:
        return fail(str(e), e.exit_code)
    if command == "list":
        from hanganalyze.render.text import clean  # user YAML may hold terminal escape sequences

        for sig in db.signatures:
            sys.stdout.write("%-45s %-9s %s\n" % (clean(sig.id), clean(sig.severity), clean(sig.title)))
    else:
        sys.stdout.write("%d signatures valid\n" % len(db.signatures))
    return EXIT_OK


def run(argv: Sequence[str]) -> int:
    """The whole command line; returns the exit code."""
    argv = list(argv)
    try:
        if argv and argv[0] == "signatures":
            if len(argv) < 2:
                raise UsageError("missing command (signatures list|validate)")
            if argv[1] in ("-h", "--help"):
                sys.stdout.write(
                    "usage: hanganalyze signatures {list,validate} [--signatures DIR]\n\n"
                    "  list      %s\n  validate  %s\n"
                    % (_signatures_parser("list").description, _signatures_parser("validate").description)
                )
                return EXIT_OK
            if argv[1] not in ("list", "validate"):
                raise UsageError("No such command '%s' (signatures list|validate)" % argv[1])
            parser = _signatures_parser(argv[1])
            args = parser.parse_args(argv[2:])
            return signatures_command(argv[1], args.signatures)
        args = _analyze_parser().parse_args(argv)
    except UsageError as e:
        msg = " ".join(_usage_message(str(e)).split())
        sys.stderr.write("hanganalyze: error: %s (see hanganalyze --help)\n" % msg)
        return EXIT_INPUT
    if args.version:
        sys.stdout.write("hanganalyze %s\n" % __version__)
        return EXIT_OK
    return analyze(args)


def main() -> None:
    """Entry point: ``hanganalyze signatures ...`` is the only sub-command; anything else is analysis."""
    try:
        rc = run(sys.argv[1:])
    except KeyboardInterrupt:
        sys.stderr.write("hanganalyze: error: interrupted\n")
        rc = EXIT_TOOL
    except BrokenPipeError:  # `hanganalyze ... | head`: the reader left, nothing to report
        try:
            sys.stdout = None  # type: ignore[assignment] - no flush of the dead pipe at exit
        finally:
            rc = EXIT_OK
    sys.exit(rc)
