"""``hang-analyze``: the known-bug findings for the process being debugged, without leaving gdb.

gdb's Python has no PyYAML or jsonschema and there must be one matcher only, so this command
collects the snapshot here (the same one ``hang-dump`` writes) and hands its JSON to the installed
``hanganalyze`` command on stdin (``hanganalyze - --input-format snapshot-json``), then prints
what it says.  The executable is ``$HANGANALYZE`` when set, else ``hanganalyze`` on ``PATH``, else
the one installed beside this extension (``find_analyzer``): gdb is often started from a shell whose
``PATH`` lacks the virtual environment ``make demo`` or ``pip`` installed into.  Only the analyzer
runs, on the host; nothing runs in the debugged process.
"""

import json
import os
import shutil
import subprocess
import sys

import gdb

from .cmd_dump import require_process, write_file
from .collect import collect_snapshot
from .commands import CommandError, command, parser

FORMATS = ("text", "json", "md")
DEFAULT_TIMEOUT = 120.0
#: Exit codes of the hanganalyze command that mean "it worked" (README "Exit codes": 3 a hang,
#: 5 a deadlock, 6 a crash found).
OK_CODES = (0, 3, 5, 6)


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _beside_extension():
    """``(bin folders installed with this extension, other usual bin folders)``, nearest first.

    With the extension: from a checkout (``source REPO/gdbext/load.py``) the repository's ``.venv``
    (``make demo``, ``make install``) or ``venv``; from an installed copy (``PREFIX/lib/pythonX.Y/
    site-packages/hanganalyze_gdbext``) ``PREFIX/bin``.  Others, often missing from ``PATH``: gdb's
    own Python prefix and ``pip install --user``'s ``~/.local/bin``."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(pkg))
    own = [os.path.join(repo, ".venv", "bin"), os.path.join(repo, "venv", "bin")]
    if os.path.basename(os.path.dirname(pkg)) in ("site-packages", "dist-packages"):
        prefix = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(pkg))))
        own.insert(0, os.path.join(prefix, "bin"))  # site-packages, pythonX.Y, lib, PREFIX
    others = [d for d in (os.path.join(sys.prefix, "bin"), os.path.expanduser("~/.local/bin")) if d not in own]
    return own, others


def find_analyzer():
    """``(argv prefix, None)`` running the analyzer, or ``(None, where it looked)``.

    ``$HANGANALYZE`` when set (and only it), else ``hanganalyze`` on ``PATH``, else a ``hanganalyze``
    beside the extension or in the usual places (``_beside_extension``), else ``python3 -m
    hanganalyze`` with the Python installed beside the extension (a venv whose entry script is
    missing); never another Python, which may see the package but not its dependencies."""
    env = os.environ.get("HANGANALYZE")
    if env:
        return ([env], None) if _executable(env) else (None, "$HANGANALYZE=%s is not an executable" % env)
    found = shutil.which("hanganalyze")
    if found:
        return [found], None
    own, others = _beside_extension()
    dirs = own + others
    for d in dirs:
        if _executable(os.path.join(d, "hanganalyze")):
            return [os.path.join(d, "hanganalyze")], None
    for d in own:
        for name in ("python3", "python"):
            py = os.path.join(d, name)
            if _executable(py) and _has_module(py):
                return [py, "-m", "hanganalyze"], None
    return None, "not on PATH, not in %s" % ", ".join(dirs)


def _has_module(python):
    """Whether ``python`` can import hanganalyze's command line (asked in a subprocess on the host,
    20 s at most): a venv whose package is gone is passed over."""
    try:
        res = subprocess.run([python, "-c", "import hanganalyze.cli"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


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
    "Runs the installed 'hanganalyze' command ($HANGANALYZE, else PATH, else the one installed beside\n"
    "this extension) on this process's snapshot.",
)
_ANALYZE.add_argument("--format", "-f", type=_format, default="text", metavar="FORMAT",
                      help="report format: text, json or md")
_ANALYZE.add_argument("--signatures", action="append", default=[], metavar="DIR",
                      help="a folder of extra signature files (repeatable)")
_ANALYZE.add_argument("--timeout", type=_timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                      help="how long the analyzer may take (default %g)" % DEFAULT_TIMEOUT)
_ANALYZE.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")


def run_analyzer(argv, data, fmt, timeout, sigdirs):
    """Run the analyzer (``argv``: from ``find_analyzer``) on the snapshot JSON; returns its stdout,
    raises gdb.GdbError otherwise."""
    exe = " ".join(argv)
    cmd = list(argv) + ["-", "--input-format", "snapshot-json", "--format", fmt]
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
    exe, where = find_analyzer()
    if exe is None:
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
