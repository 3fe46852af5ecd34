"""``hang-analyze``: the known-bug findings for the process being debugged, without leaving gdb.

gdb's Python has no PyYAML or jsonschema and there must be one matcher only, so this command
collects the snapshot here (the same one ``hang-dump`` writes) and hands its JSON to the installed
``hanganalyze`` command on stdin (``hanganalyze - --input-format snapshot-json``), then prints
what it says.  The executable is ``$HANGANALYZE`` when set, else ``hanganalyze`` on ``PATH``.
"""

import json
import os
import shutil
import subprocess

import gdb

from .cmd_dump import require_process, write_file
from .collect import collect_snapshot
from .commands import CommandError, command, parser

FORMATS = ("text", "json", "md")
DEFAULT_TIMEOUT = 120.0
#: Exit codes of the hanganalyze command that mean "it worked" (3 = something serious found).
OK_CODES = (0, 3)


def find_analyzer():
    """Path of the hanganalyze executable, or None."""
    env = os.environ.get("HANGANALYZE")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    return shutil.which("hanganalyze")


def _format(value: str) -> str:
    if value not in FORMATS:
        raise CommandError("--format must be one of %s" % ", ".join(FORMATS))
    return value


def _timeout(value: str) -> float:
    try:
        timeout = float(value)
    except ValueError:
        raise CommandError("--timeout needs a number of seconds") from None
    if not timeout > 0 or timeout == float("inf"):  # NaN compares false: refused too
        raise CommandError("--timeout must be a positive number of seconds")
    return timeout


_ANALYZE = parser(
    "hang-analyze", "hang-analyze [--format text|json|md] [--signatures DIR]... [--timeout SECONDS] [-o FILE]",
    "Match the debugged process against the known hang/crash signatures and print the findings.\n"
    "Runs the installed 'hanganalyze' command ($HANGANALYZE, else PATH) on this process's snapshot.",
)
_ANALYZE.add_argument("--format", "-f", type=_format, default="text", metavar="FORMAT",
                      help="report format: text, json or md")
_ANALYZE.add_argument("--signatures", action="append", default=[], metavar="DIR",
                      help="a folder of extra signature files (repeatable)")
_ANALYZE.add_argument("--timeout", type=_timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                      help="how long the analyzer may take (default %g)" % DEFAULT_TIMEOUT)
_ANALYZE.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")


def run_analyzer(exe, data, fmt, timeout, sigdirs):
    """Run the analyzer on the snapshot JSON; returns its stdout, raises gdb.GdbError otherwise."""
    cmd = [exe, "-", "--input-format", "snapshot-json", "--format", fmt]
    for d in sigdirs:
        cmd += ["--signatures", d]
    try:
        res = subprocess.run(cmd, input=data.encode("utf-8"), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise gdb.GdbError("hang-analyze: %s did not answer within %g s (--timeout)" % (exe, timeout)) from None
    except OSError as e:
        raise gdb.GdbError("hang-analyze: cannot run %s: %s" % (exe, e.strerror or e)) from None
    if res.returncode not in OK_CODES:
        lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
        msg = lines[-1] if lines else "exit status %d" % res.returncode
        raise gdb.GdbError("hang-analyze: %s" % msg)
    return res.stdout.decode("utf-8", "replace")


@command(_ANALYZE)
def hang_analyze(args, from_tty):
    fmt, timeout, sigdirs, output = args.format, args.timeout, args.signatures, args.output
    exe = find_analyzer()
    if exe is None:
        where = "$HANGANALYZE=%s is not an executable" % os.environ["HANGANALYZE"] if os.environ.get(
            "HANGANALYZE") else "no 'hanganalyze' on PATH"
        raise gdb.GdbError(
            "hang-analyze: the hanganalyze command is needed (%s); install it with "
            "'pip install hanganalyze' or set HANGANALYZE=/path/to/hanganalyze" % where
        )
    require_process("hang-analyze")
    snap = collect_snapshot()
    data = json.dumps(snap.to_dict(), separators=(",", ":"))
    out = run_analyzer(exe, data, fmt, timeout, sigdirs)
    if output:
        write_file("hang-analyze", output, out)
        gdb.write("hang-analyze: wrote %s\n" % output)
    else:
        gdb.write(out if out.endswith("\n") else out + "\n")
