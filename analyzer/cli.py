"""The ``hanganalyze`` command line: acquire a snapshot, analyse it, render it.

Kept thin on purpose (as pystack's ``__main__``): every step lives in its own module, and this
file only turns options into calls and errors into one-line messages with documented exit codes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from hanganalyze import __version__
from hanganalyze.errors import EXIT_FINDING, EXIT_INPUT, EXIT_OK, EXIT_TOOL, HangAnalyzeError, InputError

ELF_MAGIC = b"\x7fELF"
SERIOUS = ("crash", "deadlock", "hang", "error")


class OutputFormat(str, Enum):
    html = "html"
    md = "md"
    json = "json"
    text = "text"


def progress(msg: str) -> None:
    """Progress goes to stderr, and only to a terminal: pipes and CI logs stay clean."""
    if sys.stderr.isatty():
        sys.stderr.write("hanganalyze: %s\n" % msg)
        sys.stderr.flush()


def fail(msg: str, code: int) -> None:
    sys.stderr.write("hanganalyze: error: %s\n" % " ".join(str(msg).split()))
    raise typer.Exit(code)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo("hanganalyze %s" % __version__)
        raise typer.Exit(EXIT_OK)


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
):
    """Turn the user's input (core, pid or text) into a Snapshot."""
    from hanganalyze.acquire import gdbdriver

    if pid is not None:
        if target:
            raise InputError("give either a core/text file or --pid, not both")
        progress("attaching to pid %d with %s" % (pid, gdb))
        return gdbdriver.snapshot_from_pid(pid, gdb=gdb, timeout=timeout, progress=progress)
    if not target:
        raise InputError("nothing to analyze: give a core file, a text file ('-' for stdin) or --pid PID")
    if target == "-":
        return _from_text(sys.stdin.read(), input_format)
    path = Path(target)
    if not path.exists():
        raise InputError("%s: no such file" % path)
    if path.is_dir():
        raise InputError("%s is a directory, not a core or text file" % path)
    if path.stat().st_size == 0:
        raise InputError("%s is empty" % path)
    if _is_elf(path) and input_format is None:
        from hanganalyze.acquire.corefile import read_core

        progress("reading core notes of %s" % path)
        info = read_core(path)
        progress("running %s on %s" % (gdb, path))
        return gdbdriver.snapshot_from_core(path, info, exe=exe, gdb=gdb, timeout=timeout, progress=progress)
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


def _from_text(text: str, input_format: Optional[str]):
    """A hanganalyze/1 JSON snapshot (hang-dump, hang-analyze) as is; anything else to the parsers."""
    from hanganalyze.acquire import snapshot_json

    if input_format == snapshot_json.FORMAT_NAME or (
        input_format in (None, "auto") and snapshot_json.looks_like_snapshot(text)
    ):
        return snapshot_json.read_snapshot(text)
    from hanganalyze.acquire.text import parse_text

    return parse_text(text, input_format)


def write_output(data: str, output: Optional[Path]) -> None:
    """Write atomically: a report that failed half-way never appears under its final name."""
    if output is None:
        sys.stdout.write(data)
        if not data.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    output = output.resolve()
    fd, tmp = tempfile.mkstemp(prefix=".%s." % output.name, dir=str(output.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would surprise whoever shares the report
        os.replace(tmp, output)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _load_db_in_background(extra_dirs: List[Path]):
    """Load the signature database (YAML + schema checks, ~0.35 s CPU) in a thread while gdb does
    its work in its own process; returns a function that waits for it and re-raises its error."""
    import threading

    from hanganalyze import pipeline

    result: dict = {}

    def work() -> None:
        try:
            result["db"] = pipeline.load_signature_db(extra_dirs)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread as is
            result["error"] = e

    thread = threading.Thread(target=work, name="load-signatures", daemon=True)
    thread.start()

    def wait():
        thread.join()
        if "error" in result:
            raise result["error"]
        return result["db"]

    return wait


app = typer.Typer(add_completion=False, help="Explain why an ML process hangs or crashed.")


@app.command()
def analyze(
    target: Optional[str] = typer.Argument(
        None, help="A core file, or a text file of gdb/py-spy/pystack/faulthandler output ('-' = stdin)."
    ),
    pid: Optional[int] = typer.Option(None, "--pid", "-p", help="Analyze a live process (read-only, then detached)."),
    exe: Optional[Path] = typer.Option(None, "--exe", help="Executable of the core (default: found from the core)."),
    fmt: OutputFormat = typer.Option(None, "--format", "-f", help="Output format (default: html with -o, else text)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to this file."),
    gdb: str = typer.Option("gdb", "--gdb", help="gdb to use (e.g. cuda-gdb)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds allowed for each gdb step."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature folder (repeatable)."),
    input_format: Optional[str] = typer.Option(
        None,
        "--input-format",
        help="Force the text format: auto, gdb, pybt, pyspy, pyspy-json, pystack, faulthandler, traceback, "
        "log (any text as log lines), snapshot-json (a hang-dump JSON file).",
    ),
    redact: bool = typer.Option(False, "--redact", help="Replace user names, hosts, IPs and secrets."),
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True),
) -> None:
    """Analyze a core, a live process or pasted text and report the known bugs it matches."""
    from hanganalyze import pipeline
    from hanganalyze.render import render

    if fmt is None:
        fmt = OutputFormat.html if output is not None and output.suffix in (".html", ".htm") else OutputFormat.text
        if output is not None and output.suffix == ".json":
            fmt = OutputFormat.json
        elif output is not None and output.suffix == ".md":
            fmt = OutputFormat.md
    try:
        db_ready = _load_db_in_background(signatures)
        snapshot = acquire(target, pid, exe, gdb, timeout, input_format)
        db = db_ready()
        progress("matching %d thread(s) against signatures" % sum(len(p.threads) for p in snapshot.processes))
        snapshot = pipeline.analyse(snapshot, db)
        if redact:
            from hanganalyze.analyse.redact import redact as do_redact

            snapshot = do_redact(snapshot)
        data = render(snapshot, fmt.value)
        write_output(data, output)
    except HangAnalyzeError as e:
        fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", EXIT_TOOL)
    if output is not None:
        progress("wrote %s" % output)
    if any(f.severity in SERIOUS for f in snapshot.findings):
        raise typer.Exit(EXIT_FINDING)
    raise typer.Exit(EXIT_OK)


sig_app = typer.Typer(add_completion=False, help="List and validate signature databases.")


@sig_app.command("list")
def sig_list(
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature folder (repeatable)."),
) -> None:
    """List every signature (built-in and from --signatures folders)."""
    from hanganalyze import pipeline

    try:
        db = pipeline.load_signature_db(signatures)
    except HangAnalyzeError as e:
        fail(str(e), e.exit_code)
    for sig in db.signatures:
        typer.echo("%-45s %-9s %s" % (sig.id, sig.severity, sig.title))


@sig_app.command("validate")
def sig_validate(
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature folder (repeatable)."),
) -> None:
    """Validate signature files against the schema; exit 2 with file:line on the first error."""
    from hanganalyze import pipeline

    try:
        db = pipeline.load_signature_db(signatures)
    except HangAnalyzeError as e:
        fail(str(e), e.exit_code)
    typer.echo("%d signatures valid" % len(db.signatures))


def main() -> None:
    """Entry point: ``hanganalyze signatures ...`` is the only sub-command; anything else is analysis."""
    argv = sys.argv[1:]
    try:
        if argv and argv[0] == "signatures":
            rc = sig_app(args=argv[1:], prog_name="hanganalyze signatures", standalone_mode=False)
        else:
            rc = app(args=argv, prog_name="hanganalyze", standalone_mode=False)
    except Exception as e:  # noqa: BLE001 - only click's usage errors and aborts are handled here
        # Matched by class name: typer may bring its own copy of click.  Click prints usage errors
        # as a multi-line box; a bad command line is one line, like any other bad input.
        names = {c.__name__ for c in type(e).__mro__}
        if "UsageError" in names:
            msg = " ".join(str(e.format_message()).split())
            sys.stderr.write("hanganalyze: error: %s (see hanganalyze --help)\n" % msg)
            sys.exit(getattr(e, "exit_code", EXIT_INPUT))
        if "Abort" in names:
            sys.stderr.write("hanganalyze: error: interrupted\n")
            sys.exit(EXIT_TOOL)
        raise
    sys.exit(rc if isinstance(rc, int) else EXIT_OK)
